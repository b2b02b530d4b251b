import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool2d over the last two dimensions of an N x C x H x W tensor (padded with -inf)."""

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


# 32 x 64 x 512 x 512 fp32 (the published size): 2 GiB read, 2 GiB written (32 x 64 x 511 x 511); 4 x 4
# windows at stride 1 overlap, so each input is read by up to 16 outputs.
batch_size = 32
channels = 64
height = 512
width = 512
kernel_size = 4
stride = 1
padding = 1
dilation = 1

small_batch_size = 2
small_channels = 3
small_height = 37
small_width = 41


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_channels, small_height, small_width)]
