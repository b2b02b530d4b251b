import torch
import torch.nn as nn


class Model(nn.Module):
    """MaxPool1d over the last dimension of an N x C x L tensor (padded with -inf, dilated windows)."""

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


# 64 x 192 x 65536 fp32 (the published size): 3 GiB read, 3 GiB written (64 x 192 x 65523); a window of
# 8 taps 3 apart, stride 1, so neighbouring outputs share most of their inputs.
batch_size = 64
features = 192
sequence_length = 65536
kernel_size = 8
stride = 1
padding = 4
dilation = 3

small_batch_size = 2
small_features = 3
small_sequence_length = 1001


def get_inputs():
    return [torch.randn(batch_size, features, sequence_length)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]


def get_small_inputs():
    return [torch.randn(small_batch_size, small_features, small_sequence_length)]
