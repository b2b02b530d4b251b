import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose3d (stride 2), MaxPool3d, softmax over channels, subtract a per-channel parameter,
    Swish, then max over channels."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int,
        output_padding: int, pool_kernel_size: int, pool_stride: int, pool_padding: int,
    ):  # fmt: skip
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.max_pool = nn.MaxPool3d(kernel_size=pool_kernel_size, stride=pool_stride, padding=pool_padding)
        self.subtract = nn.Parameter(torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_transpose(x)
        x = self.max_pool(x)
        x = torch.softmax(x, dim=1)
        x = x - self.subtract.view(1, -1, 1, 1, 1)
        x = torch.sigmoid(x) * x
        return torch.max(x, dim=1)[0]


# 16 x 32 x 16 x 32 x 32 fp32 input (32 MiB), to 32 channels at 32 x 64 x 64: 14 GFLOP.
batch_size = 16
in_channels = 32
out_channels = 32
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
pool_kernel_size = 2
pool_stride = 2
pool_padding = 0


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size,
            pool_stride, pool_padding]  # fmt: skip


def get_small_inputs():
    return [torch.randn(2, 3, 3, 4, 5)]


def get_small_init_inputs():
    return [3, 5, 3, 2, 1, 1, 2, 2, 0]
