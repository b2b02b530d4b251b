"""An implicit-GEMM convolution's tiles shrink where its call would leave SMs idle (conv_host._fill_sms): on an
H100 ResNet18's late convolutions at batch 2 were 4-16 tiles of 128 x 128 on 132 SMs. The program asks the
device's SM count at run time, so the test runs the written program in a process of its own under the
interpreter with `_num_sms` answering 132 and every launch recorded: a small call gets 32-pixel tiles and the
right numbers, a call with thousands of tiles keeps the tile it was written with."""

from __future__ import annotations

import json
import textwrap

from kernelwright.providers.offline.families.conv.conv import (
    analyze_conv_task,
    default_conv_config,
    emit_conv_program,
)
from tests.fakes.writer import run_interpreted

SOURCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 64, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 16, 8, 8)]


def get_init_inputs():
    return []
"""

CHECK = """
import json, sys, types
import torch
program = types.ModuleType("candidate")
program.__dict__["__file__"] = "candidate.py"
exec(compile({program!r}, "candidate.py", "exec"), program.__dict__)
program._num_sms = lambda device: 132
launched = []
real_launch = program._kw_launch

def recording(kernel, grid, *args, **meta):
    launched.append({{k: v for k, v in meta.items() if k.startswith("BLOCK_")}} | {{"grid": list(grid)}})
    if not program.SKIP:
        return real_launch(kernel, grid, *args, **meta)

program._kw_launch = recording
torch.manual_seed(0)
model = program.ModelNew().eval()
ref = torch.nn.Conv2d(16, 64, 3, padding=1)
ref.load_state_dict(model.conv.state_dict())
program.SKIP = False
x = torch.randn(2, 16, 8, 8)
err = (model(x) - torch.relu(ref(x))).abs().max().item()
small = launched[-1]
program.SKIP = True
model(torch.empty(64, 16, 64, 64))
print(json.dumps({{"small": small, "large": launched[-1], "err": err}}))
"""


def test_small_calls_fill_the_sms_and_large_calls_keep_their_tile() -> None:
    analysis = analyze_conv_task(SOURCE)
    assert analysis.plan is not None, analysis.reason
    cfg = default_conv_config("implicit_gemm", analysis.plan, "strict")
    program = emit_conv_program(analysis.plan, SOURCE, design="implicit_gemm", config=cfg)
    assert "_num_sms(x5.device)" in program
    lines = run_interpreted(textwrap.dedent(CHECK.format(program=program)), timeout=240)
    out = json.loads(lines[-1])
    # 128 pixels x 64 channels: two tiles as written (64 x 64), four of 32 x 64 (still under 132: at the floors)
    assert (out["small"]["BLOCK_M"], out["small"]["BLOCK_N"]) == (32, 64), out
    assert out["small"]["grid"][0] == 4, out
    assert out["err"] < 1e-4, out
    # 262,144 pixels: thousands of tiles of the written size
    assert (out["large"]["BLOCK_M"], out["large"]["BLOCK_N"]) == (cfg.BLOCK_M, cfg.BLOCK_N), out
