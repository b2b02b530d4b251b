import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D input."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


# 4096 rows of 393216 fp32 (the published size): 6 GiB read, 6 GiB written; a row (1.5 MiB) is far
# larger than one program's registers or shared memory.
batch_size = 4096
dim = 393216

small_batch_size = 5
small_dim = 3071


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
