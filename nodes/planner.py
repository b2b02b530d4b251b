"""The planner node: starts a run, rebuilds the search tree, decides what to expand next or to stop.

A thread holds one run at a time. Input given to a thread whose run finished, or another task given to
a thread whose run did not finish, starts a new run there (a new run id; the old run's jobs, attempts
and costs are cleared from the state): a thread never answers a new task with an old result. The same
task given again to a thread whose run did not finish (interrupted in Studio) continues that run: the
expansions that were in flight were dropped by LangGraph with the new input, so they are planned again.

On its first step it loads the task, fixes the target, device and timing policy, computes the roofline
floor, opens the chat model (so a missing key or dead server stops the run before any work) and picks
the run directory. Every step it rebuilds the tree from the state's jobs and attempts, asks the search
whether to stop, and otherwise fans out enough expansions (one LangGraph Send each) to keep `k` in flight.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, Overwrite, Send

from kernelwright.hardware.config import toolchain_versions
from kernelwright.hardware.roofline import roofline_floor_ms
from kernelwright.hardware.targets import Target, detect_target, get_target
from kernelwright.nodes import resources
from kernelwright.nodes.records import Attempt, Branch, CostLedger, Job, RepresentativeDesign, RunInfo
from kernelwright.nodes.repeats import failure_memory, repeats_stop
from kernelwright.nodes.run_context import Context, usable_device
from kernelwright.nodes.run_folder import claim_run_folder
from kernelwright.nodes.search import Decision, SearchTree, Spent
from kernelwright.tasks.loader import load_task, load_task_source
from kernelwright.tasks.task import Task

# Wall time is counted between planner steps of one process: a resumed run starts a new count, so the
# time a run lay dead between a crash and its resume is not billed to it.
_ticks: dict[str, float] = {}
_ticks_lock = threading.Lock()


def reset_wall(run_id: str) -> None:
    with _ticks_lock:
        _ticks.pop(run_id, None)


def wall_delta(run_id: str) -> float:
    """Seconds since this process last ticked this run (0 on its first tick)."""
    now = time.monotonic()
    with _ticks_lock:
        last = _ticks.get(run_id)
        _ticks[run_id] = now
    return 0.0 if last is None else max(0.0, now - last)


def load_input_task(state: dict[str, Any]) -> Task:
    """The task named by the graph input (task_path or task_source)."""
    path = state.get("task_path")
    source = state.get("task_source")
    if path:
        return load_task(path)
    if source:
        return load_task_source(source, state.get("task_name") or "task")
    raise ValueError("the graph input needs task_path (a task file) or task_source (its text)")


PATH_KEY = "path:"


def input_key(state: dict[str, Any]) -> str:
    """What the graph input names: the task file (resolved), or a digest of the task source and name."""
    path = state.get("task_path")
    if path:
        return f"{PATH_KEY}{Path(path).resolve()}"
    source = state.get("task_source")
    if source:
        digest = hashlib.sha256(f"{state.get('task_name') or 'task'}\0{source}".encode()).hexdigest()
        return f"source:{digest[:32]}"
    return ""


def given_input(state: dict[str, Any], run: RunInfo | None) -> dict[str, Any]:
    """The input keys as given to the thread. A finished run's state shows the task_path it was given;
    a task_source given to the thread since then is the new input, not that path."""
    given = {k: state.get(k) for k in ("task_path", "task_source", "task_name")}
    if (
        run is not None
        and state.get("result") is not None
        and given["task_source"]
        and given["task_path"]
        and input_key({"task_path": given["task_path"]}) == run.input_key
    ):
        given["task_path"] = None
    return given


def is_new_input(state: dict[str, Any], run: RunInfo) -> bool:
    """Whether the planner runs for new input on a thread that already holds a run.

    After finalize nothing but new input reaches the planner, so a finished run means new input. While a
    run is unfinished the planner runs after every branch; input naming another task is then new too
    (the same task given again continues the run, as nothing tells the two apart). The planner clears
    the input keys when it starts a run, so only input given since then is seen here."""
    if state.get("result") is not None:
        return True
    return bool(run.input_key) and input_key(state) not in ("", run.input_key)


def start_run(
    state: dict[str, Any], ctx: Context, thread_id: str | None, *, reload_task: bool = False
) -> tuple[RunInfo, Task]:
    """Everything fixed at the start of a run."""
    task = (None if reload_task else state.get("task")) or load_input_task(state)
    device = usable_device(ctx.device)  # a GPU asked for where none is visible stops the run here
    target: Target = get_target(ctx.target) if ctx.target else detect_target(device)
    timing_meaningful = device.startswith("cuda")
    floor = roofline_floor_ms(task, target, "tf32" if ctx.allow_tf32 else "strict")
    run_id = thread_id or uuid.uuid4().hex
    resources.chat_model(ctx)  # a missing key or unreachable server fails here, before any work
    # one run, one folder: a named folder holding another run is refused, a default name moves on
    run_dir = claim_run_folder(
        ctx.run_dir or ctx.default_run_dir(task.name, run_id), run_id, named=bool(ctx.run_dir)
    )
    return (
        RunInfo(
            run_id=run_id,
            run_dir=str(Path(run_dir).resolve()),
            task_name=task.name,
            task_path=str(task.path) if task.path else None,
            input_key=input_key(state),
            model=ctx.model if ctx.chat_model is None else type(ctx.chat_model).__name__,
            device=device,
            target=target.name,
            target_display=target.display_name,
            target_arch=target.arch,
            compute_capability=target.compute_capability,
            timing_meaningful=timing_meaningful,
            timing_note=(
                ""
                if timing_meaningful
                else "timing is not meaningful on the CPU interpreter: kernels are ranked by correctness only"
            ),
            precision="tf32" if ctx.allow_tf32 else "strict",
            roofline_floor_ms=floor.floor_ms,
            roofline_note=floor.summary(),
            versions=toolchain_versions(),
            seed=ctx.seed,
        ),
        task,
    )


def rebuild_tree(jobs: list[Job], attempts: list[Attempt], ctx: Context) -> SearchTree:
    outcomes = {a.node_id: a.outcome for a in attempts}
    tree = SearchTree.replay([j.decision for j in jobs], outcomes, ctx.search_config())
    tree.close(a.node_id for a in attempts if a.candidate.blocked)  # a blocked repeat is not repaired
    return tree


def make_job(decision: Decision, run_id: str, by_node: dict[str, Attempt]) -> Job:
    """A job with the parent's code and feedback and the representative designs it needs."""
    parent = by_node.get(decision.parent)
    designs = []
    for nid in decision.pool:
        a = by_node.get(nid)
        if a is not None and a.candidate.code:
            designs.append(
                RepresentativeDesign(
                    node_id=nid,
                    code=a.candidate.code,
                    speedup=a.timing.speedup_vs_eager,
                    meta=a.candidate.meta,
                )
            )
    # The programs already written in this run: a step should not write one again (a second small step
    # from the same parent, a step back to the grandparent's config, a large step to a design written).
    steps = decision.action in ("small_step", "large_step")
    tried = [a.candidate.meta for a in by_node.values() if a.candidate.meta] if steps else []
    failed, closed = failure_memory(by_node.values())  # what must not be judged again (nodes/repeats.py)
    return Job(
        decision=decision,
        run_id=run_id,
        failed_programs=failed,
        closed_designs=closed,
        parent_code=parent.candidate.code if parent else None,
        parent_feedback=parent.feedback if parent else None,
        parent_status=parent.status if parent else None,
        parent_error_kind=parent.result.error_kind if parent else None,
        parent_speedup=parent.timing.speedup_vs_eager if parent else None,
        parent_speedup_ci=parent.timing.speedup_ci if parent else None,
        parent_case_id=parent.reflection.case_id if parent else None,
        designs=designs,
        tried=tried,
    )


HARNESS_STOP = "the harness could not judge this task"
"""The start of the stop reason when a harness failure ended the search (finalize names it in the verdict)."""


def harness_stop(attempts: list[Attempt]) -> str | None:
    """Why the search must stop at once: an evaluation failed for a reason that is not the candidate's
    (the reference does not run, the task cannot be verified, the judge failed). Another candidate would
    fail the same way, so spending the budget on "repairs" would only waste it."""
    failed = next((a for a in attempts if a.result.error_kind == "harness_error"), None)
    if failed is None:
        return None
    first = next((line.strip() for line in (failed.result.error or "").splitlines() if line.strip()), "")
    return f"{HARNESS_STOP} ({failed.node_id}): {first[:300]}"


UNSUPPORTED_STOP = "the writer has no design for this task"
"""The start of the stop reason when the writer said it cannot write the task at all."""


def unsupported_stop(attempts: list[Attempt]) -> str | None:
    """Why the search must stop at once: the writer said that it has no design for this task (an
    operator or dtype it does not express), which no other step changes. No candidate is spent on it."""
    said = next((a for a in attempts if a.candidate.unsupported), None)
    if said is None:
        return None
    return f"{UNSUPPORTED_STOP} ({said.node_id}): {said.candidate.unsupported}"


def planner(state: Any, runtime: Runtime[Context]) -> Command[Literal["context", "finalize"]]:
    """Start the run on the first step; then stop, wait for branches in flight, or fan out new ones."""
    ctx = runtime.context
    update: dict[str, Any] = {}
    run: RunInfo | None = state.get("run")
    task: Task | None = state.get("task")
    jobs: list[Job] = list(state.get("jobs") or [])
    attempts: list[Attempt] = list(state.get("attempts") or [])
    cost: CostLedger = state.get("cost") or CostLedger()
    given = {**state, **given_input(state, run)}
    fresh = run is not None and is_new_input(given, run)
    again = run is not None and task is not None and not fresh and input_key(given) != ""
    if run is None or task is None or fresh:
        thread_id = runtime.execution_info.thread_id if runtime.execution_info else None
        # The thread's first run takes the thread's id; a later one on the same thread a new id, so its
        # memory cases and run-directory journals never collide with the first run's.
        run, task = start_run(given, ctx, None if fresh else thread_id, reload_task=fresh)
        update["run"] = run
        update["task"] = task
        # The input is consumed: the next input on this thread sets only the keys it gives, and telling
        # it from this one does not depend on keys left over from an earlier input.
        update.update(task_path=None, task_source=None, task_name=None)
        reset_wall(run.run_id)
        if fresh:
            jobs, attempts, cost = [], [], CostLedger()
            update.update(
                jobs=Overwrite([]),
                attempts=Overwrite([]),
                cost=Overwrite(CostLedger()),
                stop_reason="",
                result=None,
            )
    elif again:
        # The unfinished run's task given again (a run interrupted in Studio, then sent again): LangGraph
        # dropped the branches in flight when it took the input, so their jobs would never finish; they
        # are planned again. The time the run lay interrupted is not billed to it.
        finished = {a.node_id for a in attempts}
        jobs = [j for j in jobs if j.node_id in finished]
        update["jobs"] = Overwrite(jobs)
        update.update(task_path=None, task_source=None, task_name=None)
        reset_wall(run.run_id)
    delta = wall_delta(run.run_id)
    if not fresh:
        update["cost"] = CostLedger(wall_s=delta)

    tree = rebuild_tree(jobs, attempts, ctx)
    done = {a.node_id for a in attempts}
    in_flight = [j for j in jobs if j.node_id not in done]
    blocked = sum(1 for a in attempts if a.candidate.blocked)  # not judged: no candidate spent on them
    spent = Spent(candidates=len(jobs) - blocked, llm_calls=cost.llm_calls, wall_s=cost.wall_s + delta)
    stop = (
        harness_stop(attempts)
        or unsupported_stop(attempts)
        or repeats_stop(attempts, ctx.budget)
        or tree.should_stop(ctx.search_budget(), spent)
    )
    if stop is None:
        slots = min(ctx.k - len(in_flight), ctx.budget - spent.candidates)
        decisions = tree.plan(slots) if slots > 0 else []
        if decisions:
            by_node = {a.node_id: a for a in attempts}
            new_jobs = [make_job(d, run.run_id, by_node) for d in decisions]
            # a new run's first jobs replace the old run's in the same update that clears them (a
            # continued run's replace its dropped ones)
            update["jobs"] = Overwrite(jobs + new_jobs) if fresh or again else new_jobs
            sends = [Send("context", Branch(job=j, task=task, run=run)) for j in new_jobs]
            return Command(update=update, goto=sends)
        if in_flight:
            return Command(update=update, goto=[])
        stop = "no node left to expand"
    if in_flight:
        # finish what is running; the last branch to finish brings the planner back here
        return Command(update=update, goto=[])
    update["stop_reason"] = stop
    if run.input_key.startswith(PATH_KEY):
        # the finished state shows the task file it was given (Studio's panel); given_input tells it
        # from a task given to the thread later
        update["task_path"] = run.input_key[len(PATH_KEY) :]
    return Command(update=update, goto="finalize")
