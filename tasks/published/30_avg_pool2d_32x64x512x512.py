import torch
import torch.nn as nn


class Model(nn.Module):
    """AvgPool2d over the last two dimensions of an N x C x H x W tensor."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


# 32 x 64 x 512 x 512 fp32 (the published size): 2 GiB read, 16.5 MiB written (32 x 64 x 46 x 46); 11 x
# 11 windows at stride 11 do not overlap, and the last 6 rows and columns fall outside every window.
batch_size = 32
channels = 64
height = 512
width = 512
kernel_size = 11
stride = 11
padding = 0

small_batch_size = 2
small_channels = 3
small_height = 37
small_width = 41


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_channels, small_height, small_width)]
