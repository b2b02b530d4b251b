"""Shapes in the lowering: symbolic sizes, and the Lowerer's view ops (reshape, permute, expand, slice, ...).

Sizes are sympy expressions of the inputs' sizes (`to_sym`); a view whose sizes the trace fixed to numbers
is re-expressed in the source's sizes where it can be (`resolve_reshape`), so a program holds at other
sizes. `ViewOps` is the part of `lowering.Lowerer` that builds view values; the Lowerer provides the graph,
the node being lowered and the trace at other sizes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sympy
import torch
import torch.fx as fx

from kernelwright.providers.offline.frontend.attribute_sizes import attribute_size
from kernelwright.providers.offline.frontend.ir import (
    Graph,
    Shape,
    SymScalar,
    Value,
    aligned,
    is_one,
    simplified,
)

if TYPE_CHECKING:
    from kernelwright.providers.offline.frontend.lowering import OtherTrace


def to_sym(x: Any) -> sympy.Expr:
    if isinstance(x, torch.SymInt | torch.SymFloat):
        return sympy.sympify(x.node.expr)
    if isinstance(x, SymScalar):
        return x.expr
    return sympy.sympify(x)


def norm_dims(dims: Any, rank: int) -> list[int]:
    if dims is None:
        return []
    if isinstance(dims, int):
        dims = [dims]
    out = []
    for d in dims:
        d = int(d)
        out.append(d + rank if d < 0 else d)
    return sorted(set(out)) if len(out) > 1 else out


def shape_prod(shape: Shape) -> sympy.Expr:
    p: sympy.Expr = sympy.Integer(1)
    for d in shape:
        p = p * d
    return p


def clamp_index(i: sympy.Expr, size: sympy.Expr, g: Graph) -> sympy.Expr:
    i = sympy.sympify(i)
    if i.is_number and int(i) < 0:
        return simplified(size + i)
    hi, hs = g.hint(i), g.hint(size)
    return size if hi >= hs else i


def resolve_reshape(src: Shape, target: list[sympy.Expr], g: Graph) -> Shape:
    """Fill in -1 and re-express sizes that tracing fixed to numbers in terms of the source's sizes.

    A constructor argument used as a view size (`x.view(-1, self.dim)`) reaches the trace as a number.
    Where a target size equals the product of a run of source sizes (matched on the traced values), the
    symbolic product is used instead, so the program still works when the sizes change.
    """
    total = shape_prod(src)
    if any(t == -1 for t in target):
        known = shape_prod(tuple(t for t in target if t != -1))
        target = [simplified(total / known) if t == -1 else t for t in target]
    src_h = g.hints(src)
    tgt_h = [g.hint(t) for t in target]
    out = list(target)
    i = j = 0
    # Walk both shapes, matching blocks of equal products.
    while i < len(src_h) and j < len(tgt_h):
        if src_h[i] == 1 and not (tgt_h[j] == 1):
            i += 1
            continue
        if tgt_h[j] == 1:
            if src_h[i] == 1:
                i += 1
            j += 1
            continue
        i0, j0 = i, j
        ps, pt = src_h[i], tgt_h[j]
        i += 1
        j += 1
        while ps != pt:
            if ps < pt and i < len(src_h):
                ps *= src_h[i]
                i += 1
            elif pt < ps and j < len(tgt_h):
                pt *= tgt_h[j]
                j += 1
            else:
                return tuple(sympy.sympify(t) for t in target)
        if j - j0 == 1 and (out[j0].is_number or reads_result(src[i0:i], g)):
            out[j0] = shape_prod(src[i0:i])
    return tuple(sympy.sympify(t) for t in out)


def reads_result(dims: Shape, g: Graph) -> bool:
    """Whether a size among `dims` is read from a torch call's result (`Lowerer._read_result_sizes`)."""
    return any(sympy.sympify(d).free_symbols & g.result_sizes for d in dims)


class ViewOps:
    """The Lowerer's view ops: each returns its input unchanged where the view changes nothing."""

    g: Graph
    node: fx.Node | None
    other: OtherTrace
    other_shapes: dict[str, tuple[int, ...]]
    notes: list[str]

    def _as_value(self, a: Any) -> Value:
        raise NotImplementedError  # the Lowerer's: a scalar becomes a 0-d constant

    def meta_shape(self) -> Shape:
        assert self.node is not None
        val = self.node.meta["val"]
        return tuple(to_sym(d) for d in val.shape)

    def reshape(self, x: Value, shape: Any) -> Value:
        x = self._as_value(x)
        raw = [to_sym(s) for s in shape]
        shape = resolve_reshape(x.shape, raw, self.g)
        if self.g.hints(shape) == self.g.hints(x.shape) and all(
            simplified(a - b) == 0 for a, b in zip(shape, x.shape, strict=True)
        ):
            return x
        # The glue prints -1 where the source had it: always right, whatever the sizes.
        infer = next((i for i, r in enumerate(raw) if r == -1), None)
        if infer is None:
            shape, infer = self._size_dependent_dims(shape)
        return self.g.add("view", "reshape", (x,), shape, x.dtype, {"shape": shape, "infer": infer})

    def _size_dependent_dims(self, shape: Shape) -> tuple[Shape, int | None]:
        """A view's shape with its sizes that the trace at other sizes shows wrong there made right, and the
        dim left for the reshape to infer (-1), if any.

        A size is wrong there when the trace fixed it (an op whose shape function specializes its input's
        sizes, such as max_pool1d's) or wrote a constructor argument into it (a stride). One that a torch
        call's result had in both traces (`_read_result_sizes`) is read from that result; of the others,
        one is inferred. Two or more cannot all be: they stay as traced, and a note says the program holds
        only at these sizes."""
        if self.node is None or self.node.name not in self.other_shapes:
            return shape, None
        other = self.other_shapes[self.node.name]
        if len(other) != len(shape) or self.g.hints(shape) != self.g.hints(self.meta_shape()):
            return shape, None  # not the node's own output: an inner view of a decomposition
        out, wrong = list(shape), []
        for i, d in enumerate(shape):
            there = d.xreplace(self.other.values)
            if not there.is_number or int(there) == other[i]:
                continue
            hint = self.g.hint(d)
            read = sorted((s for s in self.g.result_sizes
                           if self.g.hint(s) == hint and self.other.values.get(s) == other[i]), key=str)  # fmt: skip
            if read:
                out[i] = read[0]
            else:
                wrong.append(i)
        if len(wrong) > 1:  # one is inferred; of more, those a model attribute gives are read from it
            named = {i: attribute_size(self.g, self.other, shape[i], other[i]) for i in wrong}
            out = [n if (n := named.get(i)) is not None else d for i, d in enumerate(out)]
            wrong = [i for i in wrong if named[i] is None]
        if len(wrong) > 1:
            self.notes.append(f"a view's shape keeps {len(wrong)} sizes fixed by the trace: the program "
                              "holds only at the traced sizes")  # fmt: skip
        return tuple(out), (wrong[0] if len(wrong) == 1 else None)

    def unsqueeze(self, x: Value, dim: int) -> Value:
        dim = dim + x.rank + 1 if dim < 0 else dim
        shape = list(x.shape)
        shape.insert(dim, sympy.Integer(1))
        return self.reshape(x, shape)

    def squeeze(self, x: Value, dims: Any = None) -> Value:
        dl = set(range(x.rank)) if dims is None else set(norm_dims(dims, x.rank))
        shape = [d for i, d in enumerate(x.shape) if not (i in dl and is_one(d))]
        return self.reshape(x, shape)

    def permute(self, x: Value, dims: Any) -> Value:
        dl = [int(d) % x.rank for d in dims]
        if dl == list(range(x.rank)):
            return x
        shape = tuple(x.shape[d] for d in dl)
        return self.g.add("view", "permute", (x,), shape, x.dtype, {"dims": tuple(dl)})

    def transpose(self, x: Value, d0: int, d1: int) -> Value:
        if x.rank < 2:
            return x
        dl = list(range(x.rank))
        d0, d1 = int(d0) % x.rank, int(d1) % x.rank
        dl[d0], dl[d1] = dl[d1], dl[d0]
        return self.permute(x, dl)

    def expand(self, x: Value, shape: Any) -> Value:
        shape = [to_sym(s) for s in shape]
        xs = aligned(x.shape, len(shape))
        # A size read from a torch call's result stays read from it where the expansion keeps it.
        out = tuple(
            xs[i]
            if s == -1 or (reads_result((xs[i],), self.g) and self.g.hint(xs[i]) == self.g.hint(s))
            else s
            for i, s in enumerate(shape)
        )
        if self.g.hints(out) == self.g.hints(x.shape) and len(out) == x.rank:
            return x
        return self.g.add("view", "expand", (x,), out, x.dtype, {"shape": out})

    def slice(self, x: Value, dim: int, start: Any, end: Any, step: int = 1) -> Value:
        dim = norm_dims([dim], x.rank)[0]
        size = x.shape[dim]
        start = 0 if start is None else to_sym(start)
        end = size if end is None else to_sym(end)
        if isinstance(end, sympy.Integer) and int(end) >= 2**62:
            end = size
        start = clamp_index(start, size, self.g)
        end = clamp_index(end, size, self.g)
        if start == 0 and simplified(end - size) == 0 and step == 1:
            return x
        length = sympy.Max(sympy.Integer(0), (end - start + step - 1) // step) if step != 1 else end - start
        length = simplified(length)
        shape = list(x.shape)
        shape[dim] = length
        return self.g.add("view", "slice", (x,), tuple(shape), x.dtype,
                          {"dim": dim, "start": start, "end": end, "step": step})  # fmt: skip

    def select(self, x: Value, dim: int, index: Any) -> Value:
        dim = norm_dims([dim], x.rank)[0]
        shape = tuple(d for i, d in enumerate(x.shape) if i != dim)
        return self.g.add("view", "select", (x,), shape, x.dtype, {"dim": dim, "index": to_sym(index)})
