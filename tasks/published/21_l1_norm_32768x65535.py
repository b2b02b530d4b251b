import torch
import torch.nn as nn


class Model(nn.Module):
    """L1 normalization of each row: x / sum(|x|) over dim 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


# 32768 rows of 65535 fp32 (the published size): 8 GiB read, 8 GiB written; the odd row length leaves
# rows unaligned to 16 bytes.
batch_size = 32768
dim = 65535

small_batch_size = 7
small_dim = 4093


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]
