import torch
import torch.nn as nn


class Model(nn.Module):
    """Reverse (suffix) inclusive sum along one dimension: out[i] = sum of x[j] for j >= i."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


# 32768 rows of 32768 fp32 (the published size), scanned along each row from the end: 4 GiB read,
# 4 GiB written by one backwards scan (the reference also copies the tensor for each flip).
batch_size = 32768
dim = 32768
scan_dim = 1

small_batch_size = 9
small_dim = 2047


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scan_dim]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
