"""A view's size that is a model attribute, read from the model at run time.

A size the trace fixed to a number stays a number in the trace of a view: nn.MultiheadAttention splits its
projections into heads with `q.view(tgt_len, bsz * num_heads, head_dim)`, and the trace holds
`(s0*s1, 3*s2, 8)`, right at embed_dim 24 and 3 heads only. The trace at other sizes (analysis.py) sees
another number there, and the model built at those sizes has an attribute that is the number in each
trace (`attn.head_dim`, 8 and 3; `attn.num_heads`, 3 and 4, as the coefficient of the batch's size): the
size is written as that attribute (`self.attn.head_dim`), a symbol the program reads from the module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sympy

from kernelwright.providers.offline.frontend.ir import Graph

if TYPE_CHECKING:
    from kernelwright.providers.offline.frontend.lowering import OtherTrace


def _attribute_for(full: int, there: int, attributes: dict[str, tuple[Any, Any]]) -> str | None:
    """The attribute path whose value is `full` in the traced model and `there` in the other one: the
    shortest (an attribute of the outermost module), then the first by name, so the choice is stable."""
    hits = [
        path
        for path, (a, b) in attributes.items()
        if type(a) is int and type(b) is int and a == full and b == there and "[" not in path
    ]
    return min(hits, key=lambda p: (p.count("."), len(p), p)) if hits else None


def _symbol(g: Graph, other: OtherTrace, path: str, full: int, there: int) -> sympy.Symbol:
    """The graph's symbol for `self.<path>` (one per attribute), its value in both traces recorded."""
    text = "self." + path
    for sym, source in g.attr_sources.items():
        if source == text:
            return sym
    sym = sympy.Symbol(f"attr{len(g.attr_sources)}_{path.replace('.', '_')}", integer=True, positive=True)
    g.attr_sources[sym] = text
    g.var_to_val[sym] = sympy.Integer(full)
    other.values[sym] = sympy.Integer(there)
    return sym


def attribute_size(g: Graph, other: OtherTrace, size: sympy.Expr, there: int) -> sympy.Expr | None:
    """`size` (a view's size in this trace, `there` in the other) with its number written as the model
    attribute that has it in both traces, or None where no attribute does.

    The number is the size's coefficient (`3` of `3*s2`, all of `8`); the rest of the size must be the
    same expression in both traces, so the coefficient there is `there` divided by the rest's value."""
    coeff, rest = sympy.sympify(size).as_coeff_Mul()
    if not coeff.is_Integer or int(coeff) <= 1:
        return None
    rest_there = rest.xreplace(other.values) if rest != 1 else sympy.Integer(1)
    if not rest_there.is_Integer or int(rest_there) <= 0 or there % int(rest_there):
        return None
    path = _attribute_for(int(coeff), there // int(rest_there), other.attributes)
    if path is None:
        return None
    return _symbol(g, other, path, int(coeff), there // int(rest_there)) * rest
