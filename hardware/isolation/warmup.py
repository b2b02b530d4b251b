"""What the fork server runs once so that every candidate process it forks starts warm.

The first call of some torch functions imports large parts of torch (switching deterministic
algorithms on takes ~0.9 s the first time), and the Triton interpreter's first launch sets itself up;
done once in the fork server, every fork inherits the result. Nothing here touches CUDA: a process
that has initialised CUDA cannot fork usable children.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def warm_up(device: str) -> None:
    from torch import profiler  # noqa: F401 - the GPU cross-check's profiler
    from torch.utils import _python_dispatch  # noqa: F401

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.use_deterministic_algorithms(False)
    x = torch.arange(16, dtype=torch.float32)
    x.view(torch.int32).sum(dtype=torch.int64)
    if device == "cpu":  # the interpreter runs on CPU tensors; on a GPU a launch would initialise CUDA
        y = torch.empty_like(x)
        _copy_kernel[(1,)](x, y, 16, BLOCK=16)


def warm_up_device() -> None:
    """In a fresh candidate process on a GPU, before any candidate: Triton's driver and launcher, the
    CUDA events the harness times with, and the profiler (its first session costs seconds)."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.arange(16, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    _copy_kernel[(1,)](x, y, 16, BLOCK=16)
    start = torch._C._CudaEventBase(enable_timing=True)
    start.record(torch.cuda.current_stream())
    try:
        with profile(activities=[ProfilerActivity.CUDA]):
            _copy_kernel[(1,)](x, y, 16, BLOCK=16)
            torch.cuda.synchronize()
    except Exception:  # no profiler here: the judge is told when it asks for kernels
        pass
    torch.cuda.synchronize()
