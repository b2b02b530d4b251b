import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalization over the last dimension, with a learned scale (eps 1e-6)."""

    def __init__(self, normalized_dim: int):
        super().__init__()
        self.norm = nn.RMSNorm(normalized_dim, eps=1e-6)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


# 8192 rows of 8192 fp32: 256 MiB read, 256 MiB written; weight 32 KiB.
batch_size = 8192
dim = 8192

small_batch_size = 7
small_dim = 999


def _fp32_get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]


def _fp32_get_small_inputs():
    return [torch.randn(small_batch_size, small_dim)]


def get_small_init_inputs():
    return [small_dim]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
