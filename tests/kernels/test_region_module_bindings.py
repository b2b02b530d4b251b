"""A stitched model run at a size other than the one its regions were cut at: a region's kernel reads its
modules' attributes (a depthwise convolution's groups, a BatchNorm's features) from the model's own modules,
not from the constructor the region was written with. level3/25_ShuffleNetUnit's depthwise convolution + BatchNorm
kernel, cut at the published 120 channels and judged at 15, read groups=120: wrong output and running
statistics."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline import write_program
from kernelwright.tasks import exec_task_module, load_task
from kernelwright.tasks.region_stitch import stitched_source
from kernelwright.tasks.regions import split_model
from kernelwright.tasks.resize import with_sizes
from tests.fakes.writer import writer_prompt

SOURCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.bn(self.conv(x))


batch_size = 2
channels = 8
height = 6


def get_inputs():
    return [torch.randn(batch_size, channels, height, height)]


def get_init_inputs():
    return [channels]
"""


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stitched file is built in this process (its kernels are only run by the judge)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_a_kernel_cut_at_one_size_reads_the_models_modules_at_another(
    tmp_path: Path, pool: WorkerPool
) -> None:
    task = exec_task_module(SOURCE, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    assert [r.ops for r in split.regions] == [["Conv2d", "BatchNorm2d"]]
    region = split.regions[0]
    assert region.bindings["m0"] == "conv" and region.bindings["m1"] == "bn"
    answer = write_program(writer_prompt(region.source))
    assert answer.code is not None, answer.explanation
    assert "groups" in answer.code  # the program reads the convolution's groups from its module
    stitched = stitched_source(SOURCE, split.leaves, [region.plan()], {0: (region.signature, answer.code)})

    other = with_sizes(SOURCE, {"channels": 4, "height": 5})  # judged where it was not cut
    small = exec_task_module(other, "small")
    candidate = types.ModuleType("stitched")
    candidate.__dict__.update(small.__dict__)
    exec(compile(stitched, "<stitched>", "exec"), candidate.__dict__)
    new = candidate.ModelNew(*small.get_init_inputs())
    kernel = new.__dict__["_kw_kernels"][0]
    assert kernel.m0 is new.conv and kernel.m1 is new.bn  # the model's own modules, not copies
    path = tmp_path / "small.py"
    path.write_text(other)
    verdict = pool.evaluate(load_task(path), stitched, EvalConfig(device="cpu"))
    assert verdict.correct, verdict.error
