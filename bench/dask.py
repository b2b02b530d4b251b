"""`kernelwright bench --cluster`: the bench's tasks on Dask workers, on this host or on many.

The coordinator is the same as without a cluster (bench/coordinator.py: the bench folder, the ledger, the
reports, Ctrl-C and --resume); only who runs a task changes. Each pending task is one Dask task,
`run_on_worker(task id, bench folder)`, which runs it exactly as a local bench worker does
(bench/worker.run_task: `run_optimize` in the task's run directory, resumed when that directory
holds a started run) and returns its TaskRow. The evaluation WorkerPool (the judges) lives inside the
Dask worker process, as it lives inside a local bench worker.

- `--cluster local` starts a Dask cluster on this host: one worker process per selected GPU, each seeing
  only its GPU (CUDA_VISIBLE_DEVICES) and declaring the resource GPU=1, or `--cluster local:N` N CPU
  workers. `--cluster tcp://HOST:8786` uses a running scheduler; start one worker per GPU on each host:
  `CUDA_VISIBLE_DEVICES=0 dask worker tcp://HOST:8786 --nthreads 1 --resources GPU=1` (README: Bench on a
  cluster). The bench folder must be on a filesystem every worker sees (run directories live in it).
- GPU tasks ask for GPU=1, so a worker runs one at a time. A worker that dies mid-task: Dask runs the
  task again on another worker, which continues its run from the checkpoint in the run directory, so no
  finished evaluation is repeated. A task that still fails is recorded as `error`, retried by --resume.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelwright.bench.folder import BenchError, error_row, read_bench_file
from kernelwright.bench.report import TaskRow

if TYPE_CHECKING:
    from kernelwright.bench.coordinator import Session, Slot
    from kernelwright.bench.display import Display

DASK_HINT = "install it with: pip install 'kernelwright[dask]' (or: pip install distributed)"


def run_on_worker(task_id: str, bench_dir: str) -> dict[str, Any]:
    """One bench task on this Dask worker: its TaskRow as JSON (what a local bench worker reports)."""
    from distributed import get_worker

    from kernelwright.bench.worker import Events, device_name_for, run_task
    from kernelwright.nodes.run_context import Context

    folder = Path(bench_dir)
    bench = read_bench_file(folder)
    task = next(t for t in bench.tasks if t.id == task_id)
    ctx = Context.from_json(bench.context)
    label = f"dask {get_worker().name}"
    with open(os.devnull, "w", encoding="utf-8") as sink:
        row = run_task(task, folder, ctx, label, device_name_for(ctx), Events(sink), bench.unseen)
    return row.model_dump(mode="json")


def parse_cluster(spec: str) -> tuple[str, int | None]:
    """("local", N or None) or ("address", None) from --cluster; a BenchError for anything else."""
    if spec == "local":
        return "local", None
    if spec.startswith("local:"):
        try:
            n = int(spec.split(":", 1)[1])
        except ValueError:
            n = 0
        if n < 1:
            raise BenchError(f"--cluster {spec}: local:N needs a worker count N >= 1")
        return "local", n
    if spec.startswith(("tcp://", "tls://", "inproc://")):
        return "address", None
    raise BenchError(
        f"--cluster {spec!r}: give local, local:N or a scheduler address such as tcp://HOST:8786"
    )


def start_client(spec: str, slots: list[Slot]) -> Any:
    """A Dask client: on a cluster started here (one worker per slot, or N CPU workers), or at an address."""
    # Dask's own progress logs would bury the bench's: only its warnings and errors, here and in the worker
    # processes (which inherit the environment; set before distributed reads its configuration).
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    try:
        from distributed import Client, Nanny, Scheduler, SpecCluster
    except ImportError as exc:
        raise BenchError(f"--cluster needs Dask's distributed package; {DASK_HINT}") from exc
    kind, n = parse_cluster(spec)
    if kind == "address":
        try:
            return Client(spec, timeout="20s")
        except OSError as exc:
            raise BenchError(f"--cluster {spec}: cannot reach the Dask scheduler ({exc})") from exc
    gpu = bool(slots) and slots[0].label != "cpu"
    if gpu and n is not None:
        raise BenchError("--cluster local:N is for CPU workers; on GPUs the cluster has one worker per GPU")
    visible = [s.visible for s in slots] if gpu else [""] * (n or 1)
    logging.getLogger("distributed").setLevel(logging.WARNING)
    workers = {
        f"w{i}": {
            "cls": Nanny,
            "options": {
                "nthreads": 1, "host": "127.0.0.1", "name": f"w{i}",
                "env": {"CUDA_VISIBLE_DEVICES": v}, "resources": {"GPU": 1} if gpu else {},
            },
        }
        for i, v in enumerate(visible)
    }  # fmt: skip
    # This host's cluster listens on loopback only: nothing outside can submit work to it.
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None, "host": "127.0.0.1"}}
    cluster = SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.WARNING)
    return Client(cluster)


def run_on_cluster(session: Session, display: Display, spec: str) -> None:
    """Run the session's tasks on Dask; record each row as it comes back (in the coordinator)."""
    from distributed import as_completed

    from kernelwright.bench.coordinator import Slot

    client = start_client(spec, session.slots)
    try:
        names = sorted(client.scheduler_info()["workers"].values(), key=lambda w: str(w.get("name")))
        session.slots[:] = [Slot(f"dask {w.get('name')}", "") for w in names] or session.slots
        gpu = any(w.get("resources", {}).get("GPU") for w in names)
        todo, session.todo = list(session.todo), []
        futures = {
            client.submit(
                run_on_worker, tid, str(session.bench_dir), key=f"kw-bench-{tid}-{time.time_ns()}",
                resources={"GPU": 1} if gpu else None, pure=False, retries=1,
            ): tid
            for tid in todo
        }  # fmt: skip
        for slot in session.slots:
            slot.ready = True
        pending = as_completed(futures, with_results=False)
        for fut in pending:
            tid = futures.pop(fut)
            try:
                row = TaskRow.model_validate(fut.result())
            except Exception as exc:  # the task raised (or its workers kept dying): its row says so
                task = next(t for t in session.bench.tasks if t.id == tid)
                first = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                msg = f"the task failed on the cluster: {first}; the next --resume continues it"
                row = error_row(task, first, msg)
            fut.release()  # else a worker lost later would make Dask compute this finished task again
            session.record(row)
            display.finished(row)
            display.refresh()
    finally:  # also on Ctrl-C/SIGTERM: the workers stop, their runs stay resumable
        close_client(client)


def close_client(client: Any) -> None:
    """Close the client and, for a cluster started here, the cluster (its workers' runs stay resumable)."""
    cluster = getattr(client, "cluster", None)
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()
