import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, GroupNorm, then the mean over everything but the batch: one number per sample."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = self.group_norm(x)
        return x.mean(dim=[1, 2, 3, 4])


# 32 x 16 x 16 x 64 x 64 fp32 input (128 MiB), 3x3x3 conv to 64 channels: 95 GFLOP.
batch_size = 32
in_channels = 16
out_channels = 64
depth, height, width = 16, 64, 64
kernel_size = 3
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]


def get_small_inputs():
    return [torch.randn(2, 3, 5, 6, 7)]


def get_small_init_inputs():
    return [3, 8, 3, 4]
