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
import functools
import operator
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
    sizes (an inferred -1, the input not empty, the element counts equal: group by group where the sizes
    group, `_grouped_sizes`), without its dim-by-dim search for a split of the strides
    (`_reshape_view_helper_core_alg`: about a third of a Swin region's trace, each step a sympy query). Every
    other view goes through torch's path. Callers hold MODEL_LOCK (the fake implementations are
    process-wide)."""
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
        given = list(extract_shape_from_varargs(shape, validate=False))
        grouped = _grouped_sizes(list(a.shape), given) if given else None
        dims: list[Any] = list(infer_size(given, a.numel())) if grouped is None else grouped[0]
        if a.numel() == 0 or len(dims) == 0:  # torch's path asks the first too, as a guard
            return original(fake_mode, func, a, *shape, allow_copy=allow_copy)
        if grouped is None:
            torch._check(
                a.numel() == functools.reduce(operator.mul, dims, 1),
                lambda: f"Could not reshape a tensor with shape {a.shape} as a tensor with shape {dims}!",
            )
        else:  # group by group: together they say the element counts are equal
            for x, y in grouped[1]:
                if _expr(x) != _expr(y):
                    torch._check(x == y, lambda: f"Could not view a tensor of shape {a.shape} as {given}!")
        return a.as_strided(dims, make_contiguous_strides_for(dims), a.storage_offset())

    for op in ops:
        fake_impls.op_implementations_dict[op] = view
    try:
        yield
    finally:
        fake_impls.op_implementations_dict.update(originals)


def _hint(x: Any) -> int:
    return int(x.node.hint) if isinstance(x, torch.SymInt) else int(x)


def _cover(old: list[Any], new: list[Any]) -> tuple[list[tuple[Any, Any]], int] | None:
    """Groups of consecutive `old` and `new` sizes whose products are equal at the trace's values, covering
    every new size in order: (the groups' two products, how many old sizes they took), or None where there is
    no such grouping."""
    pairs: list[tuple[Any, Any]] = []
    i = j = 0
    while j < len(new):
        if i >= len(old):  # sizes of 1 left: nothing to equate
            return (pairs, i) if all(_hint(d) == 1 for d in new[j:]) else None
        a, b, i, j = old[i], new[j], i + 1, j + 1
        while _hint(a) != _hint(b):
            if _hint(a) < _hint(b) and i < len(old):
                a, i = a * old[i], i + 1
            elif _hint(b) < _hint(a) and j < len(new):
                b, j = b * new[j], j + 1
            else:
                return None
        pairs.append((a, b))
    return pairs, i


def _grouped_sizes(old: list[Any], shape: list[Any]) -> tuple[list[Any], list[tuple[Any, Any]]] | None:
    """The view's sizes and the (old, new) products its groups equate, found as torch's dim-by-dim walk finds
    them (`_reshape_view_helper_core_alg`): a -1 is the product of the old sizes between the groups before it
    and after it, where torch's `infer_size` writes the element count divided by the other sizes (a floor
    division no later size check simplifies: SwinV2's window merge read its channels as one, and a kernel
    reading the block's input beside it saw two shapes, so its residual add, fused into the LayerNorm before,
    ran as a kernel of its own). None where the sizes do not group, or a group equates a size with a number
    (then torch's checks apply)."""
    k = next((n for n, d in enumerate(shape) if type(d) is int and d == -1), None)
    if k is None:
        got = _cover(old, shape)
        if got is None or any(_hint(d) != 1 for d in old[got[1] :]):
            return None
        sizes, pairs = shape, got[0]
    else:
        left = _cover(old, shape[:k])
        if left is None:
            return None
        rest = old[left[1] :]
        right = _cover(rest[::-1], shape[k + 1 :][::-1])
        if right is None:
            return None
        inferred = functools.reduce(operator.mul, rest[: len(rest) - right[1]], 1)
        if _hint(inferred) == 0:
            return None
        sizes, pairs = [*shape[:k], inferred, *shape[k + 1 :]], left[0] + right[0]
    # a group that equates a size with a number would fix that size (a view to the traced batch, 10, would make
    # every later size of the batch 10): that view keeps torch's one check of the element counts
    if any(_expr(x) != _expr(y) and (_expr(x).is_number or _expr(y).is_number) for x, y in pairs):
        return None
    return sizes, pairs


@contextlib.contextmanager
def contiguous_layouts() -> Iterator[None]:
    """contiguous_clones and contiguous_views together (the writer's traces take both)."""
    with contiguous_clones(), contiguous_views():
        yield
