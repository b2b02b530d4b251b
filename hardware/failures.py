"""Naming and describing what went wrong in candidate code: error kinds and readable tracebacks.

Used inside the candidate process (to report its own exceptions) and in the judge (for the
reference's); imports torch and triton lazily, so the judge can use it before either is needed.
"""

from __future__ import annotations

import os
import traceback

ERROR_TAIL_CHARS = 2000


def tail(text: str, limit: int = ERROR_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def harness_failure(side: str, exc: BaseException) -> str:
    """The report of the harness's own failure (not the candidate's): the exception's type and message on the
    first line, which a one-line report shows, then as much of the traceback's end as the report's length
    leaves room for."""
    head = tail(f"the {side} failed: {type(exc).__name__}: {exc}", ERROR_TAIL_CHARS // 2)
    return f"{head}\n{tail(''.join(traceback.format_exception(exc)), ERROR_TAIL_CHARS - len(head) - 1)}"


def exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def classify_exception(exc: BaseException) -> str:
    """The error kind of an exception raised by a candidate's code: crash (CUDA error, out of memory),
    compile_error (Triton rejected a kernel) or runtime_error."""
    import torch

    chain = exception_chain(exc)
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    if (
        any(isinstance(e, torch.OutOfMemoryError | MemoryError) for e in chain)
        or "can't allocate memory" in text
    ):
        return "crash"  # out of memory, on the device or (past the candidate's memory limit) on the host
    cuda_markers = ("CUDA error", "CUDA driver error", "illegal memory access", "device-side assert",
                    "Triton Error [CUDA]", "AcceleratorError", "cudaError", "unspecified launch failure")  # fmt: skip
    if any(m in text for m in cuda_markers):
        return "crash"
    try:
        from triton.errors import TritonError
    except ImportError:  # pragma: no cover - triton is a dependency
        return "runtime_error"
    # Triton raises CompilationError (and under the interpreter, InterpreterError for anything wrong in a
    # kernel body) at the first launch; OutOfResources too is decided when compiling for the device.
    if any(isinstance(e, TritonError) for e in chain):
        return "compile_error"
    return "runtime_error"


def format_exception(exc: BaseException, candidate_file: str | None = None) -> str:
    """What a candidate's author needs: the error, its cause, and the candidate's own frames.

    Harness and library frames are left out; under the interpreter the frame inside the kernel body (the
    line Triton rejects) is among the candidate's frames, found in the chained cause.
    """
    chain = exception_chain(exc)
    if isinstance(exc, SystemExit):
        lines = [f"SystemExit({exc.code!r}): the candidate called sys.exit() or raised SystemExit"]
    else:
        lines = [f"{type(exc).__name__}: {str(exc)[:1000]}"]
    if len(chain) > 1:
        inner = chain[-1]
        lines.append(f"caused by {type(inner).__name__}: {str(inner)[:1000]}")
    frames = []
    for e in chain:
        for fr in traceback.extract_tb(e.__traceback__):
            if candidate_file and fr.filename == candidate_file:
                frames.append(f"  candidate.py, line {fr.lineno}, in {fr.name}: {(fr.line or '').strip()}")
    if frames:
        lines.append("in the candidate (outermost first):")
        lines.extend(dict.fromkeys(frames))
    elif exc.__traceback__ is not None:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        lines.append(f"  at {last.filename}, line {last.lineno}, in {last.name}")
    if _no_driver(chain):
        lines.append(
            "hint: this ran under Triton's interpreter (a CPU judge), which runs @triton.jit kernels only; a "
            "Gluon kernel (triton.experimental.gluon), a compiled kernel or a driver call needs a GPU"
        )
    text = "\n".join(line for line in lines if line)
    if candidate_file:
        text = text.replace(candidate_file, "candidate.py")
    return tail(text)


def _no_driver(chain: list[BaseException]) -> bool:
    """Triton found no GPU driver while its interpreter was on: the candidate reached for the GPU itself
    (Triton 3.6 says "0 active drivers")."""
    return os.environ.get("TRITON_INTERPRET") == "1" and any("active drivers" in str(e) for e in chain)
