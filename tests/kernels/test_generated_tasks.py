"""Generated tasks (`kernelwright tasks generate`) are ones the offline writer solves: whole runs on CPU
under the Triton interpreter. The generator itself is tested in tests/unit/test_task_generator.py."""

from __future__ import annotations

import pytest

from kernelwright.tasks.generate import generate_tasks


@pytest.mark.slow
def test_the_offline_writer_finds_a_correct_kernel_for_generated_tasks(tmp_path):
    """Seed 3's first five (Linear, matmul, bmm, Conv2d heads; reductions, logsumexp): 5/5 on 2026-11-30."""
    from kernelwright.graphs.context import Context
    from kernelwright.graphs.optimize import run_optimize

    ctx = Context(budget=2, device="cpu", memory="off", workers=1)
    for t in generate_tasks(5, 3):
        path = tmp_path / f"{t.name}.py"
        path.write_text(t.source)
        res = run_optimize(path, ctx, tmp_path / "runs" / t.name, close_pools=False)
        assert res.correct, f"{t.name}: {res.verdict}"
