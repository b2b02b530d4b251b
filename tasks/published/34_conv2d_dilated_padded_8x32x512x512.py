import torch
import torch.nn as nn


class Model(nn.Module):
    """2-D convolution with an asymmetric 5 x 9 kernel, dilated (2, 3) and padded (2, 4), 32 -> 64 channels,
    no bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride: int, padding, dilation):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            bias=False,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# 8 x 32 x 512 x 512 fp32 (the published size): 256 MiB in, 8 x 64 x 508 x 496 out; 2 x 32 x 45 flops per
# output element, about 0.37 TFLOP.
batch_size = 8
in_channels = 32
out_channels = 64
kernel_size = (5, 9)
height = 512
width = 512
stride = 1
padding = (2, 4)
dilation = (2, 3)

small_batch_size = 1
small_height = 13
small_width = 29


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, dilation]


def get_small_inputs():
    return [torch.randn(small_batch_size, in_channels, small_height, small_width)]
