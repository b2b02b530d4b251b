"""A copy of a contiguous tensor, traced without torch's layout search.

`aten.clone` (a Dropout at p=0 or in eval mode is one, `x.contiguous()` another) asks, in a symbolic
trace, whether its input is non-overlapping and dense and in which order its strides run: a dozen
comparisons of symbolic strides, each a sympy query (73 ms for a DenseNet layer's Dropout after its
convolution, a quarter of DenseNet121's trace). Where the input's strides are, expression for
expression, those of a contiguous tensor of its shape, the copy is that contiguous tensor: what torch's
path gives for such an input, in either memory format a clone may ask for. Anything else goes through
torch's path. No size is compared, so the trace's ShapeEnv learns the same as without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import sympy
import torch


def _expr(x: Any) -> Any:
    return x.node.expr if isinstance(x, torch.SymInt) else sympy.Integer(x)


@contextlib.contextmanager
def contiguous_clones() -> Iterator[None]:
    """While active, fake tensors' `aten.clone` of a contiguous input is a contiguous tensor made
    directly. Callers hold MODEL_LOCK (the decomposition table is process-wide)."""
    from torch._decomp import decomposition_table

    op = torch.ops.aten.clone.default
    original = decomposition_table[op]

    def clone(a: Any, *, memory_format: Any = None) -> Any:
        formats = (None, torch.preserve_format, torch.contiguous_format)
        if memory_format in formats and isinstance(a, torch.Tensor) and a.layout == torch.strided:
            out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
            if all(_expr(s) == _expr(t) for s, t in zip(a.stride(), out.stride(), strict=True)):
                return out
        return original(a, memory_format=memory_format)

    decomposition_table[op] = clone
    try:
        yield
    finally:
        decomposition_table[op] = original
