"""A concatenation's width as one symbol while the forward is traced, its sum again afterwards.

A DenseNet layer concatenates up to 48 inputs: in a symbolic trace the width is `s1 + s5 + ... + s187`,
and every later size, stride and contiguity query (the concatenation's own output strides, BatchNorm's and
the convolution's checks) asks sympy about that sum; those queries were most of such a region's analysis.
While tracing, `one_symbol_widths` computes a concatenation whose width sums more than 5 symbols itself:
torch's checks that the other sizes match, in torch's order (they make the ShapeEnv replace each input's
batch and spatial sizes, as without it), then a result whose width is a fresh symbol hinted with the sum's
value; everything after it is traced on that symbol. Other concatenations go through torch's own path.

The ShapeEnv learns nothing from a relation over more than 5 symbols, so a trace without the symbol never
equates the width with another size (the norm's channel count stays its own symbol); relations over the
fresh symbol are kept from it in the same way. When the trace is done, `restore_sums` makes the ShapeEnv
replace the symbol by the sum: `SymNode.expr` applies the ShapeEnv's replacements, so every node's shape
reads as a trace without the symbol has it (tests/unit/test_analysis_cat_width.py, and the writer's
programs are byte-identical).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch


@dataclass
class Widths:
    """The fresh width symbols of one trace: symbol -> the sum it stands for, and the trace's ShapeEnv."""

    sums: dict[sympy.Symbol, sympy.Expr] = field(default_factory=dict)
    shape_env: Any = None


_counter = itertools.count()


# ShapeEnv._maybe_guard_rel learns nothing from a relation over more than 5 symbols ("a really gnarly
# expression"): a width summing more than 5 symbols is never solved for nor equated with another size. A
# fresh symbol stands in only for such a width, and relations over it are kept from the ShapeEnv in the
# same way, so the sizes it proves equal are those of a trace without it.
_MANY_SYMBOLS = 5


def _is_wide_sum(expr: Any) -> bool:
    return isinstance(expr, sympy.Add) and len(expr.free_symbols) > _MANY_SYMBOLS


def _learn_nothing_of_widths(env: Any, widths: Widths) -> None:
    """Relations over a width symbol teach `env` nothing (see `_MANY_SYMBOLS`)."""
    learn = env._maybe_guard_rel

    def maybe_guard_rel(expr: sympy.Expr) -> None:
        if isinstance(expr, sympy.Basic) and expr.free_symbols & widths.sums.keys():
            return None
        return learn(expr)

    env._maybe_guard_rel = maybe_guard_rel


def _wide_concatenation(tensors: Any, dim: int) -> tuple[int, Any] | None:
    """(the dim, the ShapeEnv) where `torch.cat(tensors, dim)` gives a width summing more than 5 symbols
    and is plain (inputs of one rank above 1, on one device), else None (torch's own path then)."""
    if not isinstance(tensors, list | tuple) or len(tensors) <= _MANY_SYMBOLS:
        return None
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        return None
    rank, device = tensors[0].dim(), tensors[0].device
    if rank < 2 or any(t.dim() != rank or t.device != device for t in tensors):
        return None
    if not -rank <= dim < rank:
        return None
    d = dim % rank
    sizes = [t.shape[d] for t in tensors]
    nodes = [s.node for s in sizes if isinstance(s, torch.SymInt)]
    env = nodes[0].shape_env if nodes else None
    if env is None or any(n.shape_env is not env for n in nodes):
        return None
    width = sympy.Add(*(sympy.sympify(s.node.expr if isinstance(s, torch.SymInt) else s) for s in sizes))
    return (d, env) if _is_wide_sum(width) else None


def _output_memory_format(tensors: Any) -> torch.memory_format:
    """torch's `cat_compute_output_memory_format`: the first input's suggested format, or contiguous."""
    from torch._prims_common import suggest_memory_format

    chosen = None
    for t in tensors:
        f = suggest_memory_format(t)
        if f == torch.contiguous_format:
            return f
        if chosen is not None and chosen != f:
            return torch.contiguous_format
        chosen = f
    return chosen if chosen is not None else torch.contiguous_format


@contextlib.contextmanager
def one_symbol_widths() -> Iterator[Widths]:
    """While active, fake tensors' `aten.cat` gives a width that sums symbols a symbol of its own.

    Callers hold MODEL_LOCK (the decomposition table is process-wide) and call `restore_sums` on the
    result once the trace is done."""
    from torch._decomp import decomposition_table
    from torch._dynamo.source import ConstantSource
    from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    op = torch.ops.aten.cat.default
    original = decomposition_table[op]
    widths = Widths()

    def cat(tensors: Any, dim: int = 0) -> Any:
        wide = _wide_concatenation(tensors, dim)
        if wide is None or (widths.shape_env is not None and widths.shape_env is not wide[1]):
            return original(tensors, dim)
        d, env = wide
        if widths.shape_env is None:
            widths.shape_env = env
            _learn_nothing_of_widths(env, widths)
        memory_format = _output_memory_format(tensors)
        # torch's own checks, in its order (prims' _cat_meta): the other sizes equal those of the first
        # input, which is what makes the ShapeEnv replace each input's batch and spatial sizes.
        shape = tensors[0].shape
        for i, t in enumerate(tensors):
            for k, (common, size) in enumerate(zip(shape, t.shape, strict=True)):
                if k != d:
                    torch._check(size == common, lambda k=k, i=i, c=common, n=size: (
                        f"Sizes of tensors must match except in dimension {d}. Expected {c} in dimension "
                        f"{k} but got {n} for tensor number {i} in the list"))  # fmt: skip
        total = torch.sym_sum([t.shape[d] for t in tensors])
        hint = total.node.hint if isinstance(total, torch.SymInt) else None
        if not isinstance(hint, int):
            return original(tensors, dim)
        source = ConstantSource(f"kw_cat_width_{next(_counter)}")
        sym = env.create_symbol(hint, source=source, dynamic_dim=DimDynamic.DYNAMIC)
        widths.sums[sym] = total.node.expr
        new_shape = list(shape)
        new_shape[d] = env.create_symintnode(sym, hint=hint, source=source)
        _, dtype = elementwise_dtypes(*tensors, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH)
        return torch.empty(new_shape, dtype=dtype, device=tensors[0].device,
                           memory_format=memory_format)  # fmt: skip

    decomposition_table[op] = cat
    try:
        yield widths
    finally:
        decomposition_table[op] = original
        if widths.shape_env is not None:
            del widths.shape_env._maybe_guard_rel  # the ShapeEnv's own method again


def restore_sums(widths: Widths) -> bool:
    """Make the trace's ShapeEnv replace each width symbol by its sum.

    False where a symbol was replaced by something else after all (not expected: its relations are kept
    from the ShapeEnv): the caller then traces again without the fresh symbols."""
    env = widths.shape_env
    if env is None:
        return True
    for sym, total in widths.sums.items():
        if sym in env.replacements:
            return False  # found equal to another size after all: not expected
        env.replacements[sym] = total
        env._replacements_version_counter += 1
        env._update_version_counter()
    return True
