import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose2d (stride 2), global average pool, bias add, logsumexp over channels, sum, multiply."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=2, padding=1, output_padding=1
        )
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_transpose(x)
        x = torch.mean(x, dim=(2, 3), keepdim=True)
        x = x + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)
        x = torch.sum(x, dim=(2, 3))
        return x * 10.0


# 64 x 64 x 64 x 64 fp32 input (64 MiB), to 128 channels at 128 x 128: 39 GFLOP.
batch_size = 64
in_channels = 64
out_channels = 128
height = width = 64
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]


def get_small_inputs():
    return [torch.randn(2, 5, 5, 7)]


def get_small_init_inputs():
    return [5, 6, 3, (6, 1, 1)]
