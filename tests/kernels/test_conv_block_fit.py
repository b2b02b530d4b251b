"""An implicit-GEMM convolution's channel tile (BLOCK_N) and each tap's K step (BLOCK_K) are fitted to the call's
channel counts at run time (runtime.conv._kw_fit_block), not clamped to their powers of two: level2/26, searched
at 32 -> 64 channels with 64 x 64 x 32 tiles, ran at 40 -> 80 with two 64-wide channel tiles (128 for 80) and two
32-wide K steps per tap (64 for 40 channels padded to 48), 2.6x the MMA work the sizes need, and 0.57x its
searched speedup. Here a conv + bias + ReLU written at 32 -> 64 channels with that config runs under the
interpreter at its traced size (the tiles it was chosen with) and at 40 -> 80 (32-wide channel tiles, 16-wide
K steps), each launch recorded and the output checked against the task's Model.

A depthwise convolution's plane tiles likewise take the width that pads the plane least (_kw_plane_w): level2/24,
searched at 112 x 112, ran its 128-column tiles on 140-wide planes (each row padded to 256)."""

from __future__ import annotations

import json
import textwrap

from kernelwright.providers.offline.families.conv.conv import (
    analyze_conv_task,
    default_conv_config,
    emit_conv_program,
)
from kernelwright.providers.offline.runtime.conv import _kw_plane_w, fit_block
from kernelwright.tasks import bundled_suite_dir
from tests.fakes.writer import LOAD_AS_MODULE, run_interpreted

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


batch_size = 2
in_channels = 32
out_channels = 64
height = width = 5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
"""

CHECK = """
program = load({program!r}, "candidate")
task = load({source!r}, "task")
launched = []
real_launch = program._kw_launch

def recording(kernel, grid, *args, **meta):
    if "BLOCK_N" in meta:
        launched.append({{"BLOCK_N": meta["BLOCK_N"], "BLOCK_K": meta["BLOCK_K"], "grid": list(grid)}})
    return real_launch(kernel, grid, *args, **meta)

program._kw_launch = recording
out = {{}}
for cin, cout in [(32, 64), (40, 80)]:
    torch.manual_seed(0)
    model = program.ModelNew(cin, cout).eval()
    reference = task.Model(cin, cout).eval()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, cin, 5, 5)
    err = (model(x) - reference(x)).abs().max().item()
    out[f"{{cin}}->{{cout}}"] = dict(launched[-1], err=err)
print(json.dumps(out))
"""


def test_the_fit_keeps_a_block_that_divides_and_pads_least_otherwise() -> None:
    for cap in (16, 32, 64, 128):
        for n in range(cap, 8 * cap + 1, cap):
            assert fit_block(n, cap, 16, 16) == cap and fit_block(n, cap, 16, 8) == cap
    assert fit_block(80, 64, 16, 16) == 32  # 3 x 32 = 96, not 2 x 64 = 128
    assert fit_block(160, 128, 16, 16) == 64  # 3 x 64 = 192, not 2 x 128 = 256
    assert fit_block(48, 32, 16, 8) == 16  # a tap's 40 channels padded to 48: 3 steps of 16, not 2 of 32
    assert fit_block(95, 128, 16, 16) == 128  # one tile beats 2 x 64 and 3 x 32 with their reloads
    assert fit_block(5, 64, 16, 16) == 16  # never below the floor, never above the size's power of two


def test_an_implicit_gemm_conv_fits_its_channel_and_k_blocks_to_the_call() -> None:
    analysis = analyze_conv_task(TASK)
    assert analysis.plan is not None, analysis.reason
    cfg = default_conv_config("implicit_gemm", analysis.plan, "strict").model_copy(
        update={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "LAYOUT": "nhwc"}
    )
    program = emit_conv_program(analysis.plan, TASK, design="implicit_gemm", config=cfg)
    assert (
        "BN = _kw_fit_block(CT0, BN, 16, 16)" in program and "BK = _kw_fit_block(CIN_P, BK, 16, 8)" in program
    )
    out = json.loads(
        run_interpreted(
            textwrap.dedent(LOAD_AS_MODULE + CHECK.format(program=program, source=TASK)), timeout=240
        )[-1]
    )
    traced, unseen = out["32->64"], out["40->80"]
    assert (traced["BLOCK_N"], traced["BLOCK_K"]) == (64, 32), out
    assert (unseen["BLOCK_N"], unseen["BLOCK_K"]) == (32, 16), out
    assert traced["err"] < 1e-4 and unseen["err"] < 1e-4, out


def test_a_plane_tile_takes_the_width_that_pads_the_plane_least() -> None:
    # (rows, columns) -> width at 2048-pixel tiles of at most 128 columns
    widths = {(83, 83): 128, (112, 112): 128, (140, 140): 64, (160, 160): 64, (512, 512): 128, (56, 56): 64,
              (7, 7): 8, (14, 14): 16}  # fmt: skip
    assert {hw: _kw_plane_w(*hw, 2048, 128) for hw in widths} == widths
    assert _kw_plane_w(140, 140, 2048, 32) == 32  # never wider than the config's BLOCK_W
    # the default depthwise program (a batch norm follows: 2048-pixel tiles of up to 128 columns) asks for it
    source = (bundled_suite_dir("level2") / "24_conv2d_depthwise_batchnorm_relu6.py").read_text()
    plan = analyze_conv_task(source).plan
    assert plan is not None
    program = emit_conv_program(plan, source, design="direct_depthwise")
    assert "BW = _kw_plane_w(R0, S0[2], 2048, 128)" in program
