"""Sizes a region writes as what they are computed from, so its kernel applies at other sizes.

A model traced specialized on its inputs' sizes (tasks/regions.py) holds every size as a number:
`x.view(B, C, H * W)` is `view(2, 128, 16384)`, `x.view(-1, self.feature_size)` is `view(-1, 512)`. A region
written with those numbers is a task at those sizes only, and the stitched model's trace at other sizes
differs from it, so the region's kernel never ran there. Here a view's, reshape's or slice's size becomes an
expression of the region's inputs' sizes (`x0.shape[2]`, `(x0.shape[2] * x0.shape[3])`): where the trace
read it (tasks/region_runtime.py SizeInt) when that is one of the region's inputs, else, for a number the
trace did not read from a size (a model's constant, `self.feature_size`), the first of the inputs' sizes
(or product of consecutive ones) it equals. A view at a region's start or end with a size its region's
inputs do not give is left out of the region (run in torch: `peel_sizes`). The region's task and its kernel
then read their inputs' sizes; the stitched model runs the kernel where the region computes the same with
those expressions (its fingerprint) and every expression has its number there (`sizes_hold`).
"""

from __future__ import annotations

from typing import Any

import torch.fx as fx

from kernelwright.tasks.region_runtime import SizeExpr, SizeInt, replace_ints

_SIZE_METHODS = frozenset({"view", "reshape"})
_SIZE_FUNCTIONS = frozenset({"reshape", "getitem"})
"""Operators whose int arguments are sizes (getitem: a slice's bounds), written as expressions. Not others:
the offline writer's program for `p.expand(x0.shape[0], -1, -1)` of a parameter lost the expand, and its
kernels for multi-head attention are written for the embedding width the task's weights have (a number
that stays, so another width is another computation)."""


def _size_position(node: fx.Node, in_slice: bool) -> bool:
    """Whether the node's int arguments (inside a slice: `in_slice`) are sizes."""
    if node.op == "call_method":
        return str(node.target) in _SIZE_METHODS
    name = getattr(node.target, "__name__", "")
    return node.op == "call_function" and name in _SIZE_FUNCTIONS and (name != "getitem" or in_slice)


def _from_origin(origin: Any, reachable: set[str]) -> Any:
    """The SizeInt's origin when every value it reads is one the region has, else None."""
    if origin[0] == "dim":
        return origin if origin[1] in reachable else None
    if origin[0] == "const":
        return origin
    a, b = _from_origin(origin[1], reachable), _from_origin(origin[2], reachable)
    return None if a is None or b is None else [origin[0], a, b]


def _by_value(number: int, inputs: list[tuple[str, tuple[int, ...]]]) -> Any:
    """The first input size equal to `number`, else the first product of consecutive sizes of one input."""
    for name, shape in inputs:
        for d, size in enumerate(shape):
            if size == number:
                return ["dim", name, d]
    for name, shape in inputs:
        for first in range(len(shape)):
            product, expr = shape[first], ["dim", name, first]
            for d in range(first + 1, len(shape)):
                product, expr = product * shape[d], ["mul", expr, ["dim", name, d]]
                if product == number:
                    return expr
                if product > number:
                    break
    return None


def _choose(node: fx.Node, inputs: list[str], values: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """({k: expression} for the node's sizes written as its region's inputs' sizes, whether a size of it
    could not be): a size read from a value the region does not have cannot be (matched by its number
    alone, it would be a guess), a number at a size position is matched to the first input size (or
    product of consecutive ones) it equals."""
    reachable = {n for n in inputs if values.get(n) is not None and values[n].tensor}
    shapes = [(n, tuple(values[n].shape)) for n in inputs if n in reachable]
    mine: dict[str, Any] = {}
    missed: list[int] = []

    def choose(k: int, v: int, in_slice: bool) -> int:
        if not _size_position(node, in_slice):
            return v
        if isinstance(v, SizeInt):
            expr = _from_origin(v.origin, reachable)
        else:
            expr = _by_value(int(v), shapes) if v >= 2 else None
        if expr is not None:
            mine[str(k)] = expr
        elif isinstance(v, SizeInt) or v >= 2:
            missed.append(k)
        return v

    replace_ints((node.args, node.kwargs), choose)
    return mine, bool(missed)


def derive_sizes(
    group: list[fx.Node], inputs: list[str], values: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Node name -> {k: expression} for the node's k-th int argument written as a size of the region's
    inputs (see the module docstring; only inputs: a kernel's program names its inputs, not the region
    task's intermediate values). `values`: tasks/regions.py NodeValue per node."""
    out: dict[str, dict[str, Any]] = {}
    for node in group:
        mine, _missed = _choose(node, inputs, values)
        if mine:
            out[node.name] = mine
    return out


def _inputs(group: list[fx.Node]) -> list[str]:
    inside = {n.name for n in group}
    found: list[str] = []
    for n in group:
        found += [a.name for a in n.all_input_nodes
                  if a.name not in inside and a.name not in found and a.op != "get_attr"]  # fmt: skip
    return found


def peel_sizes(groups: list[list[fx.Node]], values: dict[str, Any], is_layout: Any) -> list[list[fx.Node]]:
    """The regions without the views at their start or end whose sizes cannot be written as their
    region's inputs' sizes (NetVLAD's `assignment.view(-1, max_sample, K)` of a (B*N, K) value, a final
    `view(B, C, H, W)` of a (H*W, B, C) one): those run in torch between the regions (a view costs
    nothing), and the region keeps only sizes its inputs give, so its kernel applies at other sizes."""
    out = []
    for group in groups:
        group = list(group)

        def peelable(node: fx.Node, group: list[fx.Node] = group) -> bool:
            value = values.get(node.name)
            return (is_layout(node) and value is not None and value.tensor
                    and _choose(node, _inputs(group), values)[1])  # fmt: skip

        while len(group) > 1 and peelable(group[0]):
            group.pop(0)
        while len(group) > 1 and peelable(group[-1]):
            group.pop()
        out.append(group)
    return out


def size_text(expr: Any, names: dict[str, str]) -> str:
    """An expression as source over the region task's names (`x0.shape[2]`, `(x0.shape[2] * x0.shape[3])`)."""
    if expr[0] == "dim":
        return f"{names[expr[1]]}.shape[{expr[2]}]"
    if expr[0] == "const":
        return str(expr[1])
    symbol = {"mul": "*", "add": "+", "sub": "-", "floordiv": "//"}[expr[0]]
    return f"({size_text(expr[1], names)} {symbol} {size_text(expr[2], names)})"


def with_sizes(node: fx.Node, sizes: dict[str, dict[str, Any]]) -> tuple[Any, Any]:
    """The node's (args, kwargs) with its derived sizes as SizeExpr markers."""
    mine = sizes.get(node.name)
    if not mine:
        return node.args, node.kwargs
    return replace_ints(
        (node.args, node.kwargs), lambda k, v, s: SizeExpr(mine[str(k)]) if str(k) in mine else v
    )
