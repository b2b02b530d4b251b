"""One thread, several inputs: every new input starts a new run; a thread never answers with an old result.

The graph runs with the real LangGraph SQLite checkpointer (as `kernelwright optimize` and a resumed
run use it) and a scripted chat model; memory is a real Chroma folder in tmp.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import builder, serializer
from kernelwright.graphs.state import CHECKPOINT_TYPES
from kernelwright.memory import open_memory
from kernelwright.nodes import resources
from tests.fakes.chat import ScriptedChatModel, fenced
from tests.fakes.kernels import relu_kernel

ROOT = Path(__file__).resolve().parents[2]
RELU = str(ROOT / "tasks" / "level1" / "01_relu.py")
SILU_SOURCE = (ROOT / "tasks" / "level1" / "03_silu.py").read_text()


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    resources.close_memories()  # the worker pool stays for the next module (tests/kernels/conftest.py)
    resources.forget_chat_models()


def test_each_input_on_a_thread_is_its_own_run(tmp_path):
    # SiLU answered with a ReLU kernel is wrong: the second run's verdict must say so, not reuse ReLU's
    model = ScriptedChatModel(script=[fenced(relu_kernel("ok"))], loop=True)
    ctx = Context(
        chat_model=model, budget=1, device="cpu", memory=str(tmp_path / "memory"), llm_rules=False,
        runs_root=str(tmp_path / "runs"),
    )  # fmt: skip
    conn = sqlite3.connect(str(tmp_path / "checkpoints.sqlite"), check_same_thread=False)
    app = builder.compile(checkpointer=SqliteSaver(conn, serde=serializer()))
    config: Any = {"configurable": {"thread_id": "studio-thread"}}
    try:
        app.invoke({"task_path": RELU}, config=config, context=ctx)
        first = app.get_state(config).values
        app.invoke({"task_source": SILU_SOURCE, "task_name": "silu"}, config=config, context=ctx)
        second = app.get_state(config).values
        app.invoke({"task_source": SILU_SOURCE, "task_name": "silu"}, config=config, context=ctx)
        third = app.get_state(config).values
    finally:
        conn.close()
    assert first["result"].task == "01_relu" and first["result"].correct
    assert first["result"].run_id == "studio-thread"
    assert second["result"].task == "silu" and not second["result"].correct
    assert second["run"].run_id not in ("studio-thread", third["run"].run_id)
    # the new run's state holds only its own work
    assert [a.node_id for a in second["attempts"]] == ["n1"] and len(second["jobs"]) == 1
    assert second["cost"].llm_calls == 1 and second["cost"].evaluations == 1
    assert second["attempts"][0].status == "wrong"
    assert third["result"].task == "silu" and [a.node_id for a in third["attempts"]] == ["n1"]
    # each run wrote its own directory and its own memory cases
    dirs = {Path(s["run"].run_dir).name for s in (first, second, third)}
    assert len(dirs) == 3 and all((tmp_path / "runs" / d / "result.json").is_file() for d in dirs)
    mem = open_memory(ctx.memory)
    try:
        assert mem.cases.count() == 3
    finally:
        mem.close()


def test_langgraph_json_registers_the_checkpointed_types():
    config = json.loads((ROOT / "langgraph.json").read_text())
    listed = {tuple(x) for x in config["checkpointer"]["serde"]["allowed_msgpack_modules"]}
    assert listed == {(t.__module__, t.__name__) for t in CHECKPOINT_TYPES}


def _as_written_by_0_1(payload: bytes, code: int | None = None) -> bytes:
    """A msgpack checkpoint payload with kernelwright's module names as 0.1 wrote them (`nodes.records`)."""
    import ormsgpack

    value = ormsgpack.unpackb(
        payload,
        ext_hook=lambda c, d: ormsgpack.Ext(c, _as_written_by_0_1(d, c)),
        option=ormsgpack.OPT_NON_STR_KEYS,
    )
    if code is not None and isinstance(value, list) and str(value[0]).startswith("kernelwright."):
        value = [value[0].removeprefix("kernelwright."), *value[1:]]
        if value[1] == "RepresentativeDesign":  # its name before 0.2
            value = [value[0], "Design", *value[2:]]
    return ormsgpack.packb(value, option=ormsgpack.OPT_NON_STR_KEYS)


def test_checkpoints_written_before_the_kernelwright_namespace_still_load():
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from kernelwright.nodes.records import CostLedger, RepresentativeDesign, RunInfo, Usage
    from kernelwright.tasks import load_task

    state = {
        "run": RunInfo(
            run_id="r", run_dir="/tmp/r", task_name="01_relu", model="offline", device="cpu", target="cpu"
        ),  # fmt: skip
        "task": load_task(ROOT / "tasks" / "level1" / "01_relu.py"),  # holds a TaskSignature: nested
        "steps": [Usage(llm_calls=1, tokens_in=5), Usage(llm_calls=2)],
        "cost": CostLedger(llm_calls=2, evaluations=1),
        "designs": [
            RepresentativeDesign(node_id="n1", code="# kernelwright: family=pointwise design=flat\n")
        ],
    }
    kind, payload = serializer().dumps_typed(state)
    old = _as_written_by_0_1(payload)
    assert b"kernelwright." not in old and b"nodes.records" in old and b"tasks.task" in old
    assert b"RepresentativeDesign" not in old
    loaded = serializer().loads_typed((kind, old))
    assert loaded["run"] == state["run"] and loaded["cost"] == state["cost"]
    assert loaded["steps"] == state["steps"] and loaded["task"] == state["task"]
    assert type(loaded["task"].signature).__name__ == "TaskSignature"
    assert loaded["designs"] == state["designs"] and isinstance(loaded["designs"][0], RepresentativeDesign)
    # a serializer that knows only today's names does not revive them
    plain = JsonPlusSerializer(allowed_msgpack_modules=[(t.__module__, t.__name__) for t in CHECKPOINT_TYPES])
    assert not isinstance(plain.loads_typed((kind, old))["cost"], CostLedger)


def test_the_same_task_sent_again_after_an_interrupt_continues_the_run(tmp_path):
    """Studio's interrupt stops a run with a candidate in flight; sending the same task again continues
    that run: the dropped candidate is planned again and the run ends with a result, in the folder it
    started in. The finished state still shows the task_path it was given."""
    model = ScriptedChatModel(script=[fenced(relu_kernel("ok"))], loop=True)
    ctx = Context(
        chat_model=model, budget=2, device="cpu", memory=str(tmp_path / "memory"), llm_rules=False,
        runs_root=str(tmp_path / "runs"),
    )  # fmt: skip
    conn = sqlite3.connect(str(tmp_path / "checkpoints.sqlite"), check_same_thread=False)
    app = builder.compile(checkpointer=SqliteSaver(conn, serde=serializer()))
    config: Any = {"configurable": {"thread_id": "studio-thread"}}
    try:
        # stopped while the first candidate is between its coder and its compiler
        app.invoke({"task_path": RELU}, config=config, context=ctx, interrupt_before=["compiler"])
        stopped = app.get_state(config)
        assert stopped.next == ("compiler",) and len(stopped.values["jobs"]) == 1
        assert not stopped.values.get("attempts")
        app.invoke({"task_path": RELU}, config=config, context=ctx)
        done = app.get_state(config)
    finally:
        conn.close()
    values = done.values
    assert done.next == () and values["result"] is not None, values.get("stop_reason")
    assert values["run"].run_id == "studio-thread"  # the same run, continued
    assert [a.node_id for a in values["attempts"]] == ["n1", "n2"] and len(values["jobs"]) == 2
    assert values["result"].stop_reason and values["result"].search["nodes"] == 2
    assert values["task_path"] == str(Path(RELU).resolve())
    assert len(list((tmp_path / "runs").iterdir())) == 1


def test_a_task_source_after_a_finished_task_path_run_is_the_new_task(tmp_path):
    """The finished state keeps its task_path; a task_source given next is the task run, not that path."""
    model = ScriptedChatModel(script=[fenced(relu_kernel("ok"))], loop=True)
    ctx = Context(
        chat_model=model,
        budget=1,
        device="cpu",
        memory="off",
        llm_rules=False,
        runs_root=str(tmp_path / "runs"),
    )
    conn = sqlite3.connect(str(tmp_path / "checkpoints.sqlite"), check_same_thread=False)
    app = builder.compile(checkpointer=SqliteSaver(conn, serde=serializer()))
    config: Any = {"configurable": {"thread_id": "t"}}
    try:
        app.invoke({"task_path": RELU}, config=config, context=ctx)
        assert app.get_state(config).values["task_path"] == str(Path(RELU).resolve())
        app.invoke({"task_source": SILU_SOURCE, "task_name": "silu"}, config=config, context=ctx)
        values = app.get_state(config).values
    finally:
        conn.close()
    assert values["result"].task == "silu" and values["run"].run_id != "t"
    assert values.get("task_path") is None  # a task given as source has no path to show
