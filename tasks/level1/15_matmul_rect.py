import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with A of shape (M, K) and B of shape (K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# (8192 x 2048) @ (2048 x 8192) fp32: 275 GFLOP; a short K against a wide output.
M = 8192
K = 2048
N = 8192

small_M = 75
small_K = 93
small_N = 41


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_M, small_K), torch.randn(small_K, small_N)]
