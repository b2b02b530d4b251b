"""The optimize graph: one task in, a verified (and, on a GPU, faster) Triton kernel out.

    START -> planner -> context -> coder -> compiler --fail--> reflector -> planner ... -> finalize -> END
                                              |ok                 ^
                                              v                   |
                                           profiler --------------+

The planner fans out up to k expansions at once (one LangGraph Send each); every expansion travels
context -> coder -> compiler -> (profiler) -> reflector as its own branch, carrying a `Branch` record,
so evaluations of different candidates run in parallel worker processes. The planner runs again as
branches finish, keeps k in flight, and sends the run to finalize once the search says stop and
nothing is in flight.

Exports:
- `builder`: the StateGraph (tests compile it with their own checkpointer);
- `graph`: compiled without a checkpointer, for `langgraph dev` / LangGraph Studio (langgraph.json);
- `run_optimize(...)`: one run with a SQLite checkpointer in the run directory, resumable after a
  crash (`resume=True`); this is what `kernelwright optimize` calls.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

# The run folder's files (graphs/run_files.py), also named here by the run's callers
from kernelwright.graphs.run_files import CHECKPOINT_FILE as CHECKPOINT_FILE
from kernelwright.graphs.run_files import RUN_FILE as RUN_FILE
from kernelwright.graphs.run_files import (
    RunFile,
    check_new_run_folder,
    open_checkpointer,
    read_run_file,
    write_run_file,
)
from kernelwright.graphs.run_files import serializer as serializer
from kernelwright.memory.store import MemoryLocationError, MemoryServerError
from kernelwright.nodes import resources
from kernelwright.nodes.coder import coder
from kernelwright.nodes.compiler import compiler
from kernelwright.nodes.context import context
from kernelwright.nodes.finalize import finalize
from kernelwright.nodes.planner import planner
from kernelwright.nodes.profiler import profiler
from kernelwright.nodes.records import Attempt, Job, OptimizeResult, RunInfo
from kernelwright.nodes.reflector import reflector
from kernelwright.nodes.run_context import Context
from kernelwright.nodes.state import InputState, State
from kernelwright.providers.chat import ProviderUnavailable

GRAPH_NAME = "kernelwright-optimize"


# Where each node may route, in one place. The nodes say the same in their `Command[Literal[...]]` return
# types (a test checks that these match them); naming the routes here keeps what LangGraph, and Studio
# which draws from it, see independent of resolving those annotations.
ROUTES: dict[str, tuple[str, ...]] = {
    "planner": ("context", "finalize"),
    "context": ("coder",),
    "coder": ("compiler",),
    "compiler": ("profiler", "reflector"),
    "profiler": ("reflector",),
    "reflector": ("planner",),
}

builder = StateGraph(State, input_schema=InputState, context_schema=Context)
builder.add_node("planner", planner, destinations=ROUTES["planner"])
# Branch nodes take the Send payload (a Branch), not the state; input_schema=State keeps LangGraph
# from adding the Branch's fields to the state's channels.
for _name, _node in (
    ("context", context),
    ("coder", coder),
    ("compiler", compiler),
    ("profiler", profiler),
    ("reflector", reflector),
):
    builder.add_node(_name, _node, input_schema=State, destinations=ROUTES[_name])  # type: ignore[call-overload]
builder.add_node("finalize", finalize)
builder.add_edge(START, "planner")
builder.add_edge("finalize", END)

graph = builder.compile(name=GRAPH_NAME)


# -- running with checkpoints -----------------------------------------------------------------------------


class Progress(BaseModel):
    """One event of a run, for progress displays."""

    kind: Literal["started", "planned", "attempt", "finished"]
    run: RunInfo | None = None
    jobs: list[Job] = Field(default_factory=list)
    attempt: Attempt | None = None
    best: Attempt | None = None
    """The best attempt so far (fastest correct; first correct without timing)."""
    done: int = 0
    budget: int = 0
    result: OptimizeResult | None = None
    already_finished: bool = False
    """For "finished": the run had finished before this call (a resume with nothing left to do)."""


def _better(a: Attempt, b: Attempt | None) -> bool:
    if a.status != "correct":
        return False
    if b is None:
        return True
    sa, sb = a.timing.speedup_vs_eager, b.timing.speedup_vs_eager
    if sa is not None and sb is not None:
        return sa > sb
    return sa is not None and sb is None


def task_input(task: str | Path, name: str | None = None) -> dict[str, str]:
    """Graph input for a task file path or a task's source text."""
    if isinstance(task, Path) or ("\n" not in str(task) and Path(str(task)).suffix == ".py"):
        return {"task_path": str(Path(task).resolve())}
    return {"task_source": str(task), "task_name": name or "task"}


def check_memory_writable(memory: Any) -> None:
    if getattr(memory, "read_only", False):
        raise MemoryLocationError(
            f"memory at {memory.location} is read-only; a run writes what it learns there: "
            "use a writable memory folder"
        )


def _naming_the_run(stream: Any, run_dir: Path) -> Any:
    """The stream's chunks; a service that stopped the run (the model provider, the memory server) is
    named with the run to resume."""
    try:
        yield from stream
    except (ProviderUnavailable, MemoryServerError) as exc:
        exc.run_dir = exc.run_dir or str(run_dir)
        raise


def run_optimize(
    task: str | Path | None,
    context: Context | None = None,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    task_name: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    close_pools: bool = True,
) -> OptimizeResult:
    """Optimize one task (a file path or source text) with checkpoints in `run_dir`.

    `resume=True` continues the interrupted run stored in `run_dir` (task and context come from its
    run.json; a `context` given here replaces the stored one). Returns the final result, which is
    also in run_dir/result.json.
    """
    if resume:
        if run_dir is None:
            raise ValueError("resume needs the run directory")
        rd = Path(run_dir)
        saved = read_run_file(rd)
        ctx = context or Context.from_json(saved.context)
        ctx = dataclasses.replace(ctx, run_dir=str(rd.resolve()))
        thread_id = saved.thread_id
        graph_input: Any = None
    else:
        if task is None:
            raise ValueError("run_optimize needs a task path or source")
        ctx = context or Context()
        thread_id = uuid.uuid4().hex
        graph_input = task_input(task, task_name)
        default_name = (
            Path(graph_input["task_path"]).stem if "task_path" in graph_input else graph_input["task_name"]
        )
        rd = Path(run_dir or ctx.run_dir or ctx.default_run_dir(default_name, thread_id))
        # the device, the folder, memory and model first: a run that cannot start leaves no half-made
        # run directory behind, and a folder holding another run is never mixed with this one
        ctx.check_usable()
        check_new_run_folder(rd)
        if ctx.memory not in (resources.MEMORY_OFF, resources.MEMORY_FRESH):  # fresh: made in the run folder
            check_memory_writable(resources.open_shared_memory(ctx.memory))
        resources.chat_model(ctx)
        rd.mkdir(parents=True, exist_ok=True)
        ctx = dataclasses.replace(ctx, run_dir=str(rd.resolve()))
        # claimed first (.run-id, exclusive), then written: two runs started into one folder cannot both write
        write_run_file(rd, RunFile(thread_id=thread_id, input=graph_input, context=ctx.to_json()))
    saver = open_checkpointer(rd)
    app = builder.compile(checkpointer=saver, name=GRAPH_NAME)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": 100_000}
    try:
        if resume:
            snapshot = app.get_state(config)
            if snapshot.values.get("result") is not None and not snapshot.next:
                done = OptimizeResult.model_validate(snapshot.values["result"])
                if on_progress is not None:
                    n = len(snapshot.values.get("attempts") or [])
                    on_progress(
                        Progress(
                            kind="finished", result=done, done=n, budget=ctx.budget, already_finished=True
                        )
                    )
                return done
        # a missing key or unreachable server is an error now, not mid-run (a finished run needs no model)
        resources.chat_model(ctx)
        resources.start_worker_pool(ctx)  # work is left: its judges start while the planner works
        attempts: list[Attempt] = list(app.get_state(config).values.get("attempts") or []) if resume else []
        best: Attempt | None = None
        for a in attempts:
            if _better(a, best):
                best = a
        stream = app.stream(graph_input, config=config, context=ctx, stream_mode="updates")
        for chunk in _naming_the_run(stream, rd):
            if on_progress is None:
                continue
            for node, update in chunk.items():
                if not isinstance(update, dict):
                    continue
                if node == "planner" and "run" in update:
                    on_progress(Progress(kind="started", run=update["run"], budget=ctx.budget))
                if node == "planner" and update.get("jobs"):
                    on_progress(
                        Progress(kind="planned", jobs=update["jobs"], done=len(attempts), budget=ctx.budget)
                    )
                for a in update.get("attempts") or []:
                    attempts.append(a)
                    if _better(a, best):
                        best = a
                    on_progress(
                        Progress(kind="attempt", attempt=a, best=best, done=len(attempts), budget=ctx.budget)
                    )
        final = app.get_state(config).values
        result = final.get("result")
        if result is None:
            raise RuntimeError(f"the run in {rd} ended without a result; resume it with --resume {rd}")
        result = OptimizeResult.model_validate(result)
        if on_progress is not None:
            on_progress(
                Progress(kind="finished", result=result, best=best, done=len(attempts), budget=ctx.budget)
            )
        return result
    finally:
        saver.conn.close()
        if close_pools:
            resources.close_pools()
