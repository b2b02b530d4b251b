import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A.T @ B, with A stored as (K, M) and B as (K, N)."""

    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


# (8192 x 4096) @ (4096 x 4096) fp32 with A read transposed: 275 GFLOP.
M = 8192
K = 4096
N = 4096

small_M = 71
small_K = 53
small_N = 39


def _fp32_get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]


def get_init_inputs():
    return []


def _fp32_get_small_inputs():
    return [torch.randn(small_K, small_M), torch.randn(small_K, small_N)]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
