"""Depthwise plane tiles (1-D, 2-D, 3-D) read their taps as words of two columns (WORDS: 32-bit for fp16/bf16,
64-bit for fp32) where the launch allows: stride 1 along the width, an even input width, rows aligned to the
word; elsewhere the element loads. Each program runs under Triton's interpreter beside the task's Model in one subprocess that records
the conv stage's WORDS keyword (tests.fakes.writer.run_beside_model), and the judge rejects a program whose
word halves are swapped."""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.hardware import EvalConfig
from kernelwright.providers.offline.families.conv.conv import (
    analyze_conv_task,
    default_conv_config,
    emit_conv_program,
)
from kernelwright.tasks import load_task_source
from tests.fakes.writer import run_beside_model

TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{conv}({c}, {c}, {k}, groups={c}{extra})
        self.bn = nn.{norm}({c})
        nn.init.normal_(self.bn.weight)
        nn.init.normal_(self.bn.bias)
        self.to(torch.{dtype})

    def forward(self, x):
        return torch.nn.functional.relu6(self.bn(self.conv(x)))

def get_inputs():
    return [torch.randn({shape}).to(torch.{dtype})]

def get_init_inputs():
    return []
"""

# name: (task fields, config changes over the writer's default, WORDS expected on the conv stage's launch).
# Under the interpreter a run costs about its planes (samples x channels): the cases whose point is a tile's
# columns or rows take one sample; the batch offset, which the word and element loads share, is read by the
# first case and by the fp16 ones (two samples of two channels each: at 2 x 3 and 3 x 4 they took 4.1 s, 2.4 s
# so).
CASES = {
    # 3x3, padding 1 (odd: each output pair reads words j-1, j, j+1), interior tiles unmasked and edge tiles masked
    "bf16_3x3_interior": (
        dict(c=2, k=3, extra=", padding=1", shape="2, 2, 9, 24", dtype="bfloat16"),
        {"BLOCK_W": 8, "BLOCK_M": 32, "INTERIOR": True},
        True,
    ),
    # 3x5 taps, width dilation 2 and padding 3 (odd), fp16 halves through the int16 path, no interior tiles
    "fp16_3x5_dilated": (
        dict(
            c=2, k="(3, 5)", extra=", padding=(1, 3), dilation=(1, 2)", shape="2, 2, 7, 18", dtype="float16"
        ),
        {"BLOCK_W": 16, "BLOCK_M": 32, "INTERIOR": False},
        True,
    ),
    # even padding (2): every output pair reads whole words, halves in the other order
    "bf16_5x5_even_padding": (
        dict(c=2, k=5, extra=", padding=2", shape="1, 2, 6, 20", dtype="bfloat16"),
        {"BLOCK_W": 8, "BLOCK_M": 16, "INTERIOR": True},
        True,
    ),
    # fp32: two columns to a 64-bit word; 3x3, padding 1, interior and edge tiles
    "fp32_3x3_interior": (
        dict(c=3, k=3, extra=", padding=1", shape="1, 3, 9, 24", dtype="float32"),
        {"BLOCK_W": 8, "BLOCK_M": 32, "INTERIOR": True},
        True,
    ),
    # an odd width: a word would straddle two rows; element loads
    "bf16_odd_width": (
        dict(c=3, k=3, extra=", padding=1", shape="1, 3, 9, 21", dtype="bfloat16"),
        {"BLOCK_W": 8, "BLOCK_M": 32},
        False,
    ),
    # stride 2 along the width: the output pair's taps are not one word apart; element loads
    "bf16_width_stride2": (
        dict(c=3, k=3, extra=", padding=1, stride=(1, 2)", shape="1, 3, 9, 24", dtype="bfloat16"),
        {"BLOCK_W": 8, "BLOCK_M": 32},
        False,
    ),
    # a 3-D plane's rows flatten depth and height; a 1-D one is a single row (the 3-D case has two channels
    # and one sample: under the interpreter each plane costs ~1 s)
    "bf16_3d": (
        dict(
            conv="Conv3d",
            norm="BatchNorm3d",
            c=2,
            k=3,
            extra=", padding=1",
            shape="1, 2, 4, 5, 24",
            dtype="bfloat16",
        ),  # fmt: skip
        {"BLOCK_W": 8, "BLOCK_M": 32, "INTERIOR": True},
        True,
    ),
    "fp16_1d": (
        dict(
            conv="Conv1d",
            norm="BatchNorm1d",
            c=2,
            k=5,
            extra=", padding=2",
            shape="2, 2, 50",
            dtype="float16",
        ),
        {"BLOCK_W": 16, "BLOCK_M": 16, "INTERIOR": True},
        True,
    ),
}


def _case(name: str) -> tuple[str, str]:
    fields, change, _ = CASES[name]
    src = textwrap.dedent(TASK.format(**{"conv": "Conv2d", "norm": "BatchNorm2d", **fields}))
    plan = analyze_conv_task(src, name).plan
    assert plan is not None
    config = default_conv_config("direct_depthwise", plan).model_copy(update={"LAYOUT": "nchw", **change})
    assert config.WORDS and config.BLOCK_W
    return src, emit_conv_program(plan, src, design="direct_depthwise", config=config)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, list]:
    """name -> the program's stage launches ([kernel, WORDS, ONE_DEPTH]), each run checked against Model."""
    programs = {name: _case(name) for name in CASES}
    return run_beside_model(
        tmp_path_factory.mktemp("conv_words"), programs, "_kw_stage", keywords=("WORDS", "ONE_DEPTH")
    )


@pytest.mark.parametrize("name", list(CASES))
def test_half_taps_are_read_as_words_where_the_launch_allows(runs, name):
    conv_stage = runs[name][0]
    assert conv_stage[0] == "_kw_stage0" and conv_stage[1] is CASES[name][2], runs[name]


@pytest.mark.parametrize("name", list(CASES))
def test_planes_of_one_depth_skip_the_row_division(runs, name):
    """A 1-D or 2-D plane's rows are heights (ONE_DEPTH); a 3-D plane's rows flatten depth and height. The
    outputs are checked in the fixture, so a 3-D plane launched with ONE_DEPTH would fail there too."""
    plane_stages = [launch for launch in runs[name] if launch[2] is not None]
    assert plane_stages and all(launch[2] is ("3d" not in name) for launch in plane_stages), runs[name]


SWAPS = {  # name: (the low half's line, the high half's line), as the program writes them
    "bf16_3x3_interior": ("xlo = (xw << 16)", "xhi = (xw & -65536)"),
    "fp32_3x3_interior": ("xlo = xw.to(tl.int32)", "xhi = (xw >> 32).to(tl.int32)"),
}


@pytest.mark.parametrize(
    "name", [n if n.startswith("bf16") else pytest.param(n, marks=pytest.mark.slow) for n in SWAPS]
)  # fp32's 64-bit words with the slow tests: its values are checked in the run above, this is the meta-check
def test_swapped_halves_are_caught(pool, name):
    """The check can fail: the same program with each word's halves swapped is rejected by the judge."""
    src, code = _case(name)
    lo, hi = SWAPS[name]
    swapped = (
        code.replace(lo, "SWAP")
        .replace(hi, lo.replace("xlo", "xhi"))
        .replace("SWAP", hi.replace("xhi", "xlo"))
    )
    assert swapped != code and swapped.count(hi.replace("xhi", "xlo")) == 2  # interior and edge tiles
    config = EvalConfig(device="cpu", time=False, compile_baseline=False, second_shape=False)
    # (the unswapped program matches the Model in test_half_taps_are_read_as_words_where_the_launch_allows)
    bad = pool.evaluate(load_task_source(src, f"words_swapped_{name}"), swapped, config)
    assert not bad.correct and bad.error_kind == "mismatch", bad.error
