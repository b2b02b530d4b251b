"""A small model that is not in KernelBench (stem conv + BN + ReLU, two identical residual blocks,
pooling, a GELU MLP head), as a KernelBench-format file's text: the region tests' model."""

TINY_MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)) + x)


class Model(nn.Module):
    def __init__(self, c, classes):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.blocks = nn.Sequential(Block(c), Block(c))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Linear(c, 12)
        self.fc2 = nn.Linear(12, classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        x = self.blocks(x)
        x = torch.flatten(self.pool(x), 1)
        return self.fc2(F.gelu(self.fc1(x)))


C = 6


def get_inputs():
    return [torch.randn(2, 3, 7, 9)]


def get_init_inputs():
    return [C, 5]
"""


def copy_kernel(region_source: str) -> str:
    """A region kernel file for tests: the region's own torch code, its output passed through a Triton
    copy kernel (a real launch, so the stitch is seen to call region kernels)."""
    body = region_source.replace("class Model(", "class ModelNew(")
    body = body.replace("        return t", "        return _copy(t", 1)
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("        return _copy("):
            lines[i] = line + ")"
    return (
        "\n".join(lines)
        + """

import triton
import triton.language as tl

CALLS = [0]


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _copy(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
    CALLS[0] += 1
    return y
"""
    )
