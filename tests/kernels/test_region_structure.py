"""A stitched model built with constructor arguments that change its structure: level3/25_ShuffleNetUnit's
shortcut is a convolution + BatchNorm where its channels differ and an empty nn.Sequential where they are equal.
The judge's second size made them equal; the plan of that model's trace still placed the regions cut at the
published size, one of them with nodes the trace does not have, and the add after the shortcut was never run
(KeyError: 'add' on an H100). Those regions' nodes now run as the graph's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.tasks import load_task
from kernelwright.tasks.resize import with_sizes
from tests.fakes.writer import first_programs_stitched

SOURCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.shortcut = nn.Sequential() if cin == cout else nn.Sequential(nn.Conv2d(cin, cout, 1), nn.ReLU())

    def forward(self, x):
        out = torch.relu(self.conv(x))
        out += self.shortcut(x)
        return out


cin = 4
cout = 8


def get_inputs():
    return [torch.randn(2, cin, 6, 6)]


def get_init_inputs():
    return [cin, cout]
"""


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_a_model_built_without_a_cut_region_runs_its_nodes_as_the_graph_has_them(
    tmp_path: Path, pool: WorkerPool
) -> None:
    split, kernels, refused, stitched = first_programs_stitched(SOURCE)
    assert not refused, refused
    assert any("shortcut" in " ".join(r.nodes) for r in split.regions if r.index in kernels)
    for sizes in ({}, {"cout": 4}):  # as cut, then with the shortcut empty
        path = tmp_path / f"task{len(sizes)}.py"
        path.write_text(with_sizes(SOURCE, sizes) if sizes else SOURCE)
        verdict = pool.evaluate(load_task(path), stitched, EvalConfig(device="cpu"))
        assert verdict.correct, (sizes, verdict.error)
