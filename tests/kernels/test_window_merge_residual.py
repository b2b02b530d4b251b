"""SwinV2's window merge and residual, as its region reads them (level3/30 at small sizes): the writer's program
adds the residual inside its LayerNorm kernel and is judged correct at two shapes.

The windows are merged back to a square image (`view(B, nw * wh, nw * wh, -1)`) and viewed as the residual's
shape. While the writer's trace checked a contiguous tensor's view by its element counts alone
(frontend/dense_clone.py), the -1 was a floor division of the input's sizes and the residual's last size was
solved as one: the LayerNorm's result and the residual had two shapes, and the residual add ran as a kernel of
its own (SwinV2's stitched model: 7 more launches a forward, 6.7 -> 8.6 ms on an H100). The view's sizes are now
equated group by group, as torch's own walk does."""

from __future__ import annotations

import re

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline import write_program
from kernelwright.tasks import load_task_source
from tests.fakes.writer import check_programs, writer_prompt

WINDOW_MERGE_RESIDUAL = """
import torch
import torch.nn as nn

size_8 = 8
size_16 = 16


class Model(nn.Module):
    def __init__(self, size_8, size_16):
        super().__init__()
        self.norm = nn.LayerNorm((size_8,))
        self.fc = nn.Linear(in_features=size_8, out_features=size_16)

    def forward(self, x0, x1):
        t0 = x0.permute(0, 1, 3, 2, 4, 5).contiguous()
        t1 = t0.view(x0.shape[0], x0.shape[2] * x0.shape[3], x0.shape[2] * x0.shape[3], -1)
        t2 = torch.roll(t1, shifts=(1, 1), dims=(1, 2))
        t3 = x1 + self.norm(t2.view(x1.shape[0], x1.shape[1], x1.shape[2]))
        return (t3, torch.nn.functional.gelu(self.fc(t3)))


def get_inputs():
    return [torch.randn([2, 2, 2, 3, 3, size_8]), torch.randn([2, 36, size_8])]


def get_init_inputs():
    return [size_8, size_16]
"""


def test_the_residual_add_is_in_the_norm_kernel_and_the_program_is_correct(pool: WorkerPool) -> None:
    answer = write_program(writer_prompt(WINDOW_MERGE_RESIDUAL))
    assert answer.code is not None, answer.explanation
    forward = answer.code[answer.code.index("class ModelNew") :]
    launched = re.findall(r"_launch_(k\d+_\w+)\(", forward)
    assert len(launched) == 2 and "norm" in launched[0] and "matmul" in launched[1], launched
    cfg = EvalConfig(device="cpu", time=False, timeout=300, trials=3, second_shape=True)
    check_programs(pool, [("merge", load_task_source(WINDOW_MERGE_RESIDUAL, "merge"), answer.code)], cfg)
