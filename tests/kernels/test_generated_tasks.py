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


def test_the_offline_writer_solves_bf16_variants_without_a_dot_on_the_interpreter(tmp_path):
    """level1_bf16's softmax and level2_bf16's layer norm + GELU: whole runs at bf16 on CPU. (The suites'
    matmul and convolution tasks verify on CPU as well since the judge corrects the interpreter's bf16
    dots; bf16 dots are tested in test_interpreter_fixes.py and test_matmul_designs.py.)"""
    from kernelwright.graphs.context import Context
    from kernelwright.graphs.optimize import run_optimize
    from kernelwright.tasks import bundled_suite_dir

    ctx = Context(budget=1, device="cpu", memory="off", workers=1)
    for level, name in (("level1_bf16", "09_softmax"), ("level2_bf16", "04_layernorm_gelu")):
        path = bundled_suite_dir(level) / f"{name}.py"  # type: ignore[arg-type]
        res = run_optimize(path, ctx, tmp_path / "runs" / name, close_pools=False)
        assert res.correct, f"{level}/{name}: {res.verdict}"
