import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D input."""

    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


# 4096 rows of 16384 fp32: 256 MiB read, 256 MiB written.
batch_size = 4096
dim = 16384

small_batch_size = 7
small_dim = 1001


def _fp32_get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def _fp32_get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
