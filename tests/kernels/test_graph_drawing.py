"""The optimize graph draws itself (what Studio shows): every edge the code can take, and no other.

Three views must agree: the graph LangGraph draws (`graph.get_graph()`), the routes each node declares
in its `Command[Literal[...]]` return type, and the routes the nodes actually took in a run that goes
through every kind of step (a failure, a correct kernel, the stop).
"""

from __future__ import annotations

import importlib
import typing
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import END, START
from langgraph.types import Command, Send

from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import ROUTES, builder, graph, serializer
from kernelwright.nodes import resources
from tests.fakes.chat import ScriptedChatModel, fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel

RELU = str(Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py")
BRANCH_NODES = ("planner", "context", "coder", "compiler", "profiler", "reflector")


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    resources.close_memories()  # the worker pool stays for the next module (tests/kernels/conftest.py)
    resources.forget_chat_models()


def drawn_edges() -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in graph.get_graph().edges}


def declared_edges() -> set[tuple[str, str]]:
    """Routes from each node's return annotation, resolved with the names its module imports."""
    edges = {(START, "planner"), ("finalize", END)}
    for name in BRANCH_NODES:
        module = importlib.import_module(f"kernelwright.nodes.{name}")
        fn = getattr(module, name)
        hints = typing.get_type_hints(fn)
        command = hints["return"]
        assert typing.get_origin(command) is Command, f"{name} does not return a Command"
        (targets,) = typing.get_args(command)
        edges |= {(name, t) for t in typing.get_args(targets)}
    return edges


def test_the_drawn_graph_is_the_declared_one():
    drawn = drawn_edges()
    assert drawn == declared_edges()
    assert {n for e in drawn for n in e} == {START, END, "finalize", *BRANCH_NODES}
    assert set(ROUTES) == set(BRANCH_NODES)


def test_every_route_a_run_takes_is_drawn_and_every_drawn_route_is_taken(tmp_path, monkeypatch):
    taken: set[tuple[str, str]] = set()

    def recording(source: str) -> type:
        class Recording(Command):  # type: ignore[type-arg]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                goto = self.goto if isinstance(self.goto, list | tuple) else [self.goto]
                for g in goto:
                    taken.add((source, g.node if isinstance(g, Send) else str(g)))

        return Recording

    for name in BRANCH_NODES:
        monkeypatch.setattr(importlib.import_module(f"kernelwright.nodes.{name}"), "Command", recording(name))
    model = ScriptedChatModel(script=[fenced(relu_compile_error()), fenced(relu_kernel("ok"))])
    ctx = Context(
        chat_model=model,
        budget=2,
        device="cpu",
        workers=1,
        memory=str(tmp_path / "memory"),
        run_dir=str(tmp_path / "run"),
        llm_rules=False,
    )
    app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
    config: Any = {"configurable": {"thread_id": "draw"}}
    app.invoke({"task_path": RELU}, config=config, context=ctx)
    state = app.get_state(config).values
    assert [a.status for a in state["attempts"]] == ["failed", "correct"]
    assert taken | {(START, "planner"), ("finalize", END)} == drawn_edges()
