import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d (stride 2), bias add, clamp to [0, 1], scale, clamp again, divide by the scale."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple,
                 scaling_factor: float):  # fmt: skip
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=2, padding=1, output_padding=1
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_transpose(x)
        x = x + self.bias
        x = torch.clamp(x, min=0.0, max=1.0)
        x = x * self.scaling_factor
        x = torch.clamp(x, min=0.0, max=1.0)
        return x / self.scaling_factor


# 64 x 64 x 64 x 64 fp32 input (64 MiB), to 64 channels at 128 x 128 (256 MiB out): 19 GFLOP.
batch_size = 64
in_channels = 64
out_channels = 64
height = width = 64
kernel_size = 3
bias_shape = (out_channels, 1, 1)
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape, scaling_factor]


def get_small_inputs():
    return [torch.randn(2, 5, 6, 5)]


def get_small_init_inputs():
    return [5, 4, 3, (4, 1, 1), 1.5]
