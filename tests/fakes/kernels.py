"""Small candidate kernels for tests: correct, wrong, broken, for the bundled ReLU task (01_relu)."""

from __future__ import annotations

_RELU = """# kernelwright: family=pointwise design={design} config=BLOCK={block},num_warps={warps}
import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    {body}
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        relu_kernel[grid](x, out, n, BLOCK={block}, num_warps={warps})
        return out
"""


def relu_kernel(design: str = "flat", block: int = 1024, warps: int = 4) -> str:
    """A correct ReLU kernel; design/block/warps only change the metadata line and launch."""
    return _RELU.format(design=design, block=block, warps=warps, body="y = tl.maximum(x, 0.0)")


def relu_wrong(design: str = "flat-wrong") -> str:
    """Runs, but computes the wrong values (leaky where it should clamp)."""
    return _RELU.format(design=design, block=1024, warps=4, body="y = tl.where(x > 0, x, 0.5 * x)")


def relu_compile_error(design: str = "flat-broken") -> str:
    """Fails to compile: calls a function triton.language does not have."""
    return _RELU.format(design=design, block=1024, warps=4, body="y = tl.no_such_function(x)")
