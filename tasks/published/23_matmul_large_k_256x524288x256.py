import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with a very long inner dimension: A of shape (M, K), B of shape (K, N), K >> M, N."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# (256 x 524288) @ (524288 x 256) fp32 (the published size): 68.7 GFLOP, 512 MiB read per operand, a
# 256 KiB output; only 16 output tiles of 64 x 64, so a kernel must split K to fill the GPU.
M = 256
K = 524288
N = 256

small_M = 9
small_K = 4099
small_N = 7


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_M, small_K), torch.randn(small_K, small_N)]
