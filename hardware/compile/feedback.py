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

The subprocess side is hardware.compile.child. Each phase is a fork of a warm server that imported torch
and Triton once and never runs candidate code (hardware.compile.server: a phase starts in milliseconds
instead of ~1.8 s of imports); with KERNELWRIGHT_COMPILE_SERVER=0, another Python, or no server to be
had, it is a cold process running the script (`python compile_child.py capture|compile JOBDIR`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, computed_field

from kernelwright import IMPORT_ROOT
from kernelwright.hardware.compile import server as compile_server
from kernelwright.hardware.compile.child import ERROR_TAIL, read_jsonl
from kernelwright.hardware.isolation.confine import confine_level
from kernelwright.hardware.isolation.env import minimal_env

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
_CHILD = Path(__file__).resolve().with_name("child.py")
"""The subprocess side, run as a script."""


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
    confine_level()  # an unknown KERNELWRIGHT_CONFINE: a one-line ValueError before anything runs
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


CAPTURE_TMA_ENV = "KERNELWRIGHT_CAPTURE_TMA"
"""Set to 1 in the capture of a compile for a target with Hopper's TMA (sm_90+): the offline writer's matmul
launchers then take their tensor-descriptor twin on meta tensors (emit.HELPERS["_kw_tma"]), so the kernel
compiled and reported is the one that GPU runs; for older targets they take the pointer kernel, as there."""


CAPTURE_WS_ENV = "KERNELWRIGHT_CAPTURE_WS"
"""Set to 1 in the capture of a compile for an sm_90 target: the matmul launchers then take Hopper's Gluon
GEMM (ping-pong or cooperative) on meta tensors (emit_gluon), as an sm_90 GPU would; 0 for other targets, which
never run it."""


def phase_env(interpret: bool) -> dict[str, str]:
    """The environment of a phase process (and of the warm server its fork comes from): the candidate's
    minimal one (hardware.isolation.env.minimal_env: no keys, tokens or proxies of the caller's), this checkout
    importable, no GPU, one OpenMP thread, Triton's interpreter on for the capture only. A phase imports
    the candidate, so it is a candidate process: compile_child confines it as the judge's are."""
    env = minimal_env("cpu" if interpret else "cuda", home=tempfile.gettempdir())
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    # The capture runs on CPU by design; the compile needs no device. Hide any GPU from candidate code.
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("OMP_NUM_THREADS", "1")
    if "KERNELWRIGHT_CONFINE" in os.environ:
        env["KERNELWRIGHT_CONFINE"] = os.environ["KERNELWRIGHT_CONFINE"]
    if not interpret:
        env.pop("TRITON_INTERPRET", None)
    return env


def _child_env(job: Path, interpret: bool) -> dict[str, str]:
    """`phase_env` with this job's Triton cache and the capture's TMA setting for its target."""
    env = phase_env(interpret)
    spec = json.loads((job / "job.json").read_text())
    cuda_arch = int(spec.get("arch") or 0) if spec.get("backend") == "cuda" else 0
    env[CAPTURE_TMA_ENV] = "1" if cuda_arch >= 90 else "0"
    env[CAPTURE_WS_ENV] = "1" if cuda_arch == 90 else "0"
    env.update(HOME=str(job), TMPDIR=str(job), TRITON_CACHE_DIR=str(job / "triton-cache"))
    return env


def _run_child(phase: str, job: Path, deadline: float, python: str) -> tuple[int | None, str]:
    """Run one phase; returns (exit code or None on timeout, tail of its output)."""
    log = job / f"{phase}.log"
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None, ""
    if compile_server.enabled(python):  # a fork of a warm process: no torch and Triton import per phase
        env = _child_env(job, interpret=(phase == "capture"))
        warm = compile_server.run_phase(phase, job, env, log, deadline)
        if not isinstance(warm, str):
            tail = log.read_text(errors="replace")[-ERROR_TAIL:] if log.exists() else ""
            return warm, tail
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [python, str(_CHILD), phase, str(job)],
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
    tail = log.read_text(errors="replace")[-ERROR_TAIL:] if log.exists() else ""
    return code, tail


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
    events = read_jsonl(job / "capture.jsonl")
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
        rows = read_jsonl(job / "compile.jsonl")
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
        error=(r.get("error") or None) and str(r["error"])[-ERROR_TAIL:],
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
