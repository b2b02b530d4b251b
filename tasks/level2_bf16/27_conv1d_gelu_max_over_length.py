import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv1d (kernel 5, 'same' padding), GELU, then max over the length: one vector per sequence."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding="same")
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.gelu(self.conv(x))
        return torch.max(x, dim=2).values


# 128 x 64 x 4096 fp32 input (128 MiB), kernel 5 to 128 channels: 43 GFLOP.
batch_size = 128
in_channels = 64
out_channels = 128
length = 4096
kernel_size = 5


def _fp32_get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


def _fp32_get_small_inputs():
    return [torch.randn(2, 4, 23)]


def get_small_init_inputs():
    return [4, 6, 5]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
