import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = gelu(layer_norm(x)) over the last dimension, with a learned scale and shift."""

    def __init__(self, normalized_dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.ln(x))


# 16384 rows of 8192 fp32: 512 MiB read, 512 MiB written.
batch_size = 16384
dim = 8192

small_batch_size = 9
small_dim = 515


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]


def get_small_init_inputs():
    return [small_dim]
