import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Applies SiLU (x * sigmoid(x)) elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


# 4096 x 393216 fp32 (the published size): 6 GiB read, 6 GiB written.
batch_size = 4096
dim = 393216

small_batch_size = 7
small_dim = 2309


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
