"""Loading KernelBench-format task files into typed `Task` records, and finding the bundled suites.

Loading runs the task's own code (its import, get_init_inputs, get_inputs, Model and one forward, at the
small size only) in a child process (tasks/load_child.py), under a deadline: a task that sleeps, spins or
crashes is refused with one line that says what it was doing ("importing the file did not finish in
60 s"), and what it prints goes to stderr. The caller gets the `Task` back as plain data (source, sizes,
signature, cost); no task code runs in the caller. One child serves every load of a process, one at a
time, and is replaced after a load that timed out or killed it.

A task file that does not define the interface, does not parse, raises in its forward or returns
something other than tensors is refused with a one-line TaskError that says what to fix.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any, Literal, NoReturn

from kernelwright.tasks.errors import TaskError
from kernelwright.tasks.task import Task

_SUITES_ROOT = Path(__file__).resolve().parent

ENV_LOAD_TIMEOUT = "KERNELWRIGHT_TASK_LOAD_TIMEOUT"
DEFAULT_LOAD_TIMEOUT_S = 60.0
"""How long loading one task (its import, inputs, model and forward, at the small size) may take."""
START_TIMEOUT_S = 180.0
"""How long the loader's child may take to start (import torch): a slow disk, a machine under load."""


BundledSuite = Literal["level1", "level2", "published", "level1_bf16", "level2_bf16"]
BUNDLED_SUITES: tuple[BundledSuite, ...] = ("level1", "level2", "published", "level1_bf16", "level2_bf16")


def bundled_suite_dir(level: BundledSuite) -> Path:
    """The folder of a suite shipped with kernelwright: "level1" (single ops), "level2" (fused ops),
    "published" (single ops at the sizes of published benchmark runs, tensors of several GiB), and
    "level1_bf16" / "level2_bf16" (their GEMM, norm, softmax and convolution tasks in bfloat16)."""
    if level not in BUNDLED_SUITES:
        raise TaskError(f"unknown bundled suite {level!r}; choose one of {', '.join(BUNDLED_SUITES)}")
    return _SUITES_ROOT / level


def resolve_task_path(spec: str | Path) -> Path:
    """The task file or folder a command-line argument names: an existing path as it is, else a bundled
    task or suite named from anywhere: "level1/09_softmax" (also with ".py", a leading "tasks/", or a
    unique prefix such as "level1/09"), or "level1" for the whole suite. A name that matches nothing comes
    back unchanged (the caller says it is not found); a prefix that matches several raises TaskError."""
    given = Path(spec)
    if given.exists():
        return given
    parts = Path(str(spec).strip()).parts
    if parts[:1] == ("tasks",):
        parts = parts[1:]
    if not parts or parts[0] not in BUNDLED_SUITES or len(parts) > 2:
        return given
    suite = _SUITES_ROOT / parts[0]
    if len(parts) == 1:
        return suite
    name = parts[1].removesuffix(".py")
    exact = suite / f"{name}.py"
    if exact.is_file():
        return exact
    matches = sorted(p for p in suite.glob(f"{name}*.py") if not p.name.startswith("_"))
    if len(matches) > 1:
        names = ", ".join(p.stem for p in matches[:6]) + (", ..." if len(matches) > 6 else "")
        raise TaskError(f"{spec} names {len(matches)} bundled tasks ({names}); give more of the name")
    return matches[0] if matches else given


def _check_interface(module: types.ModuleType) -> None:
    import torch

    where = module.__file__
    model = getattr(module, "Model", None)
    if model is None:
        raise TaskError(f"{where}: no Model class (a task defines class Model(nn.Module))")
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        raise TaskError(f"{where}: Model is not a torch.nn.Module subclass")
    for fn_name in ("get_inputs", "get_init_inputs"):
        fn = getattr(module, fn_name, None)
        if fn is None:
            raise TaskError(f"{where}: no {fn_name}() function")
        if not callable(fn):
            raise TaskError(f"{where}: {fn_name} is not a function")


def load_here(source: str, name: str, path: str | Path | None) -> Task:
    """Load a task in this process, with no time limit: the loader's child process (tasks/load_child.py)
    calls it; everything else calls `load_task` / `load_task_source`, which run it there."""
    from kernelwright.tasks.analysis import MODEL_LOCK, analyze_task
    from kernelwright.tasks.module import exec_task_module, has_small_inputs

    path = Path(path) if path is not None else None
    filename = str(path) if path is not None else f"<task {name}>"
    with MODEL_LOCK:  # the task's module may build models as it is executed
        module = exec_task_module(source, name, filename=filename)
        _check_interface(module)
        analysis = analyze_task(module)
        cpu_resizable = _cpu_resizable(source, name) if analysis.checked_on == "meta" else None
    return Task(
        name=name,
        source=source,
        path=path,
        signature=analysis.signature,
        small_signature=analysis.small_signature,
        has_small_inputs=has_small_inputs(module),
        flops=analysis.flops,
        min_bytes=analysis.min_bytes,
        cost_exact=analysis.cost_exact,
        checked_on=analysis.checked_on,
        cpu_resizable=cpu_resizable,
    )


def _cpu_resizable(source: str, name: str) -> bool:
    """Whether the CPU judge can verify this task at a smaller size than its own: the sizes it tries
    (hardware/judge/inputs.py `verified_shapes`: CPU_PRIMARY_ELEMENTS, a quarter of it, four times it)."""
    from kernelwright.tasks.module import report_phase
    from kernelwright.tasks.resize import CPU_PRIMARY_ELEMENTS, shrink

    report_phase("finding a smaller size of the task for CPU (module-level size constants)")
    budgets = (CPU_PRIMARY_ELEMENTS, CPU_PRIMARY_ELEMENTS // 4, CPU_PRIMARY_ELEMENTS * 4)
    return any(shrink(source, f"{name}_resized", max(b, 16)) is not None for b in budgets)


CPU_FULL_SIZE_MAX_FLOPS = 2e10
"""A task the CPU judge can only verify at its full size is refused on CPU above this many FLOPs per
forward, or above CPU_FULL_SIZE_MAX_BYTES of tensors: the judge runs the reference and the candidate (under
the Triton interpreter) several times at that size (an 8192 x 8192 matmul, 1.1 TFLOP and 768 MiB: minutes
and over 5 GB of memory)."""
CPU_FULL_SIZE_MAX_BYTES = 512 * 2**20


def full_size_on_cpu(task: Task) -> bool:
    """Whether the CPU judge verifies `task` at its full size: it has no get_small_inputs(), is too large
    to run at load (checked on the meta device) and has no size constants to shrink (tasks/resize.py)."""
    return task.checked_on == "meta" and task.cpu_resizable is False


def check_cpu_size(task: Task, device: str = "cpu") -> str | None:
    """For a task about to be verified on `device` (resolved by the caller: "cpu", "cuda" or "cuda:N"): on CPU,
    raise TaskError when the judge could only run it at a full size over the CPU_FULL_SIZE_MAX_* bounds;
    else a line saying what a full-size verification costs (to print before it starts), or None when the
    judge verifies it at a small size or on a GPU."""
    if not full_size_on_cpu(task):
        return None
    if device != "cpu":
        return None
    where = str(task.path) if task.path is not None else f"<task {task.name}>"
    work = f"{task.flops / 1e12:.3g} TFLOP" if task.flops >= 1e12 else f"{task.flops / 1e9:.3g} GFLOP"
    cost = f"{work} and {task.min_bytes / 2**20:.0f} MiB per forward"
    if task.flops > CPU_FULL_SIZE_MAX_FLOPS or task.min_bytes > CPU_FULL_SIZE_MAX_BYTES:
        raise TaskError(
            f"{where}: too large to verify on CPU ({cost}, run several times, the candidate under the "
            "Triton interpreter): define get_small_inputs(), keep its sizes in module-level constants "
            "(then the CPU judge shrinks them), or run it on a GPU"
        )
    return (
        f"{task.name}: verified on CPU at its full size ({cost}): no get_small_inputs() and no size the CPU "
        "judge can shrink alone"
    )


def load_timeout_s() -> float:
    """The time one load may take: $KERNELWRIGHT_TASK_LOAD_TIMEOUT seconds, else 60."""
    raw = os.environ.get(ENV_LOAD_TIMEOUT, "").strip()
    if not raw:
        return DEFAULT_LOAD_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise TaskError(f"{ENV_LOAD_TIMEOUT}={raw!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise TaskError(f"{ENV_LOAD_TIMEOUT}={raw!r} must be a positive number of seconds")
    return value


def _stderr_fd() -> int:
    """Where the child's stdout goes: this process's stderr (what a task prints is seen, never mixed into
    a JSON stdout), or nowhere when there is none."""
    try:
        return sys.__stderr__.fileno() if sys.__stderr__ is not None else subprocess.DEVNULL
    except (OSError, ValueError):
        return subprocess.DEVNULL


class _LoaderChild:
    """The child process that runs tasks' code (tasks/load_child.py), started on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.reply_fd = -1
        self.buffer = b""
        self.ready = False
        self.started_at = 0.0
        self.owner = os.getpid()

    def _usable(self) -> bool:
        if self.owner != os.getpid():  # a forked copy of the process that started it: start our own
            if self.reply_fd >= 0:
                os.close(self.reply_fd)
            self.proc, self.reply_fd, self.owner = None, -1, os.getpid()
        return self.proc is not None and self.proc.poll() is None

    def prestart(self) -> None:
        with self.lock:
            if not self._usable():
                self.stop()
                self._spawn()

    def _spawn(self) -> None:
        from kernelwright import IMPORT_ROOT

        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (IMPORT_ROOT, env.get("PYTHONPATH", "")) if p)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernelwright.tasks.load_child", str(write_fd), str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=_stderr_fd(),
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,  # no terminal's Ctrl-C reaches it; a kill takes its process group
            )
        except OSError as exc:
            os.close(read_fd)
            raise TaskError(f"cannot start the task loader ({sys.executable}): {exc.strerror}") from exc
        finally:
            os.close(write_fd)
        self.reply_fd, self.buffer = read_fd, b""
        self.ready, self.started_at = False, time.monotonic()

    def _wait_ready(self) -> None:
        if self.ready:
            return
        reply = self._next(self.started_at + START_TIMEOUT_S)
        self.ready = reply is not None and bool(reply.get("ready"))
        if not self.ready:
            why = "did not start in time" if reply is None else "exited while starting"
            if reply is not None and self.proc is not None:
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            code = self.stop()
            raise TaskError(f"the task loader {why}{'' if code is None else f' (exit status {code})'}")

    def stop(self) -> int | None:
        """Kill the child (and what it started) and forget it; its exit status when it had one."""
        proc, self.proc = self.proc, None
        if self.reply_fd >= 0:
            os.close(self.reply_fd)
            self.reply_fd = -1
        if proc is None:
            return None
        code = proc.poll()
        if code is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        proc.wait()
        return code

    def _next(self, deadline: float) -> dict[str, Any] | None:
        """The child's next reply; None when the deadline passed, {"closed": True} when the child closed
        its end (it died)."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.reply_fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.reply_fd, 1 << 16)
            if not chunk:
                return {"closed": True}
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def load(self, source: str, name: str, path: Path | None, timeout_s: float) -> Task:
        where = str(path) if path is not None else f"<task {name}>"
        with self.lock:
            if not self._usable():
                self.stop()
                self._spawn()
            self._wait_ready()
            assert self.proc is not None and self.proc.stdin is not None
            request = {"source": source, "name": name, "path": str(path) if path is not None else None}
            phase = "loading the task"
            try:
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
                deadline = time.monotonic() + timeout_s
                while True:
                    reply = self._next(deadline)
                    if reply is None or "closed" in reply:
                        self._gone(where, phase, timeout_s, timed_out=reply is None)
                    if "phase" in reply:
                        phase = reply["phase"]
                    elif "error" in reply:
                        raise TaskError(reply["error"])
                    else:
                        return Task.model_validate(reply["task"])
            except (BrokenPipeError, ConnectionResetError):
                self._gone(where, phase, timeout_s, timed_out=False)
            except TaskError:
                raise
            except BaseException:
                self.stop()  # interrupted mid-load (Ctrl-C): the child is still in this task
                raise

    def _gone(self, where: str, phase: str, timeout_s: float, *, timed_out: bool) -> NoReturn:
        if not timed_out and self.proc is not None:
            try:
                self.proc.wait(timeout=10)  # it closed its end: its exit status follows
            except subprocess.TimeoutExpired:
                pass
        code = self.stop()
        if timed_out:
            raise TaskError(
                f"{where}: {phase} did not finish in {timeout_s:g} s (the task's own code; "
                f"{ENV_LOAD_TIMEOUT} sets the limit)"
            )
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        raise TaskError(f"{where}: the process loading the task {how} during {phase}")


_CHILD = _LoaderChild()
atexit.register(_CHILD.stop)


def prestart() -> None:
    """Start the loader's child process now, without waiting for it: it imports torch while the caller
    gets on with its own start-up, and the first load finds it ready."""
    _CHILD.prestart()


def _load(source: str, name: str, path: Path | None) -> Task:
    return _CHILD.load(source, name, path, load_timeout_s())


def load_task(path: str | Path) -> Task:
    """Load one task file; its name is the file's stem (e.g. "09_softmax")."""
    p = Path(path)
    if not p.is_file():
        raise TaskError(f"{p}: task file not found")
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{p}: cannot read task file: {exc}") from exc
    return _load(source, p.stem, p)


def load_task_source(source: str, name: str) -> Task:
    """Load a task from its source text (messages refer to it as `<task NAME>`)."""
    return _load(source, name, None)


def load_suite(directory: str | Path) -> list[Task]:
    """Load every `*.py` task in a folder (not `_`-prefixed files), sorted by file name."""
    d = Path(directory)
    if not d.is_dir():
        raise TaskError(f"{d}: suite folder not found")
    files = sorted(p for p in d.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise TaskError(f"{d}: no task files (*.py) in suite folder")
    return [load_task(p) for p in files]
