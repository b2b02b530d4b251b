"""report.html says, per candidate, how it did against its parent and what was in its prompt."""

from __future__ import annotations

from kernelwright.hardware.result import EvalResult
from kernelwright.nodes.records import (
    Attempt,
    Candidate,
    ContextItem,
    ContextRecord,
    OptimizeResult,
    Timing,
)
from kernelwright.nodes.report import render_report, versus_parent


def attempt(node: str, parent: str, speedup: float | None, status: str = "correct", **kw) -> Attempt:
    return Attempt(seq=int(node[1:]), node_id=node, parent=parent, action="small_step",
                   candidate=Candidate(node_id=node, code="pass"), result=EvalResult(correct=status == "correct"), status=status,
                   timing=Timing(origin="measured", speedup_vs_eager=speedup), **kw)  # fmt: skip


def test_each_candidate_against_its_parent():
    n1 = attempt("n1", "n0", 1.5)
    n2 = attempt("n2", "n1", 1.2)
    n3 = attempt("n3", "n1", 1.8)
    n4 = attempt("n4", "n2", None, status="wrong")
    n5 = attempt("n5", "n4", 1.1)
    everyone = [n1, n2, n3, n4, n5]
    assert versus_parent(n1, everyone) == "1.50x, beat it"  # the root is eager PyTorch
    assert versus_parent(n2, everyone) == "0.80x, did not beat it"
    assert versus_parent(n3, everyone) == "1.20x, beat it"
    assert versus_parent(n4, everyone) == "-"
    assert versus_parent(n5, everyone) == "parent had no speedup"


def test_the_attempts_table_names_the_rules_and_cases_in_each_prompt():
    ctx = ContextRecord(injected=[ContextItem(kind="rule", id="r-7"), ContextItem(kind="case", id="c-3"),
                                  ContextItem(kind="doc", id="d-1")])  # fmt: skip
    a = attempt("n1", "n0", 1.5, context=ctx)
    html = render_report(
        OptimizeResult(task="t", run_id="r", run_dir="/tmp/r", correct=True, verdict="v"), [a]
    )
    assert "rules and cases in its prompt" in html and "title='rule r-7'" in html
    assert "title='case c-3'" in html and "doc d-1" not in html
    assert "1.50x, beat it" in html
