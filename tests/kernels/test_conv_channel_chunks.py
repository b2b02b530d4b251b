"""A convolution whose value is reduced over channels in its own kernel (a sum, mean, max or min over dim 1)
used to hold every output channel in one tile, as wide as the channels' power of two: level2/10 (conv, sigmoid,
channel sum), written at 128 output channels and run at 160, ran 64 x 256 tiles (242 registers a thread on
sm_90) at half the speed of the same convolution without the sum. The tile now walks the channels in chunks no
wider than the traced whole-channel tile and reduces as it goes (conv_stages.channel_chunks). Each task here is
written at 5 output channels (a 16-wide tile, one chunk) and judged under the interpreter at 5, 40 (three
chunks) and 37 (three, the last partly masked), by the real harness against the task's Model."""

from __future__ import annotations

import pytest

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline.families.conv.conv import (
    analyze_conv_task,
    default_conv_config,
    emit_conv_program,
)
from kernelwright.tasks import load_task_source
from kernelwright.tasks.resize import with_sizes

CFG = EvalConfig(device="cpu", time=False, second_shape=False)

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)

    def forward(self, x):
        return {forward}


batch_size = 2
in_channels = 3
out_channels = 5
height = 7
width = 6


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
"""

FORWARDS = {
    "sigmoid_sum": "torch.sum(torch.sigmoid(self.conv(x)), dim=1)",
    "mean_then_scalars": "torch.mean(self.conv(x), dim=1, keepdim=True) * 2.0 + 0.5",
    "tanh_max": "torch.amax(torch.tanh(self.conv(x)), dim=1)",
    "min_relu": "torch.relu(torch.amin(self.conv(x), dim=1, keepdim=True))",
}


# a sum and a max in the default suite (the two combines); the mean with scalar work after it and the min the
# same paths with other ops, with the slow tests (each case ~4 s under the interpreter)
SLOW = {"mean_then_scalars", "min_relu"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in FORWARDS]
)
def test_a_channel_reduction_walks_the_channels_in_chunks_and_holds_at_wider_calls(
    name: str, pool: WorkerPool
) -> None:
    source = TASK.format(forward=FORWARDS[name])
    analysis = analyze_conv_task(source)
    assert analysis.plan is not None, analysis.reason
    cfg = default_conv_config("implicit_gemm", analysis.plan, "strict")
    program = emit_conv_program(analysis.plan, source, design="implicit_gemm", config=cfg)
    assert "for nc in range(0, CT, BLOCK_N):" in program and "min(_kw_npow2(CT0), 16)" in program
    bad = []
    for channels in (5, 40, 37):
        sized = with_sizes(source, {"out_channels": channels})
        result = pool.evaluate(load_task_source(sized, f"chunks_{name}"), program, CFG)
        if not result.correct:
            bad.append(f"{channels} channels: {result.summary()} {(result.error or '')[-400:]}")
    assert not bad, "\n".join(bad)
