import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with a tall, skinny A of shape (M, N) and a short, wide B of shape (N, M), N << M: an
    outer-product-like matmul with a short inner dimension and a large M x M output."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


# (32768 x 32) @ (32 x 32768) fp32 (the published size): 68.7 GFLOP; 4 MiB read per operand, 4 GiB
# written. With K = 32 the output's writes take about as long as the FLOPs on an H200 in fp32.
M = 32768
N = 32

small_M = 331
small_N = 5


def get_inputs():
    return [torch.randn(M, N), torch.randn(N, M)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_M, small_N), torch.randn(small_N, small_M)]
