import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 3x3 Conv2d (groups = channels, no bias), BatchNorm2d in training mode, ReLU6: a MobileNet
    block's first half."""

    def __init__(self, channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.depthwise = nn.Conv2d(
            channels, channels, kernel_size, stride=stride, padding=kernel_size // 2, groups=channels, bias=False
        )
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.ReLU6()
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.depthwise(x)))


# 32 x 128 x 112 x 112 fp32 input (196 MiB) and output: memory-bound.
batch_size = 32
channels = 128
height = width = 112
kernel_size = 3
stride = 1


def _fp32_get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size, stride]


def _fp32_get_small_inputs():
    return [torch.randn(2, 6, 9, 11)]


def get_small_init_inputs():
    return [6, 3, 1]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
