import torch
import torch.nn as nn


class Model(nn.Module):
    """Applies tanh elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


# 4096 x 16384 fp32: 256 MiB read, 256 MiB written.
batch_size = 4096
dim = 16384

small_batch_size = 5
small_dim = 1237


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
