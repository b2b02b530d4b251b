import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_rows(x_ptr, t_ptr, y_ptr, n, width, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    t = tl.load(t_ptr + offs % width, mask=mask)
    tl.store(y_ptr + offs, x * t, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.register_buffer("table", torch.linspace(0.5, 1.5, width).cos(), persistent=False)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        h = self.proj(x).contiguous()
        out = torch.empty_like(h)
        n = h.numel()
        _scale_rows[(triton.cdiv(n, 256),)](h, self.table, out, n, h.shape[-1], BLOCK=256)
        return out
