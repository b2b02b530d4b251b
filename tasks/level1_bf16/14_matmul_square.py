import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for square matrices."""

    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# 8192^3 fp32: 1.1 TFLOP.
N = 8192

small_N = 67


def _fp32_get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []


def _fp32_get_small_inputs():
    return [torch.randn(small_N, small_N), torch.randn(small_N, small_N)]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
