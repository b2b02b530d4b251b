"""No failure repeated: a writer that keeps answering one failing program gets it judged once, its design
is closed after two identical failures, and the rule learned from that reaches the next prompts.

Whole optimize-graph runs with a scripted chat model on the bundled ReLU task (CPU worker, Triton
interpreter), real memory; plus the program key and the counts on their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import builder, serializer
from kernelwright.memory import open_memory
from kernelwright.nodes import resources
from kernelwright.nodes.evaluations import EvaluationLog
from kernelwright.nodes.repeats import program_key
from tests.fakes.chat import ScriptedChatModel, fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel

RELU = str(Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py")


@pytest.fixture(scope="module", autouse=True)
def _close():
    yield
    resources.close_memories()
    resources.forget_chat_models()


def run_graph(tmp_path: Path, model: Any, budget: int, fanout: int = 0) -> dict[str, Any]:
    ctx = Context(
        chat_model=model,
        budget=budget,
        device="cpu",
        workers=1,
        fanout=fanout,
        memory=str(tmp_path / "memory"),
        run_dir=str(tmp_path / "run"),
        seed=0,
        llm_rules=False,
        budget_llm_calls=None,
        budget_wall_s=None,
    )
    app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 1000}
    app.invoke({"task_path": RELU}, config=config, context=ctx)
    return app.get_state(config).values


def test_a_program_written_again_is_judged_once_and_its_design_closes(tmp_path):
    broken = fenced(relu_compile_error("broken"))
    model = ScriptedChatModel(script=[broken], loop=True)
    state = run_graph(tmp_path, model, budget=3)
    attempts = {a.node_id: a for a in state["attempts"]}
    run = state["run"]
    # one judge run for the one program; every later answer was stopped before the judge
    verifies = [e for e in EvaluationLog(run.run_dir).entries() if e.phase == "verify"]
    assert [e.node_id for e in verifies] == ["n1"]
    assert attempts["n1"].result.error_kind == "compile_error" and not attempts["n1"].candidate.blocked
    for nid in ("n2", "n3", "n4"):
        c = attempts[nid].candidate
        assert attempts[nid].status == "failed" and c.blocked and c.repeat_asks == 2
        assert c.usage.llm_calls == 3
    assert attempts["n2"].candidate.repeat_of == "n1"
    assert "n1" in attempts["n2"].result.error and "compile_error" in attempts["n2"].result.error
    # the repeat asked again with the failure named; from then on design=broken is a closed rule
    asks = [str(p[-1].content) for p in model.prompts]
    assert "the same program as n1" in asks[2] and "no_such_function" in asks[2]
    closed_line = "You cannot use design=broken for pointwise on this task again"
    assert closed_line not in asks[1] and closed_line in asks[2]
    assert all(closed_line in p for p in asks[3:])  # n3's prompts, the large step's too
    assert state["jobs"][2].closed_designs[0].design == "broken"
    assert attempts["n2"].reflection.closed_design == "broken"
    # the blocked repeat is not repaired: n3 is a new large step from the root
    assert (state["jobs"][2].decision.parent, state["jobs"][2].action) == ("n0", "large_step")
    # the rule learned forbids the design (no config), and counts nothing twice
    mem = open_memory(str(tmp_path / "memory"))
    try:
        texts = [r.text for r in mem.rules.all()]
    finally:
        mem.close()
    assert any(
        t.startswith("You cannot use design=broken for pointwise on ") and "twice" not in t for t in texts
    )
    assert any("two of its programs failed the same way" in t for t in texts)
    counts = state["result"].search["failures"]
    assert counts == {
        "candidates": 4,
        "failed_by_kind": {"compile_error": 1},
        "repeats": 0,
        "blocked": 3,
        "closed_designs": ["broken"],
    }
    # a blocked answer spends no candidate: the budget of 3 stops the search only at 3 blocked answers
    assert state["result"].stop_reason.startswith("the writer only repeated failures (3 answers not judged")


def test_a_repair_that_changes_only_the_config_is_not_judged_but_a_real_fix_is(tmp_path):
    model = ScriptedChatModel(
        script=[
            fenced(relu_compile_error("broken")),
            fenced(relu_compile_error("broken").replace("BLOCK=1024", "BLOCK=256")),  # config only
            fenced(relu_kernel("fixed")),  # the construct the error names is gone
        ]
    )
    state = run_graph(tmp_path, model, budget=2)
    attempts = {a.node_id: a for a in state["attempts"]}
    assert attempts["n2"].status == "correct" and attempts["n2"].candidate.repeat_asks == 1
    asks = [str(p[-1].content) for p in model.prompts]
    assert "up to its block sizes and launch settings" in asks[2]
    verifies = [e.node_id for e in EvaluationLog(state["run"].run_dir).entries() if e.phase == "verify"]
    assert verifies == ["n1", "n2"]
    assert state["result"].search["failures"]["repeats"] == 0


def test_the_program_key_ignores_comments_and_config_but_not_constructs():
    a = relu_kernel("x", 1024, 4)
    assert program_key(a) == program_key(relu_kernel("y", 256, 8))
    assert program_key(a, config=True) != program_key(relu_kernel("y", 256, 8), config=True)
    assert program_key(a) == program_key(a.replace("    pid = ", "    # a comment\n    pid = "))
    assert program_key(a) != program_key(relu_compile_error("x"))
    literal = a.replace("n = x.numel()", "n = 32768")
    assert program_key(literal) != program_key(a)
    # a precision string is a design choice (it can fix a mismatch); numbers are config
    call = "relu_kernel[grid](x, out, n, BLOCK=1024, num_warps=4)"
    assert call in a
    with_prec = a.replace(call, call.replace("num_warps=4", 'PREC="tf32", num_warps=4'))
    other_prec = with_prec.replace('PREC="tf32"', 'PREC="ieee"')
    assert program_key(with_prec) != program_key(other_prec)
    assert program_key(with_prec) == program_key(with_prec.replace("num_warps=4", "num_warps=8"))


def test_the_offline_writer_does_not_write_a_closed_design_again():
    from kernelwright.nodes.prompts import closed_design_rule, render_request
    from kernelwright.providers.offline.choice.designs import DESIGN_NAMES
    from kernelwright.providers.offline.writer import write_program
    from kernelwright.providers.protocol import KernelHeader, render_section

    base = render_request("large_step") + "\n" + render_section("task", Path(RELU).read_text(), name="relu")
    first = KernelHeader.parse(write_program(base).code)
    assert first is not None and first.design

    def closing(designs: list[str]) -> str:
        lines = [f"- {closed_design_rule(d, first.family, 'runtime_error')}" for d in designs]
        return base + "\n" + render_section("rules", "\n".join(lines))

    other = KernelHeader.parse(write_program(closing([first.design])).code)
    assert other is not None and other.design != first.design
    # every design closed: no program, and the run stops saying why (instead of writing one again)
    none = write_program(closing(sorted(DESIGN_NAMES)))
    assert none.code is None and "closed for this task" in (none.unsupported or "")


def test_a_copy_of_a_program_another_branch_is_judging_is_not_judged_again(tmp_path):
    """Two expansions in flight write the same failing program: the second copy waits for the first's
    verdict and is blocked as its repeat (its job, planned before that verdict, could not name it)."""
    model = ScriptedChatModel(script=[fenced(relu_compile_error("broken"))], loop=True)
    state = run_graph(tmp_path, model, budget=2, fanout=2)
    attempts = {a.node_id: a for a in state["attempts"]}
    verifies = [e.node_id for e in EvaluationLog(state["run"].run_dir).entries() if e.phase == "verify"]
    assert len(verifies) == 1
    first = verifies[0]
    copy = {"n1": "n2", "n2": "n1"}[first]  # the two root expansions ran at once; either may be first
    assert state["jobs"][0].failed_programs == [] and state["jobs"][1].failed_programs == []
    assert attempts[first].result.error_kind == "compile_error" and not attempts[first].candidate.blocked
    c = attempts[copy].candidate
    assert c.blocked and c.repeat_of == first and c.repeat_asks == 0  # caught at the judge, not the coder
    assert "another branch was judging" in c.blocked and first in attempts[copy].result.error
    counts = state["result"].search["failures"]
    assert counts["repeats"] == 0 and counts["failed_by_kind"] == {"compile_error": 1}
    assert counts["closed_designs"] == ["broken"]  # the copy is the failure's second occurrence
