import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 3-D convolution (48 -> 48 channels, 3 x 3 x 3 kernel, stride 1, no bias)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose(x)


# 8 x 48 x 64^3 fp32 (the published size): 384 MiB in, 8 x 48 x 66^3 out; 2 x 48 x 27 flops per input
# element, about 0.26 TFLOP.
batch_size = 8
in_channels = 48
out_channels = 48
kernel_size = 3
depth = 64
height = 64
width = 64

small_batch_size = 1
small_depth = 5
small_height = 6
small_width = 7


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


def get_small_inputs():
    # the constructor's channels hold: only the spatial size and batch shrink
    return [torch.randn(small_batch_size, in_channels, small_depth, small_height, small_width)]
