"""Two input sizes proved equal, learned by the ShapeEnv without solving for them.

A concatenation checks that its inputs' other sizes equal the first input's (a DenseNet layer's 48
inputs: 141 checks of `s_i == s_j`); a BatchNorm or a convolution checks a parameter's size against the
input's. Each check the ShapeEnv cannot decide is a guard, and `ShapeEnv._maybe_guard_rel` learns from it:
it refines both symbols' ranges (`_refine_ranges`, which solves the relation for each symbol) and
replaces one symbol by the other (solving again for the one it picks). For two size symbols that is
sympy's `try_solve` three times to find what is known beforehand: each symbol equals the other, and with
equal ranges neither range narrows. Those solves were most of a DenseNet layer's concatenation (two
thirds of its checks' time).

`plain_size_equalities` makes `_maybe_guard_rel` on `Eq(a, b)` of two such symbols do what torch's does
for it, directly: where both are size symbols with integer hints, neither is replaced by another yet and
their ranges are equal, nothing narrows, and torch replaces the one its ordering puts first (symbols with
only ephemeral sources, then the larger hint, then the later name) by the other; that replacement is made
through the ShapeEnv's own `_set_replacement`. Any other relation goes to torch's method. The guard itself
is recorded by the ShapeEnv as before. tests/unit/test_analysis_size_equalities.py compares the ShapeEnv
and the graph with torch's path.

`_set_replacement` still narrows the replaced symbol's range by the other's, `ValueRanges.__and__`: sympy's
`Max` and `Min` of the bounds, equal here, about a tenth of a DenseNet layer's trace. While the patch is
active the intersection of two equal ranges is the range itself, what `Max(l, l)` and `Min(u, u)` (or `Or`
and `And` for booleans) give (tests/unit/test_analysis_equal_ranges.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import sympy


def _order_key(env: Any, x: sympy.Symbol) -> tuple[int, int, str]:
    """torch's `_smart_symbol_sort` in `_maybe_guard_rel` for a backed size symbol with an integer hint."""
    sources = env.var_to_sources.get(x) if x in env.var_to_sources else None
    only_ephemeral = sources is not None and all(s.is_ephemeral() for s in sources)
    return (1 if only_ephemeral else 0, int(env.backed_var_to_val[x]), x.name)


def _plain_pair(env: Any, expr: Any) -> tuple[sympy.Symbol, sympy.Symbol] | None:
    """(the symbol torch replaces, the one it keeps) where `expr` is `Eq(a, b)` of two size symbols with
    integer hints, neither replaced yet, with equal ranges; else None."""
    from torch.utils._sympy.symbol import SymT, symbol_is_type

    if not isinstance(expr, sympy.Eq):
        return None
    a, b = expr.lhs, expr.rhs
    if not isinstance(a, sympy.Symbol) or not isinstance(b, sympy.Symbol) or a == b:
        return None
    for x in (a, b):
        if not symbol_is_type(x, SymT.SIZE) or x in env.replacements:
            return None
        if not isinstance(env.backed_var_to_val.get(x), sympy.Integer):
            return None
    if env.var_to_range.get(a) != env.var_to_range.get(b) or env.var_to_range.get(a) is None:
        return None
    first, second = sorted((a, b), key=lambda x: _order_key(env, x), reverse=True)
    return first, second


@contextlib.contextmanager
def plain_size_equalities() -> Iterator[None]:
    """While active, every ShapeEnv learns `Eq(a, b)` of two plain size symbols without solving (see the
    module's docstring). Callers hold MODEL_LOCK (the method is patched on the class)."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils._sympy.value_ranges import ValueRanges

    original = ShapeEnv.__dict__["_maybe_guard_rel"]
    intersect = ValueRanges.__dict__["__and__"]

    def equal_ranges_first(self: Any, other: Any) -> Any:
        return self if self == other else intersect(self, other)

    def maybe_guard_rel(self: Any, expr: Any) -> None:
        pair = _plain_pair(self, expr)
        if pair is None:
            return original(self, expr)
        # torch's `_refine_ranges` narrows nothing (equal ranges); its solve gives the other symbol.
        self._set_replacement(pair[0], self._find(pair[1]), "solve")
        return None

    ShapeEnv._maybe_guard_rel = maybe_guard_rel  # type: ignore[method-assign,assignment]
    ValueRanges.__and__ = equal_ranges_first  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        ShapeEnv._maybe_guard_rel = original  # type: ignore[method-assign]
        ValueRanges.__and__ = intersect  # type: ignore[method-assign]
