"""Test task: BatchNorm after an offset that float32 cannot carry exactly, then ReLU.

(x + 65536) - 65536 rounds x to multiples of 2^-8 in float32 and is exact in float64, so the float32
reference's running statistics carry ~1e-4 of rounding, beyond strict's row, as a deep network's carry
the rounding of every layer before them.
"""

import torch
import torch.nn as nn

OFFSET = 65536.0


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, momentum=0.5)

    def forward(self, x):
        return torch.relu(self.bn((x + OFFSET) - OFFSET))


channels = 8


def get_inputs():
    return [torch.randn(2, channels, 5, 7)]


def get_init_inputs():
    return [channels]
