import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2-D convolution (one 3 x 3 filter per channel, no bias) of an N x C x H x W tensor."""

    def __init__(self, in_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels,
            in_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            groups=in_channels,
            bias=False,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# 16 x 64 x 512 x 512 fp32 (the published size): 1 GiB in, 1 GiB out; 9 multiply-adds per output.
batch_size = 16
in_channels = 64
height = 512
width = 512
kernel_size = 3
stride = 1
padding = 0

small_batch_size = 2
small_height = 19
small_width = 23


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, kernel_size, stride, padding]


def get_small_inputs():
    return [torch.randn(small_batch_size, in_channels, small_height, small_width)]
