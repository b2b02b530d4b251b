"""Offline compile feedback: compile a candidate's Triton kernels for a GPU target without a GPU.

What a kernel costs on the GPU (registers, spills, shared memory) and whether it compiles at all for
that architecture is known to the compiler, not the interpreter. `compile_for_target` finds out
without a GPU, in two subprocesses (candidate code never runs in the caller's process):

1. capture (TRITON_INTERPRET=1): build the candidate's `ModelNew` from the task's init inputs and run
   its forward once, either on the task's full-size inputs as meta tensors with kernels not executed
   (`shapes="full"`: block sizes and integer specializations match the real run) or on its small CPU
   inputs with kernels executed by the interpreter (`shapes="small"`); `"auto"` (the default) tries
   full and falls back to small when the forward cannot run on meta tensors. Every Triton launch is
   intercepted and its specialization recorded exactly as `JITFunction.run` would compute it:
   argument types (pointer dtypes, i32/i64), divisibility attributes, constexpr values,
   num_warps/num_stages. Autotuned kernels record every config.
2. compile (interpreter off): load the candidate module again and, for each distinct launch, call
   `triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget(...))`. ptxas
   ships inside the triton wheel (triton/backends/nvidia/bin), so this runs on a machine without a
   CUDA driver. Its `-v` log gives registers and spills; the kernel metadata gives shared memory.

Results are written to files one kernel at a time, so a compiler crash or a timeout loses only the
kernel it hit; every call returns a `CompileReport` (bad arguments raise ValueError).

Run as a script (`python compile_feedback.py capture|compile JOBDIR`) it is the subprocess side.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if __name__ == "__main__":  # the subprocess side: hardware/ itself must not shadow top-level modules
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from pydantic import BaseModel, Field, computed_field  # noqa: E402

from kernelwright import IMPORT_ROOT  # noqa: E402

if TYPE_CHECKING:
    from kernelwright.hardware.targets import Target
    from kernelwright.tasks.task import Task

Shapes = Literal["auto", "small", "full"]
CompileErrorKind = Literal[
    "task_error",  # the task itself could not provide inputs or a model
    "import_error",  # the candidate module failed to load (syntax error, missing name, ...)
    "run_error",  # the forward raised while launches were captured
    "no_launch",  # the forward launched no Triton kernel
    "compile_error",  # at least one kernel failed to compile or exceeds a hardware limit
    "timeout",
    "crash",  # a subprocess died
]

_REPO_ROOT = IMPORT_ROOT  # on the child's PYTHONPATH: `import kernelwright` works there
_CANDIDATE_MODULE = "kw_candidate"
_ERROR_TAIL = 3000


class KernelCompileReport(BaseModel):
    """One distinct launch of one kernel (same specialization and options), compiled for the target."""

    name: str
    qualname: str = ""
    def_line: int | None = Field(default=None, description="line of the kernel's `def` in the candidate")
    signature: dict[str, Any] = Field(default_factory=dict, description="argument name -> triton type")
    constexprs: dict[str, Any] = Field(default_factory=dict)
    divisible_by_16: list[str] = Field(
        default_factory=list,
        description="pointer/int arguments specialized as multiples of 16 (vectorizable)",
    )
    num_warps: int = 4
    num_stages: int = 3
    grid: list[int] | None = None
    launches: int = 1
    via: str = "launch"
    compiled: bool = False
    error: str | None = None
    error_brief: str | None = Field(default=None, description="the root cause in one line")
    error_line: int | None = Field(default=None, description="candidate source line the error points at")
    source_line: str | None = None
    registers: int | None = Field(default=None, description="registers per thread (ptxas)")
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    stack_frame_bytes: int | None = None
    shared_memory_bytes: int | None = None
    shared_memory_limit_bytes: int = 0
    exceeds_shared_memory: bool = False
    exceeds_registers: bool = Field(
        default=False, description="registers x threads per block exceed the registers of one SM"
    )
    ptxas_notes: list[str] = Field(default_factory=list, description="ptxas info/warning lines worth reading")
    compile_s: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def spills(self) -> bool:
        return bool(self.spill_store_bytes or self.spill_load_bytes)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return self.compiled and not self.exceeds_shared_memory and not self.exceeds_registers

    def summary(self) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in self.constexprs.items())
        head = f"{self.name}[num_warps={self.num_warps}, num_stages={self.num_stages}{', ' if consts else ''}{consts}]"
        if not self.compiled:
            where = (
                f" (line {self.error_line}: {self.source_line.strip()})"
                if self.error_line and self.source_line
                else ""
            )
            brief = self.error_brief or ((self.error or "").strip().splitlines() or ["unknown error"])[-1]
            return f"{head}: compile FAILED{where}: {brief}"
        parts = [f"{self.registers} registers" if self.registers is not None else "registers unknown"]
        if self.spills:
            parts.append(f"SPILLS {self.spill_store_bytes} B stores / {self.spill_load_bytes} B loads")
        parts.append(f"{self.shared_memory_bytes} B shared (limit {self.shared_memory_limit_bytes})")
        if self.exceeds_shared_memory:
            parts.append("EXCEEDS shared memory limit: launch would fail")
        if self.exceeds_registers:
            parts.append("EXCEEDS registers per SM at this num_warps: launch would fail")
        return f"{head}: " + ", ".join(parts)


class CompileReport(BaseModel):
    """Offline compile feedback for one candidate on one target."""

    ok: bool = False
    target: str = ""
    gpu_target: str = Field(default="", description="e.g. cuda:90")
    shapes: Shapes = "small"
    kernels: list[KernelCompileReport] = Field(default_factory=list)
    error_kind: CompileErrorKind | None = None
    error: str | None = None
    run_error: str | None = Field(
        default=None,
        description="the forward raised under the interpreter (launches before it were compiled)",
    )
    launches_seen: int = 0
    notes: list[str] = Field(default_factory=list)
    ptxas: str = Field(default="", description="the ptxas binary that assembled the kernels")
    wall_s: float = 0.0
    triton_version: str = ""

    def summary(self) -> str:
        """A few lines for a prompt or a log: overall verdict, then one line per kernel."""
        head = f"compile for {self.target} ({self.gpu_target}, {self.shapes} shapes): "
        head += "ok" if self.ok else f"FAILED ({self.error_kind})"
        lines = [head] + ["  " + k.summary() for k in self.kernels]
        if self.error and self.error_kind != "compile_error":  # a compile error is in its kernel's line
            lines.append("  " + self.error.strip()[-600:])
        elif self.run_error:
            lines.append("  the forward also failed under the interpreter: " + self.run_error.strip()[-600:])
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------
# caller side


def compile_for_target(
    candidate_source: str,
    task: Task | str | Path,
    target: Target | str = "nvidia-h200",
    *,
    timeout_s: float = 120.0,
    shapes: Shapes = "auto",
    seed: int = 0,
    python: str | None = None,
) -> CompileReport:
    """Compile every Triton kernel the candidate launches for `target`, without a GPU.

    `task` is a Task, a task file's source text, or a path to one; it supplies the model's init inputs
    and the forward inputs. `timeout_s` bounds all subprocesses together; on expiry they are killed.
    `shapes`: "full" captures launches at the full size on the meta device (kernels not executed), so
    block sizes and integer specializations derived from tensor sizes match the real run; "small" runs
    the forward on the task's small CPU inputs in the interpreter; "auto" tries full, then small.
    """
    from kernelwright.hardware.targets import get_target

    tgt = get_target(target)
    backend, arch, warp_size = tgt.gpu_target_spec()  # ValueError for cpu-interpreter
    if shapes not in ("auto", "small", "full"):
        raise ValueError(f"shapes must be 'auto', 'small' or 'full', not {shapes!r}")
    task_name, task_source = _task_source(task)
    started = time.monotonic()
    deadline = started + timeout_s
    report = CompileReport(target=tgt.name, gpu_target=f"{backend}:{arch}", shapes=shapes)
    job = Path(tempfile.mkdtemp(prefix="kw-compile-"))
    try:
        (job / "candidate.py").write_text(candidate_source)
        (job / "task.py").write_text(task_source)
        (job / "job.json").write_text(
            json.dumps(
                {
                    "task_name": task_name,
                    "shapes": shapes,
                    "seed": seed,
                    "backend": backend,
                    "arch": arch,
                    "warp_size": warp_size,
                    "shared_memory_limit": tgt.shared_memory_per_block_bytes,
                    "registers_per_sm": tgt.registers_per_sm,
                    "max_threads_per_block": tgt.max_threads_per_block,
                }
            )
        )
        _run_phases(job, report, deadline, python or sys.executable)
    finally:
        shutil.rmtree(job, ignore_errors=True)
    report.wall_s = round(time.monotonic() - started, 3)
    return report


def _task_source(task: Any) -> tuple[str, str]:
    if isinstance(task, Path):
        try:
            return task.stem, task.read_text()
        except OSError as e:
            raise ValueError(f"cannot read task file {task}: {e}") from None
    if isinstance(task, str):
        if "\n" not in task and task.strip().endswith(".py") and Path(task.strip()).is_file():
            return _task_source(Path(task.strip()))
        return "task", task
    source = getattr(task, "source", None)
    if not isinstance(source, str) or not source.strip():
        raise ValueError("task must be a Task with source, a task file's source, or a path to one")
    return str(getattr(task, "name", "task")), source


def _child_env(job: Path, interpret: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["TRITON_CACHE_DIR"] = str(job / "triton-cache")
    # The capture runs on CPU by design; the compile needs no device. Hide any GPU from candidate code.
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("OMP_NUM_THREADS", "1")
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def _run_child(phase: str, job: Path, deadline: float, python: str) -> tuple[int | None, str]:
    """Run one phase; returns (exit code or None on timeout, tail of its output)."""
    log = job / f"{phase}.log"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None, ""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), phase, str(job)],
            env=_child_env(job, interpret=(phase == "capture")),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: ptxas and any candidate children die with it
            cwd=str(job),
        )
        code: int | None = None
        try:
            code = proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            pass
        finally:  # on timeout, and when the caller is interrupted: nothing outlives this call
            if code is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    tail = log.read_text(errors="replace")[-_ERROR_TAIL:] if log.exists() else ""
    return code, tail


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _capture(job: Path, shapes: str, deadline: float, python: str) -> dict[str, Any]:
    """Run the capture phase at `shapes`; what it saw, read back from its event log."""
    spec = json.loads((job / "job.json").read_text())
    (job / "job.json").write_text(json.dumps({**spec, "shapes": shapes}))
    (job / "capture.jsonl").unlink(missing_ok=True)
    code, tail = _run_child("capture", job, deadline, python)
    events = _read_jsonl(job / "capture.jsonl")
    counts: dict[int, int] = {}
    for e in events:
        if e.get("event") == "count":
            counts = {int(k): v for k, v in e["counts"].items()}
    return {
        "code": code,
        "tail": tail,
        "launches": [e for e in events if e.get("event") == "launch"],
        "counts": counts,
        "failure": next((e for e in events if e.get("event") == "error"), None),
        "triton": next((e.get("triton") for e in events if e.get("event") == "start"), "") or "",
    }


def _run_phases(job: Path, report: CompileReport, deadline: float, python: str) -> None:
    shapes = "full" if report.shapes == "auto" else report.shapes
    cap = _capture(job, shapes, deadline, python)
    failed = cap["code"] != 0 or not cap["launches"] or cap["failure"] is not None
    broken = cap["failure"] is not None and cap["failure"]["kind"] == "import_error"  # fails the same way
    if report.shapes == "auto" and cap["code"] is not None and failed and not broken:
        # Some candidates cannot run on meta tensors (.item(), data-dependent branches): use real small inputs.
        why = (
            cap["failure"]["message"]
            if cap["failure"]
            else f"exit {cap['code']}, {len(cap['launches'])} launches"
        )
        why = " ".join(why.split())[:300]
        report.notes.append(f"full-size capture on the meta device failed ({why}); small inputs used")
        shapes = "small"
        cap = _capture(job, shapes, deadline, python)
    report.shapes = shapes  # type: ignore[assignment]
    code, tail, launches, counts, failure = (
        cap["code"],
        cap["tail"],
        cap["launches"],
        cap["counts"],
        cap["failure"],
    )
    report.launches_seen = sum(counts.values()) if counts else len(launches)
    report.triton_version = cap["triton"]
    if code is None:
        report.error_kind, report.error = "timeout", "capturing kernel launches ran past the time limit"
    elif failure is not None and failure["kind"] == "run_error":
        # Kernels launched before the failure are still compiled: a compile error there explains more.
        report.run_error = failure["message"]
    elif failure is not None:
        report.error_kind, report.error = failure["kind"], failure["message"]
    elif code != 0:
        report.error_kind = "crash"
        report.error = f"the capture process died ({_describe_exit(code)}): {tail.strip()[-1500:]}"

    pending = list(range(len(launches)))
    results: dict[int, dict[str, Any]] = {}
    while pending and code is not None:
        (job / "pending.json").write_text(json.dumps(pending))
        ccode, ctail = _run_child("compile", job, deadline, python)
        rows = _read_jsonl(job / "compile.jsonl")
        report.ptxas = next((r["ptxas"] for r in rows if r.get("event") == "toolchain"), report.ptxas)
        load_error = next((r["message"] for r in rows if r.get("event") == "load_error"), None)
        if load_error is not None:
            for i in pending:
                results[i] = {
                    "error": f"loading the candidate outside the interpreter failed: {load_error}",
                    "error_brief": "loading the candidate outside the interpreter failed: "
                    + load_error.splitlines()[0][:300],
                }
            break
        for r in rows:
            if r.get("event") == "done":
                results[r["index"]] = r
        started = [r["index"] for r in rows if r.get("event") == "start" and r["index"] not in results]
        pending = [i for i in pending if i not in results]
        if ccode == 0 or not pending:
            break
        if ccode is None:
            for i in pending:
                results[i] = {"error": "compiling ran past the time limit"}
            if report.error_kind is None:
                report.error_kind, report.error = "timeout", "compiling ran past the time limit"
            break
        # The compiler died: blame the kernel it was on, then carry on with the rest in a new process.
        culprit = started[-1] if started else pending[0]
        results[culprit] = {
            "error": f"the compiler process died ({_describe_exit(ccode)}): {ctail.strip()[-1500:]}"
        }
        pending = [i for i in pending if i != culprit]

    for i, launch in enumerate(launches):
        r = results.get(i, {"error": "not compiled"})
        report.kernels.append(_kernel_report(launch, r, counts.get(i, 1), job))
    if report.error_kind is None:
        bad = next((k for k in report.kernels if not k.ok), None)
        if bad is not None:
            report.error_kind, report.error = "compile_error", bad.summary()
        elif report.run_error is not None:
            report.error_kind, report.error = "run_error", report.run_error
        elif not report.kernels:
            report.error_kind, report.error = "no_launch", "the forward launched no Triton kernel"
    report.ok = report.error_kind is None and bool(report.kernels)


def _kernel_report(launch: dict[str, Any], r: dict[str, Any], count: int, job: Path) -> KernelCompileReport:
    limits = json.loads((job / "job.json").read_text())
    options = launch.get("options", {})
    num_warps = int(r.get("num_warps") or options.get("num_warps") or 4)
    num_stages = int(r.get("num_stages") or options.get("num_stages") or 3)
    shared = r.get("shared")
    regs = r.get("registers")
    threads = num_warps * int(limits["warp_size"])
    return KernelCompileReport(
        name=launch["name"],
        qualname=launch.get("qualname", ""),
        def_line=launch.get("def_line"),
        signature={k: v for k, v in launch.get("signature", {}).items() if v != "constexpr"},
        constexprs=launch.get("constexprs_display", {}),
        divisible_by_16=[
            launch["arg_names"][p[0]] for p, a in launch.get("attrs", []) if len(p) == 1 and "D" in str(a)
        ],
        num_warps=num_warps,
        num_stages=num_stages,
        grid=launch.get("grid"),
        launches=count,
        via=launch.get("via", "launch"),
        compiled=bool(r.get("compiled")),
        error=(r.get("error") or None) and str(r["error"])[-_ERROR_TAIL:],
        error_brief=r.get("error_brief") or ((r.get("error") or "").strip().splitlines() or [None])[-1],
        error_line=r.get("error_line"),
        source_line=r.get("source_line"),
        registers=regs,
        spill_store_bytes=r.get("spill_store_bytes"),
        spill_load_bytes=r.get("spill_load_bytes"),
        stack_frame_bytes=r.get("stack_frame_bytes"),
        shared_memory_bytes=shared,
        shared_memory_limit_bytes=int(limits["shared_memory_limit"]),
        exceeds_shared_memory=shared is not None and shared > int(limits["shared_memory_limit"]),
        exceeds_registers=(
            (regs is not None and regs * threads > int(limits["registers_per_sm"]))
            or threads > int(limits["max_threads_per_block"])
        ),
        ptxas_notes=r.get("ptxas_notes", []),
        compile_s=float(r.get("compile_s", 0.0)),
    )


# ----------------------------------------------------------------------------------------------------
# subprocess side (imports torch and triton; never imported by the caller's process for these paths)


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
    return text[-_ERROR_TAIL:]


def _child_capture(job: Path) -> int:
    spec = json.loads((job / "job.json").read_text())
    log = _Jsonl(job / "capture.jsonl")
    import torch
    import triton
    from triton._utils import find_paths_if, get_iterable_path
    from triton.backends.compiler import BaseBackend
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction, create_function_from_signature

    log.write(event="start", triton=triton.__version__, torch=torch.__version__)
    execute = spec["shapes"] == "small"  # on meta tensors nothing can execute: capture only
    state = {"record_only": False}
    keys: dict[str, int] = {}
    counts: dict[int, int] = {}
    binders: dict[Any, Any] = {}

    def binder_for(interp: Any) -> Any:
        if interp.fn not in binders:
            kw = {k: interp.kwargs.get(k) for k in ("do_not_specialize", "do_not_specialize_on_alignment")}
            jf = JITFunction(interp.fn, **kw)
            binders[interp.fn] = (jf, create_function_from_signature(jf.signature, jf.params, BaseBackend))
        return binders[interp.fn]

    def record(interp: Any, args: tuple, kwargs: dict, grid: Any, via: str) -> None:
        jf, binder = binder_for(interp)
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
        if key not in keys:
            keys[key] = len(keys)
            log.write(event="launch", via=via, grid=grid_value, **launch)
        idx = keys[key]
        counts[idx] = counts.get(idx, 0) + 1

    orig_run = InterpretedFunction.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        try:
            record(self, args, kwargs, grid, "warmup" if warmup else "launch")
        except Exception as exc:  # a launch the binder rejects fails the same way when it runs
            if not execute or state["record_only"]:
                raise
            log.write(event="note", message=f"could not record a launch of {self.fn.__name__}: {exc!r}")
        if state["record_only"] or not execute:
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
                state["record_only"] = True
                try:
                    self.fn.run(*args, **kwargs, **other.all_kwargs())
                except Exception as exc:
                    log.write(event="note", message=f"could not record an autotune config: {exc!r}")
                finally:
                    state["record_only"] = False
            self.nargs = None

    InterpretedFunction.run = run  # type: ignore[method-assign]
    Autotuner.run = autotuned_run  # type: ignore[method-assign]

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
            "error": text[-_ERROR_TAIL:],
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
        "error": f"CompilationError in {owner_name} at line {line}: {message}"[-_ERROR_TAIL:],
        "error_brief": brief.strip().splitlines()[-1][:400] if brief.strip() else "",
        "error_line": line,
        "source_line": text,
    }


def _child_compile(job: Path) -> int:
    spec = json.loads((job / "job.json").read_text())
    log = _Jsonl(job / "compile.jsonl")
    pending = set(json.loads((job / "pending.json").read_text()))
    launches = [e for e in _read_jsonl(job / "capture.jsonl") if e.get("event") == "launch"]

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
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                kernel = triton.compile(
                    ASTSource(fn, signature, constexprs, attrs), target=target, options=options
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


def _child_main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("capture", "compile"):
        print("usage: compile_feedback.py capture|compile JOBDIR", file=sys.stderr)
        return 2
    phase, job = argv[0], Path(argv[1])
    return _child_capture(job) if phase == "capture" else _child_compile(job)


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
