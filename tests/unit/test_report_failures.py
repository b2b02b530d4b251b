"""report.html counts a run's failures per design and error kind: judged failures, the judged ones that
repeated an earlier failure, and the repeats stopped before the judge."""

from __future__ import annotations

import re

from kernelwright.hardware.result import EvalResult
from kernelwright.nodes.records import Attempt, Candidate, OptimizeResult, Timing
from kernelwright.nodes.repeats import blocked_result_extra, failed_of, failure_counts, failures_by_design
from kernelwright.nodes.report import render_report
from tests.fakes.kernels import relu_compile_error, relu_kernel, relu_wrong

ERROR = "CompilationError: at 9:8: module 'triton.language' has no attribute 'no_such_function'"


def _attempt(seq: int, code: str, status: str, kind: str | None = None, **extra: object) -> Attempt:
    result = EvalResult(correct=status == "correct", error_kind=kind, error=ERROR if kind else None,
                        extra=dict(extra))  # fmt: skip
    blocked = "not judged: a repeat" if extra else None
    return Attempt(seq=seq, node_id=f"n{seq}", parent="n0", action="large_step", status=status,
                   candidate=Candidate(node_id=f"n{seq}", code=code, blocked=blocked), result=result,
                   timing=Timing(origin="none"))  # fmt: skip


def _run() -> list[Attempt]:
    broken = relu_compile_error("broken")
    n1 = _attempt(1, broken, "failed", "compile_error")
    first = failed_of("n1", "failed", broken, n1.result)
    assert first is not None
    return [
        n1,
        _attempt(2, broken.replace("BLOCK=1024", "BLOCK=256"), "failed", "compile_error"),  # judged repeat
        _attempt(3, broken, "failed", "static_check", **blocked_result_extra(first, "not judged")),
        _attempt(4, relu_wrong("leaky"), "wrong", "mismatch"),
        _attempt(5, relu_kernel("flat"), "correct"),
    ]


def test_failures_are_counted_per_design_and_kind() -> None:
    attempts = _run()
    rows = {(r.design, r.error_kind): r for r in failures_by_design(attempts)}
    assert set(rows) == {("broken", "compile_error"), ("leaky", "mismatch")}
    broken = rows[("broken", "compile_error")]
    assert (broken.failed, broken.repeats, broken.blocked) == (2, 1, 1)
    assert broken.nodes == ["n1", "n2", "n3"]
    leaky = rows[("leaky", "mismatch")]
    assert (leaky.failed, leaky.repeats, leaky.blocked, leaky.family) == (1, 0, 0, "pointwise")
    # the same numbers as the run's summary (result.json, bench)
    counts = failure_counts(attempts)
    assert counts["failed_by_kind"] == {"compile_error": 2, "mismatch": 1}
    assert (counts["repeats"], counts["blocked"]) == (1, 1)


def test_the_report_shows_the_failure_table() -> None:
    result = OptimizeResult(task="relu", run_id="0" * 32, run_dir="/tmp/none", correct=True, verdict="ok")
    page = render_report(result, _run())
    section = page[page.index("<h2>Failures by design and kind</h2>") : page.index("<h2>Attempts</h2>")]
    text = re.sub(r"<[^>]+>", " ", section)
    assert (
        "3 of 5 attempts failed at the judge; 1 of them repeated an earlier failure; 1 repeat was stopped"
        in " ".join(text.split())
    )
    cells = [
        " ".join(re.sub(r"<[^>]+>", " ", row).split()).replace(" ,", ",") for row in section.split("<tr>")[2:]
    ]
    assert cells[0].startswith("broken pointwise compile_error 2 1 1 n1, n2, n3")
    assert cells[1].startswith("leaky pointwise mismatch 1 0 0 n4")
    assert "Designs closed for the task: broken" in text
    clean = render_report(result, [_run()[-1]])
    assert "No attempt failed." in clean
