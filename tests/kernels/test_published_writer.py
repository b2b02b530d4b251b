"""The offline writer on the published suite, verified by the real harness on CPU (Triton interpreter).

The CPU judge verifies a task with small inputs on those, plus a second size shrunk from the task's
constants; the full published sizes are never made here. Slow: 36 programs through the interpreter
(a few minutes on two cores).
"""

from __future__ import annotations

from typing import Any

import pytest

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline import write_program
from kernelwright.providers.protocol import render_section
from kernelwright.tasks import Task, bundled_suite_dir, load_task

pytestmark = pytest.mark.slow

CFG = EvalConfig(device="cpu", time=False, timeout=240, trials=3)

# Families the offline writer has no Triton form for yet (none since pooling got its writer); every other
# published task must be written.
UNWRITTEN_FAMILIES: set[str] = set()


def _prompt(source: str) -> str:
    return "\n\n".join(
        [
            render_section("request", "Write a faster kernel.", kind="large_step"),
            render_section("task", source, name="t"),
        ]
    )


@pytest.fixture(scope="module")
def written() -> dict[str, Any]:
    """name -> (task, program or None, the writer's explanation)."""
    out = {}
    for path in sorted(bundled_suite_dir("published").glob("*.py")):
        task = load_task(path)
        answer = write_program(_prompt(task.source))
        out[task.name] = (task, answer.code, answer.explanation)
    return out


def _wrong(pool: WorkerPool, jobs: list[tuple[Task, str]]) -> list[str]:
    """Evaluate the jobs together; one line per program that does not verify, with its error."""
    results = pool.evaluate_many(jobs, CFG)
    # A harness error is not the program's fault: evaluate those once more, one at a time.
    results = [
        pool.evaluate(task, code, CFG) if r.error_kind == "harness_error" else r
        for (task, code), r in zip(jobs, results, strict=True)
    ]
    return [
        f"{task.name}: {r.summary()}\n{(r.error or '')[-800:]}"
        for (task, _), r in zip(jobs, results, strict=True)
        if not r.correct
    ]


def test_the_writer_declines_only_families_it_has_no_form_for(written: dict[str, Any]) -> None:
    declined = {n: (t.signature.op_families, why) for n, (t, code, why) in written.items() if code is None}
    assert all(set(fams) <= UNWRITTEN_FAMILIES for fams, _ in declined.values()), declined
    assert len(written) - len(declined) >= 36


def test_every_written_program_verifies_at_the_small_size(written: dict[str, Any], pool: WorkerPool) -> None:
    jobs = [(t, code) for n, (t, code, _) in written.items() if code is not None]
    bad = _wrong(pool, jobs)
    assert not bad, "\n\n".join(bad)
