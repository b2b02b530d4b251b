import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix multiply: C[b] = A[b] @ B[b]."""

    def __init__(self):
        super().__init__()
        self.to(torch.bfloat16)

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


# 32 x (2048 x 1024) @ (1024 x 2048) fp32: 275 GFLOP.
batch_size = 32
M = 2048
K = 1024
N = 2048

small_batch_size = 3
small_M = 37
small_K = 29
small_N = 45


def _fp32_get_inputs():
    return [torch.randn(batch_size, M, K), torch.randn(batch_size, K, N)]


def get_init_inputs():
    return []


def _fp32_get_small_inputs():
    return [
        torch.randn(small_batch_size, small_M, small_K),
        torch.randn(small_batch_size, small_K, small_N),
    ]


# The bf16 variant of this task: the model's parameters and buffers (Model.__init__ ends in
# self.to) and the floating-point inputs in torch.bfloat16; sizes as above, each such tensor half the
# bytes.
def _in_dtype(values):
    return [v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def get_inputs():
    return _in_dtype(_fp32_get_inputs())


def get_small_inputs():
    return _in_dtype(_fp32_get_small_inputs())
