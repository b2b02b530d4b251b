import torch
import torch.nn as nn


class Model(nn.Module):
    """y = softmax(x) * scale + bias, softmax over the last dimension, bias a learned vector (no dropout)."""

    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1) * self.scale + self.bias


# 8192 rows of 8192 fp32: 256 MiB read, 256 MiB written.
batch_size = 8192
dim = 8192
scale = 2.0

small_batch_size = 7
small_dim = 999


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, scale]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]


def get_small_init_inputs():
    return [small_dim, scale]
