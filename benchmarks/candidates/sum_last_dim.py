# kernelwright: family=reduction design=row-loop config=BLOCK=1024,num_warps=4
"""Sum over the last dim of a 2-D input, keepdim (tasks/level1/05_sum_last_dim.py)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, x_row_stride, BLOCK: tl.constexpr):
    # nonce
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or self.dim not in (1, -1):
            raise ValueError("this kernel reduces the last dim of a 2-D tensor")
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty((rows, 1), device=x.device, dtype=x.dtype)
        row_sum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=1024, num_warps=4)
        return out
