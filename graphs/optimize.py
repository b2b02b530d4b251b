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
import json
import re
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field, ValidationError

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
from kernelwright.nodes.state import CHECKPOINT_TYPES, InputState, State
from kernelwright.providers.chat import ProviderUnavailable

RUN_FILE = "run.json"
CHECKPOINT_FILE = "checkpoints.sqlite"
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


_OLD_MODULE = re.compile(rb"(?<![\w.])(?:graphs|nodes|providers|memory|hardware|tasks)\.\w+")
"""A module name from before kernelwright imported under one name (0.1: `nodes.records`, `tasks.task`)."""
_OLD_PREFIXES = tuple(f"{name}." for name in ("graphs", "nodes", "providers", "memory", "hardware", "tasks"))
_TYPE_EXTS = frozenset(range(6))
"""langgraph's msgpack extension codes whose payload starts with (module, name, ...)."""


_RENAMED_TYPES = {("kernelwright.nodes.records", "Design"): "RepresentativeDesign"}
"""Record classes renamed since they were written to checkpoints: (module, old name) -> new name."""
_OLD_NAME = re.compile(rb"(?<![A-Za-z])Design(?![A-Za-z])")


def _renamed(payload: bytes, code: int | None = None) -> bytes:
    """A msgpack payload with every record's 0.1 module name moved under kernelwright and every renamed
    record class under its new name (nested ones too)."""
    value = ormsgpack.unpackb(
        payload, ext_hook=lambda c, d: ormsgpack.Ext(c, _renamed(d, c)), option=ormsgpack.OPT_NON_STR_KEYS
    )
    if code in _TYPE_EXTS and isinstance(value, list) and len(value) > 1:
        if str(value[0]).startswith(_OLD_PREFIXES):
            value = ["kernelwright." + value[0], *value[1:]]
        new = _RENAMED_TYPES.get((str(value[0]), str(value[1])))
        if new is not None:
            value = [value[0], new, *value[2:]]
    return ormsgpack.packb(value, option=ormsgpack.OPT_NON_STR_KEYS)


class _Serializer(JsonPlusSerializer):
    """JsonPlusSerializer that also reads checkpoints written by kernelwright 0.1, whose records were
    named `nodes.records.Job` and so on, and records whose class was renamed since (`Design`): they load
    as the same types, so such runs resume."""

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind == "msgpack" and (_OLD_MODULE.search(payload) or _OLD_NAME.search(payload)):
            payload = _renamed(payload)
        return super().loads_typed((kind, payload))


def serializer() -> JsonPlusSerializer:
    """A serializer that revives exactly the state's record types from checkpoints."""
    return _Serializer(allowed_msgpack_modules=[(t.__module__, t.__name__) for t in CHECKPOINT_TYPES])


def open_checkpointer(run_dir: str | Path) -> SqliteSaver:
    path = Path(run_dir) / CHECKPOINT_FILE
    conn = sqlite3.connect(str(path), check_same_thread=False)
    return SqliteSaver(conn, serde=serializer())


class RunFile(BaseModel):
    """run.json: what `--resume RUN_DIR` needs to continue a run."""

    thread_id: str
    input: dict[str, str]
    context: dict[str, Any]
    created_by: str = "kernelwright optimize"


def read_run_file(run_dir: str | Path) -> RunFile:
    """The run.json of a run directory; a ValueError with one line when it is missing or damaged."""
    rd = Path(run_dir)
    path = rd / RUN_FILE
    if not rd.is_dir():
        raise ValueError(f"{rd}: no such run directory")
    if not path.is_file():
        raise ValueError(f"{rd}: not a run directory (no {RUN_FILE})")
    try:
        return RunFile.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise ValueError(f"{path} is damaged, not a run file kernelwright wrote ({detail})") from exc


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
        # memory and model first: a run that cannot start leaves no half-made run directory behind
        if ctx.memory not in (resources.MEMORY_OFF, resources.MEMORY_FRESH):  # fresh: made in the run folder
            check_memory_writable(resources.open_shared_memory(ctx.memory))
        resources.chat_model(ctx)
        rd.mkdir(parents=True, exist_ok=True)
        ctx = dataclasses.replace(ctx, run_dir=str(rd.resolve()))
        (rd / RUN_FILE).write_text(
            json.dumps(
                RunFile(thread_id=thread_id, input=graph_input, context=ctx.to_json()).model_dump(), indent=2
            )
            + "\n",
            encoding="utf-8",
        )
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
