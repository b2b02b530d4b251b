"""The convolution writer's half-precision implicit GEMM reads its packed weight through a tensor descriptor
where it can (W_TMA), and with X_TMA its input boxes too: run under Triton's interpreter at fp16, in a
subprocess that records each launch's W_TMA and X_TMA and compares with the task's Model
(tests.fakes.writer.run_beside_model) (fp16: these kernels run outside the judge, where the interpreter's bf16
dot is uncorrected)."""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.providers.offline.families.conv.conv import (
    analyze_conv_task,
    default_conv_config,
    emit_conv_program,
)
from tests.fakes.writer import run_beside_model

CONV = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{conv}({cin}, {cout}, 3, groups={groups}{extra})
{norm}        self.to(torch.float16)

    def forward(self, x):
        y = torch.relu(self.conv(x) + 0.5)
{after}        return y

def get_inputs():
    return [torch.randn({shape}).half()]

def get_init_inputs():
    return []
"""


def task(
    conv="Conv2d", cin=16, cout=24, groups=1, extra="", norm="", after="", shape="2, {cin}, 6, 7"
) -> str:
    return CONV.format(conv=conv, cin=cin, cout=cout, groups=groups, extra=extra, norm=norm, after=after,
                       shape=shape.format(cin=cin))  # fmt: skip


# name: (task source, config changes over the writer's default, [W_TMA, X_TMA] expected on the conv stage).
# A 2-D fp16 convolution's default reads boxes of output rows through X_TMA, two programs per SM.
CASES = {
    "conv16": (task(), {}, [True, True]),
    "grouped": (task(cin=32, groups=2), {}, [True, True]),  # CIN_G 16, OC_G 12: the box starts at g * 16
    "transposed": (task(conv="ConvTranspose2d", cout=8, extra=", stride=2"), {}, [True, None]),  # no boxes
    # CIN_G 5, padded with zeros to 16 at run time in the channels-last copy and the packed weight: descriptors
    "odd_channels": (task(cin=5, cout=7), {}, [True, True]),
    # zero fill as padding, dilated taps, boxes 8 wide over 11 columns (partial boxes masked)
    "padded_dilated": (task(extra=", padding=2, dilation=2", shape="2, {cin}, 9, 11"), {}, [True, True]),
    "strided": (task(extra=", stride=2", shape="2, {cin}, 9, 11"), {}, [True, False]),  # pointer boxes
    # a channels-last input goes to the descriptor as it is (no copy), its unit channel stride and all
    "channels_last": (
        task(extra=", padding=1").replace(
            ".half()]", ".half().contiguous(memory_format=torch.channels_last)]"
        ),
        {},
        [True, True],
    ),
    # boxes feeding a group norm's statistics (per-sample tiles), one program per tile
    "group_norm": (
        task(norm="        self.gn = nn.GroupNorm(4, 24)\n", after="        y = self.gn(y)\n"),
        {"PERSIST": 0},
        [True, True],
    ),  # fmt: skip
    # a 3-D convolution takes boxes by a small step; depth slices of 16-pixel boxes, several per program
    "conv3d": (
        task(conv="Conv3d", extra=", padding=1", shape="2, {cin}, 3, 4, 5"),
        {"X_TMA": True, "PERSIST": 2, "BLOCK_M": 16},
        [True, True],
    ),  # fmt: skip
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, list]:
    """name -> the conv program's stage launches ([kernel, W_TMA, X_TMA]), each run checked against Model."""
    programs = {}
    for name, (source, change, _) in CASES.items():
        src = textwrap.dedent(source)
        plan = analyze_conv_task(src, name).plan
        config = default_conv_config("implicit_gemm", plan).model_copy(update=change)
        code = emit_conv_program(plan, src, design="implicit_gemm", config=config)
        assert "W_TMA" in code, name
        programs[name] = (src, code)
    return run_beside_model(tmp_path_factory.mktemp("conv_tma"), programs, kernels="_kw_stage")


@pytest.mark.parametrize("name", list(CASES))
def test_weight_and_input_are_read_through_descriptors_where_the_launch_allows(runs, name):
    assert runs[name][0][1:] == CASES[name][2], runs[name]
