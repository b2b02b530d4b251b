import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B at irregular sizes: A of shape (M, K), B of shape (K, N), none a multiple of 16."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# (8205 x 2949) @ (2949 x 5921) fp32 (the published size): 286.5 GFLOP; 97 MB and 70 MB read, 194 MB
# written. Every dim leaves a partial tile and rows are not 16-byte aligned.
M = 8205
K = 2949
N = 5921

small_M = 83
small_K = 29
small_N = 59


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_M, small_K), torch.randn(small_K, small_N)]
