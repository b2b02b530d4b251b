import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm2d in training mode: normalizes each channel with the batch's statistics over (N, H, W),
    applies the learned scale and shift, and updates the running mean and variance."""

    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


# 64 x 64 x 512 x 512 fp32 (the published size): 4 GiB read, 4 GiB written; the statistics reduce 64
# channels of 16M elements each, strided across the batch.
batch_size = 64
features = 64
dim1 = 512
dim2 = 512

small_batch_size = 3
small_features = 5
small_dim1 = 17
small_dim2 = 19


def get_inputs():
    return [torch.randn(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_features, small_dim1, small_dim2)]


def get_small_init_inputs():
    return [small_features]
