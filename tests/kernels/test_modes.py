"""Modes and state: train() and eval(), buffers that forward updates, and references that are random.

A model with BatchNorm behaves differently in train and eval mode and updates its running statistics in
train mode; the judge alternates trials between the modes and compares buffers after forward. A reference
that is random only in train mode (dropout) is verified in eval mode; one that draws from torch's RNG in
every mode is verified with the reference's and the candidate's forwards seeded alike; one random beyond any
seed cannot be verified at all, which is the task's problem (harness_error), not the candidate's.
"""

from __future__ import annotations

from pathlib import Path

from kernelwright.tasks import load_task

MODES = Path(__file__).parent / "modes"


def candidate(name: str) -> str:
    return (MODES / "bn_common.txt").read_text() + "\n\n" + (MODES / name).read_text()


def test_batchnorm_in_both_modes_with_its_running_statistics(pool):
    res = pool.evaluate(load_task(MODES / "task_batchnorm.py"), candidate("bn_both_modes.py"))
    assert res.correct, res.error
    assert any("train() and eval()" in n for n in res.extra["notes"])


def test_kernel_that_ignores_the_mode_and_the_running_statistics_fails(pool):
    res = pool.evaluate(load_task(MODES / "task_batchnorm.py"), candidate("bn_batch_stats_only.py"))
    assert (res.correct, res.error_kind) == (False, "mismatch"), res.error
    assert "buffer bn.running_mean" in res.error and "train-mode forward" in res.error


def test_kernel_that_skips_only_the_running_statistics_update_fails(pool):
    src = candidate("bn_both_modes.py").replace(
        "bn.running_mean.mul_(1 - bn.momentum).add_(bn.momentum * mean)", "pass"
    )
    res = pool.evaluate(load_task(MODES / "task_batchnorm.py"), src)
    assert (res.correct, res.error_kind) == (False, "mismatch"), res.error
    assert "buffer bn.running_mean" in res.error


def test_kernel_that_uses_batch_statistics_in_eval_mode_fails(pool):
    src = candidate("bn_both_modes.py").replace("if self.training:", "if True:")
    res = pool.evaluate(load_task(MODES / "task_batchnorm.py"), src)
    assert (res.correct, res.error_kind) == (False, "mismatch"), res.error
    assert "eval mode" in res.error or "eval-mode" in res.error


def test_dropout_reference_is_verified_in_eval_mode(pool):
    res = pool.evaluate(load_task(MODES / "task_dropout.py"), candidate("relu_only.py"))
    assert res.correct, res.error
    assert any("verified in eval mode only" in n for n in res.extra["notes"])


def test_random_reference_cannot_be_verified(pool):
    res = pool.evaluate(load_task(MODES / "task_random.py"), candidate("relu_only.py"))
    assert (res.correct, res.error_kind) == (False, "harness_error"), res.error
    assert "cannot be verified" in res.error


def test_a_reference_drawing_from_torchs_rng_is_verified_with_both_forwards_seeded_alike(pool):
    """level3/35 draws its LSTM's initial state with torch.randn in forward: the judge seeds torch's RNG the
    same before the reference's forward and the candidate's on each trial's inputs. A candidate that draws the
    same numbers passes; one that draws them differently (one draw more) does not."""
    task = load_task(MODES / "task_random_torch.py")
    res = pool.evaluate(task, candidate("add_noise.py"))
    assert res.correct, res.error
    assert any("draws random numbers in forward" in n for n in res.extra["notes"])
    other = candidate("add_noise.py").replace(
        "noise = torch.rand_like(x)  #", "noise = torch.rand_like(x) * 0 + torch.rand_like(x)  #"
    )
    res = pool.evaluate(task, other)
    assert (res.correct, res.error_kind) == (False, "mismatch"), res.error
