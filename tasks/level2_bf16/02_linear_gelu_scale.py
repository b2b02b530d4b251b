import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = gelu(linear(x)) * scale_factor."""

    def __init__(self, in_features: int, out_features: int, scale_factor: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale_factor = scale_factor
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x)) * self.scale_factor


# (8192 x 4096) @ (4096 x 8192) fp32: 550 GFLOP; output 256 MiB.
batch_size = 8192
in_features = 4096
out_features = 8192
scale_factor = 0.5

small_batch_size = 9
small_in_features = 257
small_out_features = 135


def _fp32_get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale_factor]


def _fp32_get_small_inputs():
    return [torch.randn(small_batch_size, small_in_features)]


def get_small_init_inputs():
    return [small_in_features, small_out_features, scale_factor]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
