"""The convolution writer's half-precision implicit GEMM reads its packed weight through a tensor descriptor
where it can (W_TMA): run under Triton's interpreter at fp16, in a subprocess that records each launch's
W_TMA and compares with the task's Model (tests.fakes.writer.run_beside_model) (fp16: these kernels run outside the judge, where the interpreter's bf16 dot is uncorrected)."""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.providers.offline.conv import analyze_conv_task, emit_conv_program
from tests.fakes.writer import run_beside_model

CONV = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{conv}({cin}, {cout}, 3, groups={groups}{extra})
        self.to(torch.float16)

    def forward(self, x):
        return torch.relu(self.conv(x) + 0.5)

def get_inputs():
    return [torch.randn(2, {cin}, 6, 7).half()]

def get_init_inputs():
    return []
"""

CASES = {  # name: (task source, W_TMA expected on the conv stage)
    "conv16": (CONV.format(conv="Conv2d", cin=16, cout=24, groups=1, extra=""), True),
    "grouped": (CONV.format(conv="Conv2d", cin=32, cout=24, groups=2, extra=""), True),  # CIN_G 16, OC_G 12
    "transposed": (CONV.format(conv="ConvTranspose2d", cin=16, cout=8, groups=1, extra=", stride=2"), True),
    "odd_channels": (CONV.format(conv="Conv2d", cin=5, cout=7, groups=1, extra=""), False),  # CIN_G % BK
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, list]:
    """name -> the conv program's stage launches ([kernel, W_TMA]), each run checked against Model."""
    programs = {}
    for name, (source, _) in CASES.items():
        src = textwrap.dedent(source)
        code = emit_conv_program(analyze_conv_task(src, name).plan, src, design="implicit_gemm")
        assert "W_TMA" in code, name
        programs[name] = (src, code)
    return run_beside_model(tmp_path_factory.mktemp("conv_tma"), programs, kernels="_kw_stage")


@pytest.mark.parametrize("name", list(CASES))
def test_the_weight_is_read_through_a_descriptor_where_the_channels_allow(runs, name):
    assert runs[name][0][1] is CASES[name][1], runs[name]
