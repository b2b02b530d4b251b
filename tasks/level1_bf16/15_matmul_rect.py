import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with A of shape (M, K) and B of shape (K, N)."""

    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# (8192 x 2048) @ (2048 x 8192) fp32: 275 GFLOP; a short K against a wide output.
M = 8192
K = 2048
N = 8192

small_M = 75
small_K = 93
small_N = 41


def _fp32_get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


def _fp32_get_small_inputs():
    return [torch.randn(small_M, small_K), torch.randn(small_K, small_N)]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
