import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d, softmax over channels, then two 2x2x2 max pools."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.pool1 = nn.MaxPool3d(pool_kernel_size)
        self.pool2 = nn.MaxPool3d(pool_kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = torch.softmax(x, dim=1)
        x = self.pool1(x)
        return self.pool2(x)


# 16 x 16 x 18 x 66 x 66 fp32 input (80 MiB), 3x3x3 conv to 32 channels: 29 GFLOP.
batch_size = 16
in_channels = 16
out_channels = 32
depth = 18
height = width = 66
kernel_size = 3
pool_kernel_size = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_kernel_size]


def get_small_inputs():
    return [torch.randn(2, 3, 9, 9, 11)]


def get_small_init_inputs():
    return [3, 6, 3, 2]
