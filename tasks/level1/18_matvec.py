import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix-vector product: C = A @ B with B of shape (K, 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# A is 16384 x 16384 fp32 (1 GiB): memory-bound.
M = 16384
K = 16384

small_M = 257
small_K = 1031


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_M, small_K), torch.randn(small_K, 1)]
