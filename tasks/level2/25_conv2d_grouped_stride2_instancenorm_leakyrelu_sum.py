import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped Conv2d with stride 2, InstanceNorm2d, LeakyReLU, then sum over channels: one map per image."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int, negative_slope: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=2, padding=1, groups=groups)
        self.norm = nn.InstanceNorm2d(out_channels)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = self.norm(x)
        x = torch.nn.functional.leaky_relu(x, negative_slope=self.negative_slope)
        return torch.sum(x, dim=1)


# 64 x 128 x 128 x 128 fp32 input (512 MiB), 4 groups of 32 -> 64 channels: 39 GFLOP.
batch_size = 64
in_channels = 128
out_channels = 256
height = width = 128
kernel_size = 3
groups = 4
negative_slope = 0.2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups, negative_slope]


def get_small_inputs():
    return [torch.randn(2, 8, 11, 9)]


def get_small_init_inputs():
    return [8, 12, 3, 4, 0.1]
