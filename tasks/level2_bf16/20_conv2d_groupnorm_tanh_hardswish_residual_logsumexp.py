import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d, GroupNorm, Tanh, HardSwish, a residual add of the convolution's output, then logsumexp over
    channels (keepdim): y = logsumexp(conv(x) + hardswish(tanh(gn(conv(x)))), dim=1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int, eps: float = 1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_conv = self.conv(x)
        x_norm = self.group_norm(x_conv)
        x_tanh = self.tanh(x_norm)
        x_hard_swish = self.hard_swish(x_tanh)
        x_res = x_conv + x_hard_swish
        return torch.logsumexp(x_res, dim=1, keepdim=True)


# 32 x 64 x 96 x 96 fp32 input (75 MiB), 3x3 conv to 128 channels: 43 GFLOP.
batch_size = 32
in_channels = 64
out_channels = 128
height = width = 96
kernel_size = 3
groups = 8


def _fp32_get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]


def _fp32_get_small_inputs():
    return [torch.randn(2, 5, 9, 11)]


def get_small_init_inputs():
    return [5, 8, 3, 4]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
