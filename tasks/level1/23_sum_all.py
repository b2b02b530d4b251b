import torch
import torch.nn as nn


class Model(nn.Module):
    """Sums every element into one scalar."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x)


# 8192 x 16384 fp32: 512 MiB read, one value written.
batch_size = 8192
dim = 16384

small_batch_size = 7
small_dim = 1001


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
