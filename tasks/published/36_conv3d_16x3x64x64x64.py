import torch
import torch.nn as nn


class Model(nn.Module):
    """3-D convolution, 3 -> 64 channels, 3 x 3 x 3 kernel, no bias: the first layer of a video network."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# 16 x 3 x 64^3 fp32 (the published size): 48 MiB in, 16 x 64 x 62^3 out (0.9 GiB); 2 x 81 flops per output
# element.
batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
depth = 64
height = 64
width = 64

small_batch_size = 2
small_depth = 5
small_height = 7
small_width = 9


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


def get_small_inputs():
    return [torch.randn(small_batch_size, in_channels, small_depth, small_height, small_width)]
