"""A convolution whose max pool is fused walks each pooled tile's window positions one after another; where the
pooled tiles leave SMs idle the launcher splits those positions across programs (grid axis 2) and each
program combines its pooled tile into the output by atomic max (conv_stages.window_split); here a conv2d,
softmax over channels and two 2x2 pools (16 window positions per pooled pixel). level2/21's
conv3d + softmax over channels + two 2x2x2 pools made 84 programs of 64 x 27 tap steps at an unseen size on an
H200. The program asks the device's SM count at run time, so the test runs the written program in a process of
its own under the interpreter with `_num_sms` answering 132 and every launch recorded: a small call splits its
windows and matches the reference (and the same program storing instead of combining does not), a call with
hundreds of tiles keeps one program per tile; the same for a persistent program (PERSIST=2), whose programs walk
their tiles each with its share of the positions."""

from __future__ import annotations

import json
import textwrap

import pytest

from kernelwright.providers.offline.families.conv.conv import (
    analyze_conv_task,
    default_conv_config,
    emit_conv_program,
)
from tests.fakes.writer import LOAD_AS_MODULE, run_interpreted

SOFTMAX_POOLS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3)
        self.pool1 = nn.MaxPool2d(2)
        self.pool2 = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool2(self.pool1(torch.softmax(self.conv(x), dim=1)))


def get_inputs():
    return [torch.randn(2, 3, 10, 11)]


def get_init_inputs():
    return []
"""

# the pooled value one per pixel (a minimum over channels before the pools): the one-channel store's path
CHANNEL_MIN_POOLS = SOFTMAX_POOLS.replace(
    "torch.softmax(self.conv(x), dim=1)", "torch.amin(torch.tanh(self.conv(x)), dim=1, keepdim=True)"
)

CHECK = """
program = load({program!r}, "candidate")
launched = []
real_launch = program._kw_launch

def recording(kernel, grid, *args, **meta):
    if "WSPLIT" in meta:
        launched.append({{"grid": list(grid), "WSPLIT": bool(meta["WSPLIT"])}})
    if not program.SKIP:
        return real_launch(kernel, grid, *args, **meta)

program._kw_launch = recording
torch.manual_seed(0)
model = program.ModelNew().eval()
reference = load({source!r}, "task").Model().eval()
reference.load_state_dict(model.state_dict())
program.SKIP = False
x = torch.randn(2, 3, 10, 11)
want = reference(x)
err = (model(x) - want).abs().max().item()
small = launched[-1]
# the same program storing each program's share instead of combining it: the check must see the difference
stored = load({program!r}.replace("tl.atomic_max(", "tl.store("), "stored")
wrong = stored.ModelNew().eval()
wrong.load_state_dict(model.state_dict())
wrong_err = (wrong(x) - want).abs().max().item()
program.SKIP = True
model(torch.empty(64, 3, 130, 130))
print(json.dumps({{"small": small, "large": launched[-1], "err": err, "wrong_err": wrong_err}}))
"""


@pytest.mark.parametrize(
    "source, persist",
    [(SOFTMAX_POOLS, 0), (CHANNEL_MIN_POOLS, 0), pytest.param(SOFTMAX_POOLS, 2, marks=pytest.mark.slow)],
    ids=["softmax", "channel_min", "softmax_persistent"],
)
def test_a_max_pool_over_few_tiles_splits_its_windows_and_a_large_call_does_not(
    source: str, persist: int
) -> None:
    analysis = analyze_conv_task(source)
    assert analysis.plan is not None, analysis.reason
    cfg = default_conv_config("implicit_gemm", analysis.plan, "strict").model_copy(
        update={"PERSIST": persist}
    )
    program = emit_conv_program(analysis.plan, source, design="implicit_gemm", config=cfg)
    assert "tl.atomic_max(" in program and "WSPLIT=grid[2] > 1" in program
    # a persistent program walks its tiles in a loop, each with its share of the window positions
    assert ("for pid in tl.range(tl.program_id(0)" in program) == bool(persist)
    lines = run_interpreted(
        textwrap.dedent(LOAD_AS_MODULE + CHECK.format(program=program, source=source)), timeout=240
    )
    out = json.loads(lines[-1])
    # 2 x 2 x 2 pooled pixels: one tile, its 16 window positions split 16 ways (1 x 16 < 2 x 132)
    assert out["small"]["WSPLIT"] and out["small"]["grid"][2] == 16, out
    assert out["err"] < 1e-5, out
    assert out["wrong_err"] > 1e-3, out
    # 64 x 32 x 32 pooled pixels: 512 tiles of 128 (twice the SMs and more), one program each, every window
    assert not out["large"]["WSPLIT"] and out["large"]["grid"][2] == 1, out
