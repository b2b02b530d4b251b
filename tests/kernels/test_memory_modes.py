"""Memory modes: `--memory off` reads and writes nothing, `--memory fresh` starts an empty store in the run
folder, `--rules off` keeps cases but neither injects nor learns rules; the default store is the control.

Each run: a scripted model answers a kernel that fails to compile, then a correct one, so a rule would be
learned from the first and a case written for both. The store given holds one rule relevant to the task.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kernelwright.cli.optimize import context_from_args
from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import builder, serializer
from kernelwright.memory import RuleCandidate, open_memory
from kernelwright.nodes import resources
from tests.fakes.chat import ScriptedChatModel, fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel

RELU = str(Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py")


@pytest.fixture(scope="module", autouse=True)
def _one_pool_for_the_module():
    yield
    resources.close_memories()  # the worker pool stays for the next module (tests/kernels/conftest.py)
    resources.forget_chat_models()


def store_with_a_rule(path: Path) -> Path:
    mem = open_memory(path)
    try:
        for i in range(3):  # seen three times: over the injection threshold
            mem.rules.add(RuleCandidate(text="You cannot use BLOCK=4096 for an elementwise kernel on this device",
                                        error_kind="compile_error", error="e", case_id=f"c{i}",
                                        op_families=["pointwise"], hardware="cpu-interpreter"))  # fmt: skip
        assert mem.rules.count() == 1
    finally:
        mem.close()
    return path


def counts(path: Path) -> tuple[int, int]:
    mem = open_memory(path)
    try:
        return mem.cases.count(), mem.rules.count()
    finally:
        mem.close()


def run(tmp_path: Path, **kw: Any) -> list[Any]:
    model = ScriptedChatModel(script=[fenced(relu_compile_error()), fenced(relu_kernel("second", 512))])
    ctx = Context(chat_model=model, budget=2, device="cpu", workers=1, fanout=0, run_dir=str(tmp_path / "run"),
                  seed=0, llm_rules=False, **kw)  # fmt: skip
    app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    app.invoke({"task_path": RELU}, config=config, context=ctx)
    attempts = app.get_state(config).values["attempts"]
    resources.close_memories()  # the stores are read again below; the worker pool stays for the next run
    return list(attempts)


def injected(attempts: list[Any], kind: str) -> list[str]:
    return [i.id for a in attempts if a.context for i in a.context.injected if i.kind == kind]


def test_the_default_store_injects_its_rule_and_learns_from_the_failure(tmp_path):
    store = store_with_a_rule(tmp_path / "store")
    attempts = run(tmp_path, memory=str(store))
    assert injected(attempts, "rule")
    assert any(a.reflection.rule_ids for a in attempts)
    cases, rules = counts(store)
    assert cases == 2 and rules == 2


def test_rules_off_keeps_cases_but_injects_and_learns_no_rule(tmp_path):
    store = store_with_a_rule(tmp_path / "store")
    attempts = run(tmp_path, memory=str(store), rules=False)
    assert injected(attempts, "rule") == []
    assert not any(a.reflection.rule_ids for a in attempts)
    assert any("rules are off" in a.reflection.note for a in attempts)
    assert counts(store) == (2, 1)


def test_memory_off_reads_and_writes_nothing(tmp_path, monkeypatch):
    store = store_with_a_rule(tmp_path / "store")
    monkeypatch.setenv("KERNELWRIGHT_MEMORY", str(store))  # what the run would use without "off"
    attempts = run(tmp_path, memory="off")
    assert injected(attempts, "rule") == [] and injected(attempts, "case") == []
    assert all("memory is off" in a.reflection.note and a.reflection.case_id is None for a in attempts)
    assert counts(store) == (0, 1)
    assert not (tmp_path / "run" / "memory").exists()


def test_memory_fresh_starts_empty_in_the_run_folder(tmp_path, monkeypatch):
    store = store_with_a_rule(tmp_path / "store")
    monkeypatch.setenv("KERNELWRIGHT_MEMORY", str(store))
    attempts = run(tmp_path, memory="fresh")
    assert injected(attempts, "rule") == []  # the old store's rule is not there
    fresh = tmp_path / "run" / "memory"
    assert counts(fresh) == (2, 1)  # both attempts' cases, the failure's rule
    assert counts(store) == (0, 1)


def test_the_flags_reach_the_context():
    ns = argparse.Namespace(model=None, base_url=None, budget=None, device=None, target=None, memory="fresh",
                            workers=None, fanout=None, allow_tf32=None, seed=None, rules="off")  # fmt: skip
    ctx = context_from_args(ns, Context())
    assert (ctx.memory, ctx.rules) == ("fresh", False)
    assert resources.memory_location("fresh", "/runs/r1") == "/runs/r1/memory"
    assert resources.memory_location("off", "/runs/r1") == "off"
    with pytest.raises(ValueError, match="run folder"):
        resources.memory_location("fresh", None)
