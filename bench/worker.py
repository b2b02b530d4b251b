"""One worker of `kernelwright bench`: runs the tasks the coordinator hands it, one at a time.

    python -m kernelwright.bench.worker BENCH_DIR

Started by bench/coordinator.py with CUDA_VISIBLE_DEVICES set to its one GPU (empty for the CPU worker). It
reads task ids from stdin (one JSON line each, {"run": "<suite>/<task>"}; end of input: stop) and writes
events as JSON lines to its stdout: ready, started, attempt (progress of the running search), finished
(with the task's TaskRow) and provider (the model provider kept failing: the worker stops, the task stays
unfinished). Anything else printed while it works goes to stderr (the worker's log), never into the
event stream. It dies with the coordinator (PR_SET_PDEATHSIG).

Each task runs through `run_optimize` in its own run directory; a run directory holding a started run
is continued (`resume=True`), so a task cut off by a crash or an interrupt loses nothing evaluated.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any

from kernelwright.bench.folder import RUNS_DIR, BenchTask, read_bench_file, utc_now
from kernelwright.bench.report import TaskRow, primary_family


class Events:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def __call__(self, event: str, **data: Any) -> None:
        self.stream.write(json.dumps({"event": event, **data}) + "\n")
        self.stream.flush()


def _die_with_parent() -> None:
    parent = int(os.environ.get("KERNELWRIGHT_BENCH_PARENT") or 0)
    if sys.platform == "linux":
        from kernelwright.hardware.isolation.confine import die_with_parent

        die_with_parent(signal.SIGKILL)
    if parent and os.getppid() != parent:  # the coordinator ended before the line above took effect
        os._exit(1)


def device_name_for(ctx: Any) -> str:
    """What this worker runs candidates on, for the reports: its GPU's name, or the CPU interpreter."""
    if ctx.device != "cpu":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    return "cpu (Triton interpreter)"


def design_of(code: str | None) -> str:
    """The kernel's `# kernelwright:` line without its prefix, else the names of its Triton kernels."""
    from kernelwright.nodes.records import kernel_names
    from kernelwright.providers.protocol import KernelHeader

    header = KernelHeader.parse(code)
    if header is not None:
        return header.body
    names = kernel_names(code)
    return "kernels: " + ",".join(names) if names else ""


def _load_error(row: TaskRow, exc: Exception) -> TaskRow:
    """The row of a task that did not load (before its run, or when its run could not read it)."""
    return row.model_copy(
        update={
            "status": "load_error",
            "error": str(exc),
            "verdict": f"the task did not load: {exc}",
            "finished_at": utc_now(),
        }
    )


def evaluations_to_best(search: dict[str, Any]) -> int | None:
    """The best node's place among the search's candidates in the order they were made (n1, n2, ...)."""
    best = search.get("best")
    nodes = search.get("nodes_detail")
    if not isinstance(best, str) or not isinstance(nodes, list):
        return None
    made = sorted((n["id"] for n in nodes if isinstance(n, dict) and n.get("action") and isinstance(n.get("id"), str)),
                  key=lambda i: int(i[1:]) if i[1:].isdigit() else 0)  # fmt: skip
    return made.index(best) + 1 if best in made else None


def failure_fields(failures: Any) -> dict[str, Any]:
    """A run's failure counts (nodes/repeats.failure_counts) as task row fields."""
    if not isinstance(failures, dict):
        return {}
    kinds = failures.get("failed_by_kind")
    return {
        "candidates": int(failures.get("candidates") or 0),
        "failed_by_kind": dict(kinds) if isinstance(kinds, dict) else {},
        "repeats": int(failures.get("repeats") or 0),
        "blocked": int(failures.get("blocked") or 0),
        "closed_designs": list(failures.get("closed_designs") or []),
    }


def _resumable(run_dir: Path) -> bool:
    """The run directory holds a run that reached its first checkpoint (else it starts afresh)."""
    from kernelwright.graphs.optimize import RUN_FILE, open_checkpointer, read_run_file

    if not (run_dir / RUN_FILE).is_file():
        return False
    try:
        saved = read_run_file(run_dir)
    except ValueError:
        return False
    saver = open_checkpointer(run_dir)
    try:
        return saver.get_tuple({"configurable": {"thread_id": saved.thread_id}}) is not None
    finally:
        saver.conn.close()


def run_task(
    t: BenchTask, bench_dir: Path, ctx: Any, label: str, device_name: str, emit: Events, unseen: int = 0
) -> TaskRow:
    """One task's search, then (`unseen` > 0) its best kernel judged at unseen sizes (bench/unseen.py)."""
    row, code = _search_task(t, bench_dir, ctx, label, device_name, emit)
    if unseen <= 0 or not row.correct or code is None:
        return row
    from kernelwright.bench.unseen import judge_unseen

    emit("unseen", task=t.id, k=unseen)
    t0 = time.perf_counter()
    try:
        got = judge_unseen(t.path, t.name, code, ctx, unseen, row.speedup_vs_eager)
    except Exception as exc:  # the search's result stands; the row says why the check is missing
        traceback.print_exc()
        got = {"unseen_note": f"unseen sizes not judged: {type(exc).__name__}: {str(exc)[:200]}"}
    return row.model_copy(update={**got, "unseen_wall_s": round(time.perf_counter() - t0, 2)})


def _search_task(
    t: BenchTask, bench_dir: Path, ctx: Any, label: str, device_name: str, emit: Events
) -> tuple[TaskRow, str | None]:
    """The task's search as a row, and its best kernel's code (None without one)."""
    from kernelwright.graphs.optimize import Progress, run_optimize
    from kernelwright.nodes.planner import HARNESS_STOP, UNSUPPORTED_STOP
    from kernelwright.providers.chat import ProviderUnavailable
    from kernelwright.tasks import TaskError, load_task

    base = TaskRow(
        id=t.id,
        suite=t.suite,
        task=t.name,
        path=t.path,
        worker=label,
        device_name=device_name,
        run_dir=f"{RUNS_DIR}/{t.suite}/{t.name}",
    )
    try:
        task = load_task(t.path)
    except TaskError as exc:
        return _load_error(base, exc), None
    families = list(task.signature.op_families)
    base = base.model_copy(update={"families": families, "family": primary_family(families)})
    run_dir = t.run_dir(bench_dir)
    resume = _resumable(run_dir)

    def progress(ev: Progress) -> None:
        if ev.kind == "attempt" and ev.attempt is not None:
            best = ev.best
            emit(
                "attempt",
                task=t.id,
                done=ev.done,
                budget=ev.budget,
                status=ev.attempt.status,
                best=best.timing.speedup_vs_eager if best is not None else None,
                best_correct=best is not None,
            )

    emit("started", task=t.id, done=0, budget=ctx.budget, resumed=resume)
    if t.suite.startswith("level3"):  # whole models (KernelBench level3/): region by region, graphs/model.py
        from kernelwright.graphs.model import ModelProgress, bench_model_row

        def model_progress(p: ModelProgress) -> None:  # region signatures done of all, and what runs now
            emit("attempt", task=t.id, done=p.done, budget=p.total, status="", best=p.best,
                 best_correct=False, phase=p.line)  # fmt: skip

        try:
            fields = bench_model_row(Path(t.path), ctx, run_dir, on_progress=model_progress)
        except Exception as exc:  # one model must not end the bench
            first = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            fields = {"status": "error", "error": first, "verdict": f"the model's run stopped: {first}"}
        return base.model_copy(update={**fields, "finished_at": utc_now()}), None
    try:
        if resume:
            res = run_optimize(None, None, run_dir, resume=True, on_progress=progress, close_pools=False)
        else:
            res = run_optimize(Path(t.path), ctx, run_dir, on_progress=progress, close_pools=False)
    except ProviderUnavailable:
        raise
    except TaskError as exc:
        return _load_error(base, exc), None
    except Exception as exc:  # one task must not end the bench: its error is its row, retried by --resume
        traceback.print_exc()
        first = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        msg = f"the run stopped with an error: {first}; the next --resume continues it"
        return base.model_copy(
            update={"status": "error", "error": first, "verdict": msg, "finished_at": utc_now()}
        ), None
    best = res.best
    if res.correct:
        status = "correct"
    elif res.stop_reason.startswith(HARNESS_STOP):
        status = "harness_error"
    elif res.stop_reason.startswith(UNSUPPORTED_STOP):
        status = "unsupported"
    else:
        status = "incorrect"
    nodes = res.search.get("nodes_detail", [])
    attempts = [
        {k: n.get(k) for k in ("id", "parent", "action", "status", "design", "runtime_ms", "error_kind")}
        for n in (nodes if isinstance(nodes, list) else [])
        if isinstance(n, dict) and n.get("action")
    ]
    row = base.model_copy(
        update={
            "status": status,
            "correct": res.correct,
            "speedup_vs_eager": best.speedup_vs_eager if best else None,
            "speedup_vs_compile": best.speedup_vs_compile if best else None,
            "fraction_of_floor": best.fraction_of_floor if best else None,
            "runtime_ms": best.runtime_ms if best else None,
            "runtime_p20_ms": best.runtime_p20_ms if best else None,
            "runtime_p80_ms": best.runtime_p80_ms if best else None,
            "eager_ms": best.eager_ms if best else None,
            "compile_ms": best.compile_ms if best else None,
            "floor_ms": res.roofline_floor_ms,
            "timing_meaningful": res.timing_meaningful,
            "precision": res.precision,
            "design": design_of(best.code) if best else "",
            "evaluations": res.cost.evaluations,
            "evaluations_to_best": evaluations_to_best(res.search),
            "llm_calls": res.cost.llm_calls,
            "wall_s": round(res.cost.wall_s, 2),
            "gpu_s": round(res.cost.gpu_s, 2),
            "verdict": res.verdict,
            "stop_reason": res.stop_reason,
            "versions": res.versions.model_dump(),
            "attempts": attempts,
            **failure_fields(res.search.get("failures")),
            "finished_at": res.finished_at,
        }
    )
    return row, best.code if best else None


def main(argv: list[str]) -> int:
    _die_with_parent()
    # The event stream keeps the real stdout; whatever else writes to stdout lands in the log.
    events = Events(os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8"))
    os.dup2(2, 1)
    bench_dir = Path(argv[0])
    bench = read_bench_file(bench_dir)
    from kernelwright.nodes import resources
    from kernelwright.nodes.run_context import Context
    from kernelwright.providers.chat import ProviderUnavailable

    ctx = Context.from_json(bench.context)
    resources.start_worker_pool(ctx)  # its judges start while this worker reads its first task
    label = os.environ.get("KERNELWRIGHT_BENCH_WORKER", "cpu")
    tasks = {t.id: t for t in bench.tasks}
    device_name = device_name_for(ctx)
    events("ready", pid=os.getpid(), worker=label, device_name=device_name)
    try:
        while line := sys.stdin.readline():
            tid = json.loads(line)["run"]
            print(f"--- {utc_now()} {tid}", file=sys.stderr, flush=True)
            try:
                row = run_task(tasks[tid], bench_dir, ctx, label, device_name, events, bench.unseen)
            except ProviderUnavailable as exc:
                events("provider", task=tid, error=str(exc))
                return 3
            events("finished", task=tid, row=row.model_dump(mode="json"))
    finally:
        resources.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
