import torch
import torch.nn as nn


class Model(nn.Module):
    """Takes the minimum over one dimension (values only)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.min(x, dim=self.dim)[0]


# 128 x 4096 x 4095 fp32 (the published size, 8 GiB) reduced over the middle dim to batch_size x dim2.
# The last dim, 4095, is odd: rows are not 16-byte aligned.
batch_size = 128
dim1 = 4096
dim2 = 4095
reduce_dim = 1

small_batch_size = 5
small_dim1 = 129
small_dim2 = 67


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim1, small_dim2)]
