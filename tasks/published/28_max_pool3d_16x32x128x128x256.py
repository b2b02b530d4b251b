import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool3d over the last three dimensions of an N x C x D x H x W tensor (padded with -inf,
    dilated windows)."""

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


# 16 x 32 x 128 x 128 x 256 fp32 (the published size): 8 GiB read, 946 MiB written (16 x 32 x 62 x 62 x
# 126). The input has 2^31 elements: flat offsets reach the int32 limit.
batch_size = 16
channels = 32
dim1 = 128
dim2 = 128
dim3 = 256
kernel_size = 3
stride = 2
padding = 1
dilation = 3

small_batch_size = 2
small_channels = 3
small_dim1 = 9
small_dim2 = 11
small_dim3 = 19


def get_inputs():
    return [torch.randn(batch_size, channels, dim1, dim2, dim3)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_channels, small_dim1, small_dim2, small_dim3)]
