import torch
import torch.nn as nn


class Model(nn.Module):
    """1-D convolution, 64 -> 128 channels, kernel 3, stride 3, dilation 4, no bias, over a long signal."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, stride=stride, dilation=dilation, bias=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# 64 x 64 x 524280 fp32 (the published size): 8 GiB in, 64 x 128 x 174758 out (5.3 GiB); 2 x 64 x 3 flops
# per output element.
batch_size = 64
in_channels = 64
out_channels = 128
kernel_size = 3
length = 524280
stride = 3
dilation = 4

small_batch_size = 2
small_length = 301


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, dilation]


def get_small_inputs():
    return [torch.randn(small_batch_size, in_channels, small_length)]
