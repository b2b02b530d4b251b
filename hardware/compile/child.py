"""The subprocess side of offline compile feedback (hardware.compile.feedback runs this file as a script).

Each phase runs in a confined candidate process (hardware.isolation.contain.run_contained): it imports candidate
code. `python compile_child.py capture JOBDIR` (TRITON_INTERPRET=1): load the task and the candidate, run the
candidate's forward once, and record every Triton launch's specialization (`_LaunchRecorder`) into
JOBDIR/capture.jsonl. `python compile_child.py compile JOBDIR` (interpreter off): load the candidate
again and `triton.compile` each pending launch for the target, writing registers, spills, shared memory
or the compile error (with the candidate line it points at) to JOBDIR/compile.jsonl, one kernel at a
time. torch and triton are imported here only, inside these processes, never in the caller's.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # the subprocess side: hardware/ itself must not shadow top-level modules
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

_CANDIDATE_MODULE = "kw_candidate"
ERROR_TAIL = 3000
"""Characters of an error's text kept (its end), here and in hardware.compile.feedback."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


class _Jsonl:
    """Append-only event log, flushed per line so a crash keeps everything before it."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "a", buffering=1)

    def write(self, **event: Any) -> None:
        self.f.write(json.dumps(event, default=repr) + "\n")
        self.f.flush()


def _encode(value: Any) -> Any:
    """A constexpr or specialization value as JSON; `_decode` in the compile process reverses it."""
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    if isinstance(value, tl.constexpr):
        return _encode(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tl.dtype):
        return {"__tl_dtype__": value.name}
    if isinstance(value, tuple | list):
        return {"__tuple__": [_encode(v) for v in value]}
    fn = getattr(value, "fn", None)
    if isinstance(value, JITFunction) or (fn is not None and callable(fn) and hasattr(value, "arg_names")):
        raw = value.fn
        return {"__jit__": raw.__qualname__, "line": raw.__code__.co_firstlineno}
    return {"__unsupported__": repr(value)[:200]}


def _display(value: Any) -> Any:
    if isinstance(value, dict):
        if "__tuple__" in value:
            return [_display(v) for v in value["__tuple__"]]
        return next(iter(value.values()))
    return value


def _load_candidate(path: Path) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(_CANDIDATE_MODULE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_CANDIDATE_MODULE] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module


def _exception_text(exc: BaseException, filename: str | None = None) -> str:
    """'Type: message' plus, when the error came from a given file, the line it came from."""
    text = f"{type(exc).__name__}: {exc}"
    if filename:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
        if frames:
            f = frames[-1]
            text += f"\n  at line {f.lineno}: {(f.line or '').strip()}"
    return text[-ERROR_TAIL:]


class _LaunchRecorder:
    """Records every Triton launch the candidate's forward makes under the interpreter, as `JITFunction.run`
    would specialize it, into the capture's event log (see the module docstring of
    hardware.compile.feedback). `install` patches the interpreter's launch and the autotuner."""

    def __init__(self, log: _Jsonl, execute: bool) -> None:
        self.log = log
        self.execute = execute
        """Run the kernels too (small CPU inputs); on meta tensors nothing can execute: capture only."""
        self.record_only = False
        """Set while the autotuner's other configs are recorded (not run)."""
        self.keys: dict[str, int] = {}
        self.counts: dict[int, int] = {}
        self.binders: dict[Any, Any] = {}

    def binder_for(self, interp: Any) -> Any:
        from triton.backends.compiler import BaseBackend
        from triton.runtime.jit import JITFunction, create_function_from_signature

        binders = self.binders
        if interp.fn not in binders:
            if isinstance(interp, JITFunction):  # a Gluon kernel, which the interpreter leaves as it is
                jf = interp
            else:
                kw = {
                    k: interp.kwargs.get(k) for k in ("do_not_specialize", "do_not_specialize_on_alignment")
                }
                jf = JITFunction(interp.fn, **kw)
            binders[interp.fn] = (jf, create_function_from_signature(jf.signature, jf.params, BaseBackend))
        return binders[interp.fn]

    def record(self, interp: Any, args: tuple, kwargs: dict, grid: Any, via: str) -> None:
        from triton._utils import find_paths_if, get_iterable_path

        jf, binder = self.binder_for(interp)
        kwargs = {k: v for k, v in kwargs.items() if k not in ("warmup",)}
        bound, specialization, options = binder(*args, **kwargs)
        sigvals = [s[0] for s in specialization]
        constexpr_paths = find_paths_if(sigvals, lambda _, v: v == "constexpr")
        values = list(bound.values())
        constexprs = [[list(p), _encode(get_iterable_path(values, p))] for p in constexpr_paths]
        attrvals = [s[1] for s in specialization]
        attr_paths = find_paths_if(attrvals, lambda _, x: isinstance(x, str))
        attrs = [[list(p), get_iterable_path(attrvals, p)] for p in attr_paths]
        names = [p.name for p in jf.params]
        opts = {k: v for k, v in options.items() if isinstance(v, bool | int | float | str) or v is None}
        grid_value = None
        with contextlib.suppress(Exception):
            g = grid(bound) if callable(grid) else grid
            grid_value = [int(x) for x in g]
        raw = interp.fn
        launch = {
            "name": raw.__name__,
            "qualname": raw.__qualname__,
            "def_line": raw.__code__.co_firstlineno,
            "arg_names": names,
            "signature": {
                n: _encode(s) if isinstance(s, tuple) else s for n, s in zip(names, sigvals, strict=True)
            },
            "constexprs": constexprs,
            "constexprs_display": {
                ".".join([names[p[0]], *map(str, p[1:])]): _display(v) for p, v in constexprs if len(p) >= 1
            },
            "attrs": attrs,
            "options": opts,
        }
        key = json.dumps(launch, sort_keys=True, default=repr)
        keys, counts = self.keys, self.counts
        if key not in keys:
            keys[key] = len(keys)
            self.log.write(event="launch", via=via, grid=grid_value, **launch)
        idx = keys[key]
        counts[idx] = counts.get(idx, 0) + 1

    def install(self) -> None:
        """Route the interpreter's launches and the autotuner through this recorder."""
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.interpreter import InterpretedFunction

        recorder, log = self, self.log
        orig_run = InterpretedFunction.run

        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            try:
                recorder.record(self, args, kwargs, grid, "warmup" if warmup else "launch")
            except Exception as exc:  # a launch the binder rejects fails the same way when it runs
                if not recorder.execute or recorder.record_only:
                    raise
                log.write(event="note", message=f"could not record a launch of {self.fn.__name__}: {exc!r}")
            if recorder.record_only or not recorder.execute:
                return None
            return orig_run(self, *args, grid=grid, warmup=warmup, **kwargs)

        def autotuned_run(self: Any, *args: Any, **kwargs: Any) -> Any:
            # Every config is compiled offline; only the first runs, since timing on CPU means nothing.
            self.nargs = dict(zip(self.arg_names, args, strict=False))
            configs = self.configs
            with contextlib.suppress(Exception):
                configs = self.prune_configs(kwargs) or self.configs
            cfg = configs[0]
            try:
                if cfg.pre_hook is not None:
                    cfg.pre_hook({**self.nargs, **kwargs, **cfg.all_kwargs()})
                return self.fn.run(*args, **kwargs, **cfg.all_kwargs())
            finally:  # the other configs are recorded even when the first one fails to run
                for other in configs[1:]:
                    recorder.record_only = True
                    try:
                        self.fn.run(*args, **kwargs, **other.all_kwargs())
                    except Exception as exc:
                        log.write(event="note", message=f"could not record an autotune config: {exc!r}")
                    finally:
                        recorder.record_only = False
                self.nargs = None

        InterpretedFunction.run = run  # type: ignore[method-assign]
        Autotuner.run = autotuned_run  # type: ignore[method-assign]
        try:  # Gluon kernels stay compiled functions under the interpreter, which cannot run them
            from triton.experimental.gluon._runtime import GluonJITFunction
        except ImportError:
            return

        def gluon_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if recorder.execute:  # small CPU inputs: a launcher must not take a Gluon kernel there
                raise RuntimeError(
                    f"Gluon kernel {self.fn.__name__} launched on CPU inputs (the interpreter "
                    "cannot run Gluon)"
                )
            recorder.record(self, args, kwargs, grid, "warmup" if warmup else "launch")
            return None

        GluonJITFunction.run = gluon_run  # type: ignore[method-assign]


def _child_capture(job: Path) -> int:
    spec = json.loads((job / "job.json").read_text())
    log = _Jsonl(job / "capture.jsonl")
    import torch
    import triton

    log.write(event="start", triton=triton.__version__, torch=torch.__version__)
    recorder = _LaunchRecorder(log, execute=spec["shapes"] == "small")
    recorder.install()
    counts = recorder.counts

    def fail(kind: str, message: str) -> int:
        log.write(event="count", counts=counts)
        log.write(event="error", kind=kind, message=message)
        return 0

    try:
        from kernelwright.tasks.module import exec_task_module, task_init_inputs, task_inputs
    except ImportError as exc:
        return fail("task_error", f"the tasks package is not importable: {exc}")
    seed = int(spec["seed"])
    small = spec["shapes"] == "small"
    device_ctx = contextlib.nullcontext() if small else torch.device("meta")
    try:
        task_mod = exec_task_module(
            (job / "task.py").read_text(), spec["task_name"], filename=str(job / "task.py")
        )
        with device_ctx:
            init_inputs = task_init_inputs(task_mod, small=small)
            inputs = task_inputs(task_mod, small=small, seed=seed, device="cpu" if small else "meta")
    except Exception as exc:
        return fail("task_error", _exception_text(exc))
    cand_path = job / "candidate.py"
    try:
        cand = _load_candidate(cand_path)
        model_cls = getattr(cand, "ModelNew", None)
        if not isinstance(model_cls, type):
            return fail("import_error", "the candidate defines no ModelNew class")
    except BaseException as exc:  # SystemExit from a candidate is its failure, not ours
        return fail("import_error", _exception_text(exc, str(cand_path)))
    try:
        # On meta, tensors the forward makes without a device are meta too: nothing full-size is allocated.
        with device_ctx, torch.no_grad():
            torch.manual_seed(seed)
            model = model_cls(*init_inputs)
            model.eval()
            model(*inputs)
    except BaseException as exc:
        return fail("run_error", _exception_text(exc, str(cand_path)))
    log.write(event="count", counts=counts)
    return 0


def _decode(value: Any, jit_index: dict[tuple[str, int], Any]) -> Any:
    import triton.language as tl

    if isinstance(value, dict):
        if "__tl_dtype__" in value:
            return tl.dtype(value["__tl_dtype__"])
        if "__tuple__" in value:
            return tuple(_decode(v, jit_index) for v in value["__tuple__"])
        if "__jit__" in value:
            key = (value["__jit__"], int(value["line"]))
            if key not in jit_index:
                raise ValueError(
                    f"constexpr refers to @triton.jit function {value['__jit__']} not found at module level"
                )
            return jit_index[key]
        raise ValueError(f"constexpr value {value.get('__unsupported__')} cannot be rebuilt for compilation")
    return value


def _jit_functions(module: Any) -> dict[tuple[str, int], Any]:
    """Every JITFunction reachable from the module's globals (and class bodies), by (qualname, def line)."""
    from triton.runtime.jit import JITFunction

    found: dict[tuple[str, int], Any] = {}

    def visit(obj: Any, depth: int = 0) -> None:
        seen = 0
        while not isinstance(obj, JITFunction) and hasattr(obj, "fn") and seen < 8:  # Autotuner, Heuristics
            obj, seen = obj.fn, seen + 1
        if isinstance(obj, JITFunction):
            found[(obj.fn.__qualname__, obj.fn.__code__.co_firstlineno)] = obj
        elif isinstance(obj, type) and depth == 0:
            for v in vars(obj).values():
                visit(getattr(v, "__func__", v), 1)

    for v in list(vars(module).values()):
        visit(v)
    return found


_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def _parse_ptxas(log: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if m := _PTXAS_REGS.search(log):
        out["registers"] = int(m.group(1))
    if m := _PTXAS_SPILL.search(log):
        out["stack_frame_bytes"], out["spill_store_bytes"], out["spill_load_bytes"] = map(int, m.groups())
    notes = [
        line.split(":", 1)[1].strip()
        for line in log.splitlines()
        if re.match(r"ptxas (warning|info)\s*:\s*\(C\d+\)", line) or line.startswith("ptxas warning")
    ]
    out["ptxas_notes"] = notes[:5]
    return out


def _def_line(fn: Any, lines: list[str]) -> int:
    """The line of `def` (JITFunction.src starts there; co_firstlineno is the first decorator)."""
    first = fn.__code__.co_firstlineno
    for i in range(first - 1, min(first + 20, len(lines))):
        if lines[i].lstrip().startswith("def "):
            return i + 1
    return first


def _compile_error(
    exc: BaseException, kernel: Any, jit_index: dict[tuple[str, int], Any], lines: list[str]
) -> dict:
    """Error text and the candidate line it points at.

    A CompilationError's node line is relative to the `def` of the function it occurred in; an error in a
    called @triton.jit helper arrives as the cause of one raised at the call site, so the innermost one
    says where the problem is and the outer ones say how the kernel got there.
    """
    from triton.compiler.errors import CompilationError

    chain: list[BaseException] = []
    err: BaseException | None = exc
    while err is not None and len(chain) < 16:
        chain.append(err)
        err = err.__cause__ or err.__context__
    located = [
        e for e in chain if isinstance(e, CompilationError) and hasattr(getattr(e, "node", None), "lineno")
    ]
    if not located:
        text = f"{type(exc).__name__}: {exc}"
        if type(exc).__name__ == "PTXASError":
            # keep ptxas's own complaint, not the PTX dump that follows it
            text = "\n".join(line for line in text.splitlines() if "ptxas" in line.lower())
        lines_ = [ln for ln in text.strip().splitlines() if ln.strip()]
        return {
            "error": text[-ERROR_TAIL:],
            "error_brief": (lines_[-1] if lines_ else type(exc).__name__)[:400],
        }

    def where(e: Any) -> tuple[int, str, str]:
        owner = kernel
        if getattr(e, "src", None) is not None and getattr(kernel, "src", None) != e.src:
            owner = next((f for f in jit_index.values() if getattr(f, "src", None) == e.src), kernel)
        line = _def_line(owner.fn, lines) + e.node.lineno - 1
        text = lines[line - 1].rstrip() if 1 <= line <= len(lines) else ""
        return line, text, owner.fn.__name__

    inner = located[-1]
    line, text, owner_name = where(inner)
    message = str(inner)
    brief = str(getattr(inner, "error_message", None) or "")
    if not brief:
        # the root cause is a plain exception below the last located error
        below = chain[chain.index(inner) + 1 :]
        if below:
            brief = f"{type(below[0]).__name__}: {below[0]}"
            message += "\n" + brief
    calls = [f"{n} line {ln}" for ln, _, n in map(where, located[:-1])]
    if calls:
        message += "\n(reached through " + " -> ".join(calls) + ")"
    return {
        "error": f"CompilationError in {owner_name} at line {line}: {message}"[-ERROR_TAIL:],
        "error_brief": brief.strip().splitlines()[-1][:400] if brief.strip() else "",
        "error_line": line,
        "source_line": text,
    }


def _child_compile(job: Path) -> int:
    spec = json.loads((job / "job.json").read_text())
    log = _Jsonl(job / "compile.jsonl")
    pending = set(json.loads((job / "pending.json").read_text()))
    launches = [e for e in read_jsonl(job / "capture.jsonl") if e.get("event") == "launch"]

    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import convert_to_tuple_if_list

    knobs.nvidia.dump_ptxas_log = True  # make_cubin prints ptxas -v output: registers and spills
    knobs.compilation.always_compile = True  # a cache hit would skip ptxas and its log
    target = GPUTarget(spec["backend"], spec["arch"], spec["warp_size"])
    backend = make_backend(target)
    ptxas = ""
    with contextlib.suppress(Exception):  # which ptxas: the one shipped in the triton wheel unless overridden
        ptxas = knobs.nvidia.ptxas_blackwell.path if int(spec["arch"]) >= 100 else knobs.nvidia.ptxas.path
    log.write(event="toolchain", ptxas=ptxas)
    cand_path = job / "candidate.py"
    lines = cand_path.read_text().splitlines()
    try:
        module = _load_candidate(cand_path)
    except BaseException as exc:  # e.g. a kernel launched at import time needs a GPU outside the interpreter
        log.write(event="load_error", message=_exception_text(exc, str(cand_path)))
        return 3
    jit_index = _jit_functions(module)
    option_names = set(getattr(backend.parse_options({}), "__dataclass_fields__", {}))

    for index, launch in enumerate(launches):
        if index not in pending:
            continue
        log.write(event="start", index=index)
        result: dict[str, Any] = {"event": "done", "index": index, "compiled": False}
        fn = jit_index.get((launch["qualname"], launch["def_line"]))
        t0 = time.monotonic()
        if fn is None:
            result["error"] = (
                f"kernel {launch['qualname']} (line {launch['def_line']}) is not reachable from the module's "
                "globals; offline compilation needs kernels defined at module level"
            )
            log.write(**result)
            continue
        try:
            names = launch["arg_names"]
            signature = {n: convert_to_tuple_if_list(_untuple(launch["signature"][n])) for n in names}
            constexprs = {tuple(p): _decode(v, jit_index) for p, v in launch["constexprs"]}
            attrs = {tuple(p): backend.parse_attr(a) for p, a in launch["attrs"]}
            options = {k: v for k, v in launch["options"].items() if k in option_names}
            source_cls: Any = ASTSource
            if getattr(fn, "is_gluon", lambda: False)():  # a Gluon kernel: its own front end
                from triton.experimental.gluon._runtime import GluonASTSource

                source_cls = GluonASTSource
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                kernel = triton.compile(
                    source_cls(fn, signature, constexprs, attrs), target=target, options=options
                )
            result.update(_parse_ptxas(buf.getvalue()))
            result.update(
                compiled=True,
                shared=int(kernel.metadata.shared),
                num_warps=int(kernel.metadata.num_warps),
                num_stages=int(kernel.metadata.num_stages),
            )
        except Exception as exc:
            result.update(_compile_error(exc, fn, jit_index, lines))
        result["compile_s"] = round(time.monotonic() - t0, 3)
        log.write(**result)
    return 0


def _untuple(value: Any) -> Any:
    if isinstance(value, dict) and "__tuple__" in value:
        return [_untuple(v) for v in value["__tuple__"]]
    return value


def child_main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("capture", "compile"):
        print("usage: compile_child.py capture|compile JOBDIR", file=sys.stderr)
        return 2
    phase, job = argv[0], Path(argv[1])
    # The phase imports the candidate: it runs in a candidate process, confined as the judge's are, with
    # this process's environment (compile_feedback.phase_env: the candidate's minimal one).
    import os
    import signal
    import tempfile

    from kernelwright.hardware.isolation.contain import run_contained

    tempfile.tempdir = str(job)  # a warm server's choice may be cached here; ptxas's files go in the job
    code = run_contained(str(job), lambda: _child_capture(job) if phase == "capture" else _child_compile(job))
    if code > 128:  # a signal ended the phase: end this process the same way, for the caller's report
        sys.stdout.flush()
        sys.stderr.flush()
        with contextlib.suppress(ValueError, OSError):
            signal.signal(code - 128, signal.SIG_DFL)
            os.kill(os.getpid(), code - 128)
    return code


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
