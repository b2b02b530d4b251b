"""The values a conv analysis walks with, and the small readers of fx nodes it shares.

While conv_analysis walks the traced graph, each node's value is one of: a `Chain` (computed from the
convolution's output: an op id, and which logical dims each actual dim runs over), an `Indep` (a
tensor expression that does not depend on the convolution, kept as a tree until it meets a chain), a
`Const`, a `ReductionTuple` (the (values, indices) of max/min) or a `SizeValue` (sizes read from a
tensor). Scalars of the model's own attributes are replaced by named twins for the walk
(frontend/named_scalars.py), so a constant is written as the attribute it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from kernelwright.providers.offline.families.conv.conv_ir import Const


class ConvUnsupported(Exception):
    """The model is not (one convolution + fusable work); the message says what was not supported."""


def const_of(value: Any) -> Const:
    """A number as a Const, written as the attribute it came from where it has one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConvUnsupported(f"expected a number, got {type(value).__name__}")
    expr = getattr(value, "kw_expr", None) or repr(float(value))
    if expr in ("inf", "-inf", "nan"):
        expr = f"float('{expr}')"
    return Const(value=float(value), expr=expr)


def expr_of(value: Any) -> str:
    """A Python expression for an int / tuple hyper-parameter (pool sizes, conv strides)."""
    if hasattr(value, "kw_expr"):
        return str(value.kw_expr)
    if isinstance(value, list | tuple):
        return "(" + ", ".join(expr_of(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, bool) or value is None or isinstance(value, int | float | str):
        return repr(value)
    raise ConvUnsupported(f"hyper-parameter of type {type(value).__name__}")


def int_tuple(value: Any, n: int) -> list[int]:
    """An int or a sequence of ints as n ints."""
    if isinstance(value, int):
        return [int(value)] * n
    vals = [int(v) for v in value]
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise ConvUnsupported(f"expected {n} values, got {vals}")
    return vals


Group = tuple[int, ...]  # the logical dims one actual dim runs over; () = a size-1 dim of its own


@dataclass
class Chain:
    """A value computed from the convolution's output."""

    op: int
    dims: list[Group]
    region: int
    cred: bool = False
    sred: frozenset[int] = frozenset()
    shape: tuple[int, ...] = ()
    """The value's shape in the analysed example."""

    def definitely_one(self, group: Group) -> bool:
        return all((d == 1 and self.cred) or d in self.sred for d in group)


@dataclass
class Indep:
    """A tensor expression that does not depend on the convolution (parameters, inputs, constants).

    tree: ("leaf", expr, shape, pos, rank) | ("const", Const) | ("unary", fn, (tree,), consts) |
          ("binary", fn, (tree, tree)) | ("where", (tree, tree, tree))
    """

    tree: tuple
    shape: tuple[int, ...]


def leaf_of(
    expr: str, shape: tuple[int, ...], pos: tuple[int | None, ...] | None = None, rank: int | None = None
) -> Indep:
    """A tensor read by expression. `pos[j]` is where its dim j sits in a space of `rank` dims that is
    right-aligned with whatever it meets (None for size-1 dims); by default the tensor's own dims."""
    if pos is None:
        pos = tuple(j if s != 1 else None for j, s in enumerate(shape))
    rank = len(shape) if rank is None else rank
    view = [1] * rank
    for j, p in enumerate(pos):
        if p is not None:
            view[p] = shape[j]
    return Indep(("leaf", expr, tuple(shape), tuple(pos), rank), tuple(view))


def map_leaves(tree: tuple, fn: Any) -> tuple:
    """The tree with `fn` applied to each leaf."""
    if tree[0] == "leaf":
        return fn(tree)
    if tree[0] == "const":
        return tree
    if tree[0] == "unary":
        return ("unary", tree[1], (map_leaves(tree[2][0], fn),), tree[3])
    if tree[0] == "binary":
        return ("binary", tree[1], tuple(map_leaves(t, fn) for t in tree[2]))
    if tree[0] == "where":
        return ("where", tuple(map_leaves(t, fn) for t in tree[1]))
    raise AssertionError(tree[0])


@dataclass
class ReductionTuple:
    """The (values, indices) of a max/min over dims: only the values may be read."""

    items: list[Any]


class SizeValue:
    """Sizes read from a tensor (x.size(0), x.shape): only feed views, whose result shapes we know."""


def call_name(node: fx.Node) -> str:
    """The name a call node is matched by (operator functions by their torch-like names)."""
    if node.op == "call_method":
        return str(node.target)
    target = node.target
    name = getattr(target, "__name__", str(target))
    module = getattr(target, "__module__", "") or ""
    if module in ("_operator", "operator"):
        return {"truediv": "div", "floordiv": "floordiv", "getitem": "getitem"}.get(name, name)
    if module == "builtins":
        return f"builtins.{name}"
    return name


def call_arg(node: fx.Node, index: int, name: str, default: Any = None) -> Any:
    """A call's argument by position (counting the tensor itself for methods) or keyword."""
    if name in node.kwargs:
        return node.kwargs[name]
    if index < len(node.args):
        return node.args[index]
    return default


def node_shape(node: Any) -> tuple[int, ...]:
    """The node's shape in the example (from shape propagation)."""
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    if meta is None or not hasattr(meta, "shape"):
        raise ConvUnsupported(f"no tensor shape for {node}")
    return tuple(int(s) for s in meta.shape)


def node_dtype(node: fx.Node) -> torch.dtype:
    return node.meta["tensor_meta"].dtype


def dims_arg(node: fx.Node, index: int, ndim: int) -> list[int] | None:
    """A reduction's `dim` argument as sorted non-negative dims, or None for every dim."""
    dim = call_arg(node, index, "dim")
    if dim is None:
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({int(d) % ndim for d in dims})


def check_inplace(node: fx.Node, inplace: bool) -> None:
    """An in-place op whose input is read again later would change that later read."""
    if not inplace:
        return
    src = node.args[0] if node.args else None
    if isinstance(src, fx.Node):
        later = [u for u in src.users if u is not node and _after(u, node)]
        if later:
            raise ConvUnsupported("an in-place op whose input is used again afterwards")


def _after(a: fx.Node, b: fx.Node) -> bool:
    for n in b.graph.nodes:
        if n is b:
            return True
        if n is a:
            return False
    return False
