import torch
import torch.nn as nn


class Model(nn.Module):
    """Returns the index of the minimum over one dimension (int64)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=self.dim)


# 4096 x 16384 fp32 (256 MiB) reduced over the last dim to batch_size indices.
batch_size = 4096
dim = 16384
reduce_dim = 1

small_batch_size = 7
small_dim = 1001


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [reduce_dim]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
