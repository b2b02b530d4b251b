import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix product along one dimension."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=self.dim)


# 32768 rows of 32768 fp32 (the published size), scanned along each row: 4 GiB read, 4 GiB written.
# Inputs are uniform in [0, 1), as published: the products shrink towards zero and never overflow.
batch_size = 32768
dim = 32768
scan_dim = 1

small_batch_size = 9
small_dim = 2047


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [scan_dim]


def get_small_inputs():
    return [torch.rand(small_batch_size, small_dim)]
