import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix sum along one dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


# 4096 rows of 16384 fp32, scanned along each row: 256 MiB read, 256 MiB written.
batch_size = 4096
dim = 16384
scan_dim = 1

small_batch_size = 7
small_dim = 1001


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scan_dim]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
