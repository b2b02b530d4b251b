"""A model's non-persistent buffers (tables computed in __init__, like rotary embeddings' cos/sin) are not in
its state_dict, so the judge cannot hand them to a candidate: it must not perturb them in the reference
either, or an honest candidate that builds the same table is refused (a stitched decoder block was)."""

from __future__ import annotations

from pathlib import Path

import torch

from kernelwright.hardware.judge.inputs import perturb_
from kernelwright.tasks import load_task

MODES = Path(__file__).parent / "modes"


def test_an_honest_candidate_with_a_non_persistent_table_is_correct(pool):
    task = load_task(MODES / "task_rotary_table.py")
    res = pool.evaluate(task, (MODES / "rotary_table_candidate.py").read_text())
    assert res.correct, res.error


def test_perturbing_moves_the_state_dict_and_leaves_non_persistent_buffers():
    model = torch.nn.Module()
    model.register_buffer("table", torch.arange(1.0, 5.0), persistent=False)
    model.register_buffer("stats", torch.arange(1.0, 5.0))
    model.weight = torch.nn.Parameter(torch.arange(1.0, 5.0))
    assert perturb_(model, seed=3) == 2
    assert torch.equal(model.table, torch.arange(1.0, 5.0))
    assert not torch.equal(model.stats, torch.arange(1.0, 5.0))
    assert not torch.equal(model.weight.detach(), torch.arange(1.0, 5.0))
