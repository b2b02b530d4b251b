"""The pool of judge processes that evaluate candidates; the caller always gets an EvalResult.

`WorkerPool` starts judges (`python -m kernelwright.hardware.judge.process`, one per GPU on CUDA, N on CPU with
TRITON_INTERPRET=1) as fresh interpreters. A judge holds a task's references across jobs and starts a
fresh, confined candidate process for every candidate (hardware.judge.server, hardware.isolation.forkserver,
hardware.candidate.runner): candidate code never runs in a judge, and never in this process.

Judges are started from one long-lived thread of this module, so PR_SET_PDEATHSIG (set by the judge
on itself) fires when this process exits, however it exits; each judge is its own process group and
writes its output to a log file whose tail explains a crash. A judge's environment carries no secrets:
API keys and tokens stay in this process.

Time limits: a judge reports each stage it enters (reference, compile, correctness, timing, baseline)
and enforces the candidate stages' limits itself, by killing the candidate process. This side waits
with the stage's deadline (plus a grace period for candidate stages) and, when it passes, SIGKILLs the
judge's process group and starts a replacement: that covers a reference or a baseline that runs too
long, and a judge that hangs. A judge that dies is replaced the same way; only that judge, never the pool.

Thread-safe: `evaluate` may be called from several threads (LangGraph runs parallel branches in
threads); each call checks out one idle judge. `evaluate_many` spreads jobs over all judges.
"""

from __future__ import annotations

import itertools
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from kernelwright import IMPORT_ROOT
from kernelwright.hardware.config import EvalConfig, toolchain_versions
from kernelwright.hardware.isolation.confine import confine_level
from kernelwright.hardware.judge.static_check import static_check
from kernelwright.hardware.result import EvalResult, Stage, Versions
from kernelwright.hardware.targets import resolve_device
from kernelwright.tasks.task import Task

_REPO_ROOT = IMPORT_ROOT  # on the judge's PYTHONPATH: `import kernelwright` works there
_LOG_TAIL_CHARS = 1500
_GRACE_S = 30.0
"""Extra time this side allows a candidate stage beyond its limit, which the judge enforces itself."""
_CANDIDATE_STAGES = ("compile", "correctness", "timing")
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")
_job_ids = itertools.count(1)
# The result's stage for a judge stage that ended in a timeout or crash ("reference" is the harness's).
_RESULT_STAGE: dict[str, Stage] = {
    "reference": "compile",
    "compile": "compile",
    "correctness": "correctness",
    "timing": "timing",
    "baseline": "timing",
}


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


class _Worker:
    """One judge process, seen from the pool (the pool's "workers" are judges)."""

    def __init__(self, index: int, device: str, gpu: str | None, start_timeout_s: float) -> None:
        self.index = index
        self.device = device
        self.gpu = gpu  # the CUDA_VISIBLE_DEVICES entry this judge gets, on CUDA
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.tmpdir = ""
        self.info: dict[str, Any] = {}
        self.ready = False
        self.restarts = 0
        self.start()

    @property
    def log_path(self) -> str:
        return os.path.join(self.tmpdir, "judge.log")

    def start(self) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix=f"kw-judge{self.index}-")
        parent_sock, child_sock = socket.socketpair()
        env = judge_env()
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH", "")) if p)
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"  # must be set before the judge imports triton
        else:
            env.pop("TRITON_INTERPRET", None)
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        args = [sys.executable, "-m", "kernelwright.hardware.judge.process", str(child_sock.fileno()), self.device, self.tmpdir,
                str(os.getpid())]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = _spawn(
                lambda: subprocess.Popen(
                    args,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(child_sock.fileno(),),
                    start_new_session=True,  # own process group: a kill takes its fork server too
                    cwd=self.tmpdir,
                )
            )
        child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self.ready = False
        self.started_at = time.monotonic()

    def wait_ready(self) -> str | None:
        """None once the judge said it is ready; otherwise why it is not (and it is restarted)."""
        if self.ready:
            return None
        assert self.conn is not None
        remaining = self.start_timeout_s - (time.monotonic() - self.started_at)
        try:
            if self.conn.poll(max(remaining, 0.0)):
                msg = self.conn.recv()
                if msg[0] == "ready":
                    self.info, self.ready = msg[1], True
                    return None
                problem = f"the judge failed to start: {msg[1]}"
            else:
                problem = f"the judge did not start within {self.start_timeout_s:.0f} s"
        except (EOFError, OSError):
            problem = "the judge exited while starting"
        problem += f"\n{self.log_tail()}"
        self.restart()
        return problem

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 4 * _LOG_TAIL_CHARS))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        # faulthandler's list of loaded extension modules says nothing about the candidate
        kept = [line for line in text.splitlines() if not line.startswith("Extension modules:")]
        text = re.sub(re.escape(self.tmpdir) + r"/cand-\w+/candidate\.py", "candidate.py", "\n".join(kept))
        return text.strip()[-_LOG_TAIL_CHARS:]

    def kill(self) -> int | None:
        """SIGKILL the judge's process group (its fork server and candidates die with it); its exit status."""
        code = None
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn, self.ready = None, None, False
        return code

    def restart(self) -> None:
        self.kill()
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        self.restarts += 1
        self.start()

    def stop(self) -> None:
        """Kill the judge and remove its directory; it holds nothing worth a graceful exit."""
        self.kill()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def _stop_all(workers: list[_Worker]) -> None:
    for w in workers:
        w.stop()


def _died(code: int | None) -> str:
    if code is None:
        return "the judge died"
    if code < 0:
        try:
            return f"the judge died from {signal.Signals(-code).name}"
        except ValueError:
            return f"the judge died from signal {-code}"
    return f"the judge exited with status {code}"


def judge_env() -> dict[str, str]:
    """This process's environment without secrets (anything named like a key, token, secret, password,
    credential or auth) and without proxy settings: a judge needs neither, and runs task code."""
    return {
        k: v
        for k, v in os.environ.items()
        if not any(m in k.upper() for m in _SECRET_MARKERS) and k.lower() not in _PROXY_VARS
    }


_spawn_requests: queue.Queue[tuple[Any, Future[Any]]] = queue.Queue()
_spawner_lock = threading.Lock()
_spawner: threading.Thread | None = None


def _spawner_loop() -> None:
    while True:
        start, future = _spawn_requests.get()
        try:
            future.set_result(start())
        except BaseException as exc:  # noqa: B036 - handed to the caller
            future.set_exception(exc)


def _spawn(start: Any) -> Any:
    """Run `start` (a Popen) on the module's one long-lived thread: a judge's PR_SET_PDEATHSIG fires when
    the thread that forked it exits, so forking from a short-lived pool thread would kill the judge."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawner_loop, name="kernelwright-judge-spawner", daemon=True)
            _spawner.start()
    future: Future[Any] = Future()
    _spawn_requests.put((start, future))
    return future.result()


class WorkerPool:
    """A pool of judges on one device kind (one per GPU, N on CPU); a context manager, or call close()."""

    def __init__(
        self, device: str = "auto", workers: int | None = None, *, start_timeout_s: float = 300.0
    ) -> None:
        resolved = resolve_device(device)
        if resolved not in ("cpu", "cuda"):  # a pool spreads over every visible GPU
            raise ValueError(f"a worker pool runs on auto, cpu or cuda (all visible GPUs), not {device!r}")
        self.device: Literal["cpu", "cuda"] = "cuda" if resolved == "cuda" else "cpu"
        confine_level()  # an unknown KERNELWRIGHT_CONFINE is a one-line error here, not in every judge
        if self.device == "cuda":
            gpus = _visible_gpus()
            if not gpus:
                raise RuntimeError("device cuda requested but no GPU is visible")
            n = workers or len(gpus)
            assignment: list[str | None] = [gpus[i % len(gpus)] for i in range(n)]
        else:
            n = workers or max(1, (os.cpu_count() or 2) // 2)
            assignment = [None] * n
        self._workers = [_Worker(i, self.device, gpu, start_timeout_s) for i, gpu in enumerate(assignment)]
        self._idle = list(self._workers)
        self._cond = threading.Condition()
        self._closed = False
        # Runs on close(), when the pool is collected, or at interpreter exit: no judge outlives its pool.
        self._finalizer = weakref.finalize(self, _stop_all, list(self._workers))

    # ----------------------------------------------------------------- public API
    @property
    def size(self) -> int:
        return len(self._workers)

    @property
    def restarts(self) -> int:
        """How many times a judge was replaced (its own work timed out or crashed, or it failed to start);
        a candidate that hangs or crashes costs only its own process, not a judge."""
        return sum(w.restarts for w in self._workers)

    def evaluate(
        self, task: Task | str | Path, candidate_source: str, config: EvalConfig | None = None
    ) -> EvalResult:
        """Evaluate one candidate; never raises: every failure is an EvalResult."""
        t0 = time.perf_counter()
        cfg = config or EvalConfig()
        try:
            result = self._evaluate(task, candidate_source, cfg)
        except Exception as exc:  # the contract: the caller gets a result, whatever broke
            result = EvalResult(
                precision=cfg.precision,
                error_kind="harness_error",
                error=f"{type(exc).__name__}: {exc}"[-2000:],
                versions=toolchain_versions(),
            )
        result.wall_s = time.perf_counter() - t0
        return result

    def evaluate_many(
        self, jobs: Iterable[tuple[Task | str | Path, str]], config: EvalConfig | None = None
    ) -> list[EvalResult]:
        """Evaluate many (task, candidate_source) pairs concurrently over the judges, in input order."""
        jobs = list(jobs)
        with ThreadPoolExecutor(max_workers=max(1, min(self.size, len(jobs)))) as ex:
            return list(ex.map(lambda job: self.evaluate(job[0], job[1], config), jobs))

    def close(self) -> None:
        """Stop every judge (a busy one is killed); idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._finalizer()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ----------------------------------------------------------------- internals
    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle:
                if self._closed:
                    raise RuntimeError("the worker pool is closed")
                self._cond.wait()
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            # Prefer a judge that has started (or said so) over one still starting after a restart.
            started = [w for w in self._idle if w.ready or (w.conn is not None and w.conn.poll(0))]
            worker = started[-1] if started else self._idle[-1]
            self._idle.remove(worker)
            return worker

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify()

    def _base_result(self, cfg: EvalConfig, worker: _Worker | None = None) -> EvalResult:
        """A result with the device, target and versions filled in, before or without a judge's verdict."""
        info = worker.info if worker is not None else next((w.info for w in self._workers if w.info), {})
        versions = Versions(**info["versions"]) if info.get("versions") else toolchain_versions()
        return EvalResult(
            precision=cfg.precision,
            device=info.get("device_name", self.device),
            target=info.get("target", "cpu-interpreter" if self.device == "cpu" else ""),
            versions=versions,
        )

    def _evaluate(self, task: Task | str | Path, source: str, cfg: EvalConfig) -> EvalResult:
        if not isinstance(task, Task):
            from kernelwright.tasks import load_task

            task = load_task(task)
        if cfg.device not in ("auto", self.device):
            res = self._base_result(cfg)
            res.error_kind = "harness_error"
            res.error = f"this pool runs on {self.device}; the config asks for {cfg.device}"
            return res
        report = static_check(source, task.name)
        if not report.ok:
            res = self._base_result(cfg)
            res.stage = "parse"
            res.error_kind = report.error_kind
            res.error = report.error
            res.torch_ops_remaining = report.torch_ops_remaining
            return res
        job = {
            "job_id": next(_job_ids),
            "task_name": task.name,
            "task_source": task.source,
            "candidate_source": source,
            "config": cfg.model_dump(mode="json"),
            "torch_ops_remaining": report.torch_ops_remaining,
        }
        worker = self._acquire()
        try:
            res = self._run_on(worker, job, cfg)
        finally:
            self._release(worker)
        if not res.torch_ops_remaining and "torch_ops_in_source" not in res.extra:
            res.torch_ops_remaining = (
                report.torch_ops_remaining
            )  # no recorded forward: the source scan's list
        _attach_roofline(res, task, worker.info.get("target_profile"))
        return res

    def _run_on(self, worker: _Worker, job: dict[str, Any], cfg: EvalConfig) -> EvalResult:
        if worker.proc is None or worker.proc.poll() is not None:
            worker.restart()  # died while idle (e.g. the OOM killer): not this candidate's doing
        problem = worker.wait_ready()
        if problem is not None:  # wait_ready restarted it: one more try before giving up
            problem = worker.wait_ready()
        if problem is not None:
            res = self._base_result(cfg, worker)
            res.stage = "compile"
            res.error_kind = "harness_error"
            res.error = problem[-2000:]
            return res
        assert worker.conn is not None
        stage = "reference"
        limit = cfg.stage_timeout(stage)
        deadline = time.monotonic() + limit
        partial: EvalResult | None = None
        try:
            worker.conn.send(("eval", job))
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not worker.conn.poll(remaining):
                    if time.monotonic() < deadline:
                        continue
                    return self._on_timeout(worker, cfg, stage, limit, partial)
                msg = worker.conn.recv()
                if msg[1] != job["job_id"]:
                    continue  # cannot happen with one job per worker at a time; never trust a stray reply
                if msg[0] == "stage":
                    stage = msg[2]
                    limit = cfg.stage_timeout(stage)
                    deadline = time.monotonic() + limit + (_GRACE_S if stage in _CANDIDATE_STAGES else 0.0)
                elif msg[0] == "partial":
                    partial = EvalResult.model_validate(msg[2])
                elif msg[0] == "result":
                    result = EvalResult.model_validate(msg[2])
                    if msg[3]:  # CUDA error or OOM in the judge's own work: its context cannot be trusted
                        result.error = ((result.error or "") + "\n(worker restarted)")[-2000:]
                        worker.restart()
                    return result
        except (EOFError, OSError):
            return self._on_crash(worker, cfg, stage, partial)

    def _on_timeout(
        self, worker: _Worker, cfg: EvalConfig, stage: str, limit: float, partial: EvalResult | None
    ) -> EvalResult:
        log = worker.log_tail()
        worker.restart()
        msg = f"the {stage} stage ran past its {limit:g} s limit; the judge was killed and restarted"
        if stage == "baseline" and partial is not None:
            # The candidate is verified and timed; only the torch.compile reference was too slow.
            partial.stage = "done"
            partial.timing_note = (partial.timing_note or "") + f"; torch.compile baseline: {msg}"
            return partial
        res = partial if partial is not None else self._base_result(cfg, worker)
        if stage == "reference":
            res.stage = "compile"
            res.error_kind = "harness_error"
            res.error = f"the task's reference (model, inputs, outputs) is too slow here: {msg}"[-2000:]
            return res
        res.stage = _RESULT_STAGE.get(stage, "compile")
        res.error_kind = "timeout"
        res.error = (msg + (f"\njudge output:\n{log}" if log else ""))[-2000:]
        res.correct = False  # a candidate that cannot be timed is not a result, even if it was verified
        return res

    def _on_crash(
        self, worker: _Worker, cfg: EvalConfig, stage: str, partial: EvalResult | None
    ) -> EvalResult:
        code = worker.proc.wait(timeout=10) if worker.proc is not None else None
        log = worker.log_tail()
        worker.restart()
        res = partial if partial is not None else self._base_result(cfg, worker)
        res.correct = False
        res.stage = _RESULT_STAGE.get(stage, "compile")
        # Dying while computing the reference is the harness's (or the task's) problem, not the candidate's.
        res.error_kind = "harness_error" if stage == "reference" else "crash"
        res.error = f"{_died(code)} during the {stage} stage; it was restarted\njudge output:\n{log}"[-2000:]
        return res


def _visible_gpus() -> list[str]:
    """CUDA_VISIBLE_DEVICES entries (or indices) of the GPUs this process may use."""
    n = _gpu_count()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        entries = [v.strip() for v in visible.split(",") if v.strip()]
        return entries[:n]
    return [str(i) for i in range(n)]


def _attach_roofline(res: EvalResult, task: Task, profile: dict[str, Any] | None) -> None:
    """roofline_floor_ms and fraction_of_floor for a timed result, from the worker's target profile."""
    if not res.timing_meaningful or not res.runtime_ms or not profile:
        return
    from kernelwright.hardware.roofline import fraction_of_floor, roofline_floor_ms
    from kernelwright.hardware.targets import Target

    floor = roofline_floor_ms(task, Target.model_validate(profile), res.precision)
    res.roofline_floor_ms = floor.floor_ms
    res.fraction_of_floor = fraction_of_floor(floor.floor_ms, res.runtime_ms)
    if floor.note:
        res.extra["roofline_note"] = floor.note


def evaluate(task: Task | str | Path, candidate_source: str, config: EvalConfig | None = None) -> EvalResult:
    """One-shot: start a one-worker pool on config.device, evaluate, shut it down."""
    cfg = config or EvalConfig()
    try:
        pool = WorkerPool(device=cfg.device, workers=1)
    except Exception as exc:
        return EvalResult(
            precision=cfg.precision, error_kind="harness_error", error=f"{type(exc).__name__}: {exc}"
        )
    with pool:
        return pool.evaluate(task, candidate_source, cfg)
