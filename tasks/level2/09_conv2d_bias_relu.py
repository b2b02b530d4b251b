import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(conv2d(x) + bias): a Conv2d (with its own bias), an extra per-channel bias, then ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


# 64 x 64 x 128 x 128 fp32 input (256 MiB), 3x3 kernel to 128 channels: 150 GFLOP.
batch_size = 64
in_channels = 64
out_channels = 128
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)

small_batch_size = 3
small_in_channels = 5
small_out_channels = 7
small_height = 17
small_width = 19


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_in_channels, small_height, small_width)]


def get_small_init_inputs():
    return [small_in_channels, small_out_channels, kernel_size, (small_out_channels, 1, 1)]
