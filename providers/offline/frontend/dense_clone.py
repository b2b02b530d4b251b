"""A copy or a view of a contiguous tensor, traced without torch's layout search.

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


def _contiguous_twin(a: torch.Tensor) -> torch.Tensor | None:
    """A contiguous tensor of a's shape where a's strides are, expression for expression, that tensor's,
    else None (no size is compared: the ShapeEnv learns nothing)."""
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    return out if all(_expr(s) == _expr(t) for s, t in zip(a.stride(), out.stride(), strict=True)) else None


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
            out = _contiguous_twin(a)
            if out is not None:
                return out
        return original(a, memory_format=memory_format)

    decomposition_table[op] = clone
    try:
        yield
    finally:
        decomposition_table[op] = original


@contextlib.contextmanager
def contiguous_views() -> Iterator[None]:
    """While active, fake tensors' `aten.view` (and `_unsafe_view`) of a contiguous input is that input's
    storage read with the contiguous strides of the new shape, after the checks torch's path makes of the
    sizes (an inferred -1, the input not empty, the element counts equal), without its dim-by-dim search
    for a split of the strides (`_reshape_view_helper_core_alg`: about a third of a Swin region's trace,
    each step a sympy query). Every other view goes through torch's path. Callers hold MODEL_LOCK (the
    fake implementations are process-wide)."""
    import operator
    from functools import reduce

    from torch._prims_common import extract_shape_from_varargs, infer_size, make_contiguous_strides_for
    from torch._subclasses import fake_impls

    ops = [torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default]
    originals = {op: fake_impls.op_implementations_dict[op] for op in ops}

    def view(fake_mode: Any, func: Any, a: Any, *shape: Any, allow_copy: bool = False) -> Any:
        original = originals[func]
        plain = (
            isinstance(a, torch.Tensor)
            and a.layout == torch.strided
            and a.ndim > 0
            and not torch.fx.experimental._config.backed_size_oblivious
            and not fake_impls._view_has_unbacked_input(a, shape)
            and _contiguous_twin(a) is not None
        )
        if not plain:
            return original(fake_mode, func, a, *shape, allow_copy=allow_copy)
        dims = infer_size(extract_shape_from_varargs(shape, validate=False), a.numel())
        if a.numel() == 0 or len(dims) == 0:  # torch's path asks the first too, as a guard
            return original(fake_mode, func, a, *shape, allow_copy=allow_copy)
        torch._check(
            a.numel() == reduce(operator.mul, dims, 1),
            lambda: f"Could not reshape a tensor with shape {a.shape} as a tensor with shape {dims}!",
        )
        return a.as_strided(dims, make_contiguous_strides_for(dims), a.storage_offset())

    for op in ops:
        fake_impls.op_implementations_dict[op] = view
    try:
        yield
    finally:
        fake_impls.op_implementations_dict.update(originals)


@contextlib.contextmanager
def contiguous_layouts() -> Iterator[None]:
    """contiguous_clones and contiguous_views together (the writer's traces take both)."""
    with contiguous_clones(), contiguous_views():
        yield
