"""The coordinator of `kernelwright bench`: optimize every task of one or more folders, one worker
process per GPU.

The bench folder (--out DIR: bench.json, the tasks.jsonl ledger, each task's run directory, the worker
logs, the lock and the suite report) is read and written by bench/folder.py; the live progress
display is bench/display.py; the report's data and files are bench/report.py and
bench/render.py.

The coordinator (this module, in the `kernelwright bench` process) starts one worker process per selected
GPU (`python -m kernelwright.bench.worker`, with CUDA_VISIBLE_DEVICES set to that GPU alone), or one CPU worker
where there is no GPU. Workers ask for tasks over a pipe as they become free (a shared queue: two GPUs
take about half the wall time) and stream their progress back as JSON lines; the coordinator is the
only writer of tasks.jsonl and the reports. A worker dies with the coordinator (PR_SET_PDEATHSIG).

Ctrl-C or SIGTERM stops a bench in order: the workers are stopped (their runs stay resumable), the reports
are written and the --resume command is printed. Resuming (`--resume DIR`) skips every task with a final outcome (correct, incorrect, unsupported, harness_error,
load_error) and runs the others, continuing each from its run directory. A task whose run raised or whose
worker died is recorded as `error` and is tried again by the next --resume, not within the same session.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwright.bench.display import Display
from kernelwright.bench.folder import (
    LOCK_FILE,
    LOGS_DIR,
    SESSIONS_FILE,
    BenchError,
    BenchFile,
    append_ledger,
    error_row,
    pending_row,
    read_bench_file,
    read_ledger,
    utc_now,
    write_json_atomic,
    write_reports,
)
from kernelwright.bench.render import headline
from kernelwright.bench.report import FINAL_STATUSES, TaskRow, build_suite

if TYPE_CHECKING:
    from rich.console import Console

MAX_RESTARTS = 2
"""A worker that died is started again at most this many times per session (per GPU)."""
STOP_GRACE_S = 10.0
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_PROVIDER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# -- GPUs -----------------------------------------------------------------------------------------------------


def parse_gpus(text: str) -> list[int] | None:
    """--gpus: "all" (None) or distinct indices "0,1"; a ValueError with one line otherwise."""
    t = text.strip().lower()
    if t == "all":
        return None
    parts = [x.strip() for x in t.split(",")]
    if not parts or not all(x.isdigit() for x in parts):
        raise ValueError(f"expected all or GPU indices such as 0,1; got {text!r}")
    ids = [int(x) for x in parts]
    if len(set(ids)) != len(ids):
        raise ValueError(f"a GPU is named twice in {text!r}")
    return ids


def visible_gpus() -> list[str]:
    """What each visible GPU is called in CUDA_VISIBLE_DEVICES, in torch's order (index i -> entry i)."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        return [e.strip() for e in env.split(",") if e.strip()][:n]
    return [str(i) for i in range(n)]


@dataclass
class Slot:
    """One worker: its GPU (or the CPU) and the process serving it."""

    label: str
    """"gpu 0", "gpu 1", ... (torch's index on this machine) or "cpu"."""
    visible: str
    """CUDA_VISIBLE_DEVICES for the worker ("" for the CPU worker)."""
    proc: subprocess.Popen[str] | None = None
    current: str | None = None
    task_started: float = 0.0
    done: int = 0
    budget: int = 0
    best: float | None = None
    best_correct: bool = False
    phase: str = ""
    """What a whole model's run does now ("region [3] conv + relu: searching", "the stitched model: judging")."""
    device_name: str = ""
    restarts: int = 0
    closed: bool = False
    ready: bool = False
    stopped: bool = False
    """Its worker ended and no other was started for it."""

    @property
    def log_name(self) -> str:
        return self.label.replace(" ", "") + ".log"


def plan_slots(gpus: list[int] | None, device: str) -> list[Slot]:
    """The workers to start: one per selected GPU, or one CPU worker; a BenchError for a bad choice."""
    if device == "cpu":
        if gpus is not None:
            raise BenchError("--gpus: the bench runs on the CPU (--device cpu); leave --gpus out")
        return [Slot("cpu", "")]
    visible = visible_gpus()
    if not visible:
        if device == "cuda" or device.startswith("cuda:"):
            raise BenchError("--device cuda: no GPU is visible here")
        if gpus is not None:
            raise BenchError("--gpus: no GPU is visible here (without --gpus the bench runs one CPU worker)")
        return [Slot("cpu", "")]
    chosen = list(range(len(visible))) if gpus is None else gpus
    for i in chosen:
        if i >= len(visible):
            raise BenchError(f"--gpus: there is no GPU {i}; {len(visible)} visible (0-{len(visible) - 1})")
    return [Slot(f"gpu {i}", visible[i]) for i in chosen]


# -- the coordinator ------------------------------------------------------------------------------------------


@dataclass
class Session:
    bench_dir: Path
    bench: BenchFile
    slots: list[Slot]
    console: Console
    ledger: dict[str, TaskRow] = field(default_factory=dict)
    events: queue.Queue[tuple[Slot, subprocess.Popen[str], dict[str, Any] | None]] = field(
        default_factory=queue.Queue
    )
    todo: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    finished_here: int = 0
    provider_error: str = ""
    sessions: list[dict[str, Any]] = field(default_factory=list)
    cluster: str | None = None
    """--cluster: the tasks run on Dask workers (bench/dask.py) instead of this command's workers."""

    # -- bookkeeping

    def elapsed_total(self) -> float:
        earlier = sum(float(s.get("elapsed_s") or 0) for s in self.sessions[:-1])
        return earlier + (time.monotonic() - self.started)

    def save(self) -> None:
        self.sessions[-1].update(elapsed_s=round(time.monotonic() - self.started, 1), updated_at=utc_now())
        write_json_atomic(self.bench_dir / SESSIONS_FILE, self.sessions)
        workers = [{"worker": s.label, "device": s.device_name} for s in self.slots]
        write_reports(
            self.bench_dir, self.bench, self.ledger, {"elapsed_s": self.elapsed_total(), "workers": workers}
        )

    def record(self, row: TaskRow) -> None:
        append_ledger(self.bench_dir, row)
        self.ledger[row.id] = row
        self.finished_here += 1
        self.save()

    # -- workers

    def spawn(self, slot: Slot) -> None:
        from kernelwright import IMPORT_ROOT as root

        env = dict(os.environ)
        env.update(
            CUDA_VISIBLE_DEVICES=slot.visible,
            KERNELWRIGHT_BENCH_PARENT=str(os.getpid()),
            KERNELWRIGHT_BENCH_WORKER=slot.label,
            PYTHONUNBUFFERED="1",
            PYTHONPATH=os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p),
        )
        log = open(self.bench_dir / LOGS_DIR / slot.log_name, "a", encoding="utf-8")  # noqa: SIM115
        log.write(f"--- {utc_now()} worker {slot.label} starts (CUDA_VISIBLE_DEVICES={slot.visible!r})\n")
        log.flush()
        # its own session: Ctrl-C reaches the coordinator, which stops the workers in order
        proc = subprocess.Popen(
            [sys.executable, "-m", "kernelwright.bench.worker", str(self.bench_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            start_new_session=True,
        )
        log.close()
        slot.proc, slot.current, slot.closed, slot.ready = proc, None, False, False
        threading.Thread(target=self._read, args=(slot, proc), daemon=True).start()

    def _read(self, slot: Slot, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                self.events.put((slot, proc, ev))
        self.events.put((slot, proc, None))

    def assign(self, slot: Slot) -> None:
        """Give a free worker the next task, or tell it there is none (it exits)."""
        proc = slot.proc
        if proc is None or proc.stdin is None or slot.closed:
            return
        if self.todo and not self.provider_error:
            slot.current = self.todo.pop(0)
            slot.task_started, slot.done, slot.best, slot.best_correct = time.monotonic(), 0, None, False
            slot.phase = ""
            try:
                proc.stdin.write(json.dumps({"run": slot.current}) + "\n")
                proc.stdin.flush()
                return
            except OSError:  # it died; its end of stream follows and says so
                return
        slot.closed = True
        try:
            proc.stdin.close()
        except OSError:
            pass

    def stop_all(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL): their runs stay resumable in their run directories.
        (A Dask cluster is closed by bench_dask.run_on_cluster itself, on the way out of an interrupt.)"""
        procs = [s.proc for s in self.slots if s.proc is not None and s.proc.poll() is None]
        for p in procs:
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def handle(
        self, slot: Slot, proc: subprocess.Popen[str], ev: dict[str, Any] | None, display: Display
    ) -> None:
        if proc is not slot.proc:
            return  # from a process replaced earlier
        if ev is None:
            self._worker_ended(slot, proc, display)
            return
        kind = ev.get("event")
        if kind == "ready":
            slot.device_name, slot.ready = str(ev.get("device_name") or ""), True
            self.assign(slot)
        elif kind == "started":
            slot.budget = int(ev.get("budget") or 0)
            slot.done = int(ev.get("done") or 0)
        elif kind == "attempt":
            slot.done, slot.budget = int(ev.get("done") or 0), int(ev.get("budget") or 0)
            slot.best, slot.best_correct = ev.get("best"), bool(ev.get("best_correct"))
            phase = str(ev.get("phase") or "")
            # in a log (no live panel) a whole model's phases print one line each
            if phase and phase != slot.phase and display.live is None:
                display.say(f"  {slot.current} ({slot.label}): regions {slot.done}/{slot.budget}, {phase}")
            slot.phase = phase
        elif kind == "finished":
            row = TaskRow.model_validate(ev["row"])
            slot.current = None
            self.record(row)
            display.finished(row)
            self.assign(slot)
        elif kind == "provider":
            self.provider_error = str(ev.get("error") or "the model provider kept failing")
            display.say(f"{ev.get('task')}: {self.provider_error}; no new task is started")
            slot.current = None
            for s in self.slots:
                if s.current is None:
                    self.assign(s)
        display.refresh()

    def _worker_ended(self, slot: Slot, proc: subprocess.Popen[str], display: Display) -> None:
        code = proc.wait()
        slot.closed = True
        if slot.current is not None:
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            tid = slot.current
            t = next(t for t in self.bench.tasks if t.id == tid)
            msg = (
                f"the worker running it ({slot.label}) ended ({how}) before the task finished; "
                f"see {LOGS_DIR}/{slot.log_name}; the next --resume continues it"
            )
            row = error_row(t, msg, msg, worker=slot.label)
            slot.current = None
            self.record(row)
            display.finished(row)
        slot.proc, slot.stopped = None, True
        if self.todo and not self.provider_error:
            if slot.restarts < MAX_RESTARTS:
                slot.restarts += 1
                display.say(f"{slot.label}: its worker ended unexpectedly; starting another")
                self.spawn(slot)
                slot.stopped = False
            else:
                display.say(f"{slot.label}: its worker keeps ending; no more tasks go to it (see its log)")
        display.refresh()

    def run(self, display: Display) -> None:
        if self.cluster is not None:
            from kernelwright.bench.dask import run_on_cluster

            run_on_cluster(self, display, self.cluster)
            return
        for slot in self.slots:
            self.spawn(slot)
        while any(s.proc is not None for s in self.slots):
            try:
                slot, proc, ev = self.events.get(timeout=0.5)
            except queue.Empty:
                display.refresh()
                continue
            self.handle(slot, proc, ev, display)


# -- entry ----------------------------------------------------------------------------------------------------


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_bench(
    bench_dir: Path,
    slots: list[Slot],
    console: Console,
    say: Callable[[str], None],
    cluster: str | None = None,
) -> int:
    """Run every task of the bench in `bench_dir` without a final outcome; the exit status.

    One process at a time runs a bench folder: a second one (another --resume) is refused, since both would
    run the same tasks and append to one ledger. The lock goes with the process, also when it is killed.
    """
    import fcntl

    bench = read_bench_file(bench_dir)
    with open(bench_dir / LOCK_FILE, "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise BenchError(f"{bench_dir} is being run by {holder}; wait for it, or stop it first") from None
        lock.truncate(0)
        lock.write(f"kernelwright bench (pid {os.getpid()})\n")
        lock.flush()
        return _run_bench(bench_dir, bench, slots, console, say, cluster)


def _run_bench(
    bench_dir: Path,
    bench: BenchFile,
    slots: list[Slot],
    console: Console,
    say: Callable[[str], None],
    cluster: str | None = None,
) -> int:
    (bench_dir / LOGS_DIR).mkdir(parents=True, exist_ok=True)
    ledger = read_ledger(bench_dir)
    todo = [t.id for t in bench.tasks if (r := ledger.get(t.id)) is None or r.status not in FINAL_STATUSES]
    earlier = []
    if (bench_dir / SESSIONS_FILE).is_file():
        try:
            earlier = list(json.loads((bench_dir / SESSIONS_FILE).read_text(encoding="utf-8")))
        except ValueError:
            earlier = []
    session = Session(bench_dir, bench, slots, console, ledger=ledger, todo=todo, cluster=cluster)
    session.sessions = [
        *earlier,
        {"started_at": utc_now(), "workers": [s.label for s in slots], "elapsed_s": 0},
    ]
    n_done = len(bench.tasks) - len(todo)
    workers = ", ".join(s.label for s in slots)
    where = f"the Dask cluster {cluster}" if cluster else f"{len(slots)} worker(s) ({workers})"
    say(
        f"kernelwright bench: {len(bench.tasks)} tasks, {n_done} finished earlier, {len(todo)} to run on "
        f"{where} -> {bench_dir}"
    )
    if todo and slots and slots[0].label == "cpu":
        say(
            "timings are not meaningful on the CPU (Triton interpreter): tasks are judged for correctness only"
        )
    code = EXIT_OK
    display = Display(session, console)
    # SIGTERM (a scheduler, `timeout`, kill) stops the bench the way Ctrl-C does: workers stopped in order,
    # the reports written, the --resume command printed.
    previous = (
        signal.signal(signal.SIGTERM, _interrupt)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        if todo:
            with display:
                session.run(display)
        else:
            say("nothing left to do: every task has a final outcome")
    except KeyboardInterrupt:
        session.stop_all()
        code = EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        # The ledger on disk is the record: an interrupt that lands in `record` between the append and the
        # in-memory update must not leave a recorded task "pending" in the reports written now.
        session.ledger.update(read_ledger(bench_dir))
        session.sessions[-1]["ended_at"] = utc_now()
        session.save()
    rows = [session.ledger.get(t.id) for t in bench.tasks]
    suite = build_suite([r or pending_row(t) for r, t in zip(rows, bench.tasks, strict=True)], {})
    say(f"bench: {headline(suite)}")
    say(f"wrote: {bench_dir / 'suite.json'}, {bench_dir / 'suite.md'}, {bench_dir / 'suite.html'}")
    unfinished = [
        t.id for t, r in zip(bench.tasks, rows, strict=True) if r is None or r.status not in FINAL_STATUSES
    ]
    if code == EXIT_INTERRUPTED:
        say(f"interrupted; continue with kernelwright bench --resume {bench_dir}")
        return code
    if session.provider_error:
        say(f"stopped: {session.provider_error}; continue with kernelwright bench --resume {bench_dir}")
        return EXIT_PROVIDER
    load_errors = [r.id for r in rows if r is not None and r.status == "load_error"]
    if load_errors:
        say(
            f"{len(load_errors)} task(s) did not load: {', '.join(load_errors[:5])}"
            + (" ..." if len(load_errors) > 5 else "")
        )
    if unfinished:
        say(
            f"{len(unfinished)} task(s) without a final outcome ({', '.join(unfinished[:5])}"
            f"{' ...' if len(unfinished) > 5 else ''}); continue with kernelwright bench --resume {bench_dir}"
        )
    return EXIT_FAILED if unfinished or load_errors else EXIT_OK
