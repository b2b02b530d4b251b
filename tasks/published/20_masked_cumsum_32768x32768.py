import torch
import torch.nn as nn


class Model(nn.Module):
    """Prefix sum along one dimension of only the elements where a boolean mask is True."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x * mask, dim=self.dim)


# 32768 rows of 32768 (the published size): 4 GiB of fp32 and 1 GiB of bool mask read, 4 GiB written.
batch_size = 32768
dim = 32768
scan_dim = 1

small_batch_size = 9
small_dim = 2047


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randint(0, 2, (batch_size, dim)).bool()]


def get_init_inputs():
    return [scan_dim]


def get_small_inputs():
    return [
        torch.randn(small_batch_size, small_dim),
        torch.randint(0, 2, (small_batch_size, small_dim)).bool(),
    ]
