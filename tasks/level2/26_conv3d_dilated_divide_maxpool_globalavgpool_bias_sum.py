import torch
import torch.nn as nn


class Model(nn.Module):
    """Dilated Conv3d, divide by a constant, MaxPool3d, global average pool, bias add, sum over channels."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int, divisor: float,
                 pool_size: int, bias_shape: tuple):  # fmt: skip
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=dilation, dilation=dilation)
        self.divisor = divisor
        self.max_pool = nn.MaxPool3d(pool_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = x / self.divisor
        x = self.max_pool(x)
        x = self.global_avg_pool(x)
        x = x + self.bias
        return torch.sum(x, dim=1)


# 16 x 32 x 16 x 64 x 64 fp32 input (128 MiB), 3x3x3 (dilation 2) conv to 64 channels: 116 GFLOP.
batch_size = 16
in_channels = 32
out_channels = 64
depth, height, width = 16, 64, 64
kernel_size = 3
dilation = 2
divisor = 2.0
pool_size = 2
bias_shape = (out_channels, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, dilation, divisor, pool_size, bias_shape]


def get_small_inputs():
    return [torch.randn(2, 3, 6, 7, 9)]


def get_small_init_inputs():
    return [3, 5, 3, 2, 1.5, 2, (5, 1, 1, 1)]
