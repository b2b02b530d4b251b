"""Ops that change a value's dims or end a fusion region, on a conv analysis's OpBuilder.

Reductions over channels stay in registers (creduce); reductions over spatial dims, pooling and
normalisation each start a new region (the generated program ends a stage there: conv_stages);
softmax and logsumexp over channels are written as reductions and pointwise ops; views only add, drop
or merge whole dims, so each actual dim keeps the list of logical dims it runs over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn

from kernelwright.providers.offline.families.conv.conv_builder import OpBuilder
from kernelwright.providers.offline.families.conv.conv_ir import Const, PoolPart
from kernelwright.providers.offline.families.conv.conv_values import (
    Chain,
    ConvUnsupported,
    Group,
    Indep,
    call_arg,
    dims_arg,
    int_tuple,
    leaf_of,
    map_leaves,
    node_shape,
)


class RegionOps:
    """Reductions, softmax, pooling, normalisation and views, added to `b`'s plan."""

    def __init__(self, b: OpBuilder, model: nn.Module, attr: Callable[[str], Any]) -> None:
        self.b = b
        self.model = model
        self.attr = attr  # the traced module's attribute by dotted name

    def eval_expr(self, expr: str) -> torch.Tensor | None:
        obj: Any = self.model
        for part in expr.removeprefix("self.").split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj if isinstance(obj, torch.Tensor) else None

    def reduce_dims(self, node: fx.Node, x: Chain, fn: str, dims: list[int], keepdim: bool) -> Chain:
        self.b.check_plain(x, fn)
        logical = [x.dims[d][0] for d in dims if x.dims[d]]
        if 0 in logical:
            raise ConvUnsupported(f"{fn} over the batch dim")
        v = x
        op = v.op
        cred, sred, region = v.cred, set(v.sred), v.region
        if 1 in logical and not v.cred:
            op = self.b.new_op("creduce", [op], attrs={"fn": fn}, cred=True)
            cred = True
        spatial = sorted(d for d in logical if d != 1 and d not in v.sred)
        if spatial:
            self.b.regions += 1
            region = self.b.regions
            op = self.b.new_op("sreduce", [op], attrs={"fn": fn, "dims": spatial}, cred=cred)
            sred |= set(spatial)
        new_dims = list(x.dims) if keepdim else [g for i, g in enumerate(x.dims) if i not in dims]
        out = Chain(op=op, dims=new_dims, region=region, cred=cred, sred=frozenset(sred))
        out.shape = tuple(
            1 if (keepdim and i in dims) else s for i, s in enumerate(x.shape) if keepdim or i not in dims
        )
        return out

    def logsumexp(self, node: fx.Node, x: Any) -> Any:
        if not isinstance(x, Chain):
            raise ConvUnsupported("logsumexp of a tensor independent of the convolution")
        self.b.check_plain(x, "logsumexp")
        dims = dims_arg(node, 1, len(x.dims)) or []
        logical = [x.dims[d][0] for d in dims if x.dims[d]]
        if logical != [1] or x.cred:
            raise ConvUnsupported("logsumexp over dims other than the channels")
        keepdim = bool(call_arg(node, 2, "keepdim", False))
        m = self.b.new_op("creduce", [x.op], attrs={"fn": "max"}, cred=True)
        d = self.b.new_op("binary", [x.op, m], attrs={"fn": "sub"})
        e = self.b.new_op("unary", [d], attrs={"fn": "exp"})
        s = self.b.new_op("creduce", [e], attrs={"fn": "sum"}, cred=True)
        lg = self.b.new_op("unary", [s], attrs={"fn": "log"}, cred=True)
        op = self.b.new_op("binary", [lg, m], attrs={"fn": "add"}, cred=True)
        new_dims = list(x.dims) if keepdim else [g for i, g in enumerate(x.dims) if i not in dims]
        out = Chain(op=op, dims=new_dims, region=x.region, cred=True, sred=x.sred)
        out.shape = node_shape(node)
        return out

    def softmax(self, node: fx.Node, x: Any, dim: Any, *, log: bool) -> Any:
        if not isinstance(x, Chain):
            raise ConvUnsupported("softmax of a tensor independent of the convolution")
        self.b.check_plain(x, "softmax")
        if dim is None:
            raise ConvUnsupported("softmax without dim")
        d = int(dim) % len(x.dims)
        if x.dims[d] != (1,) or x.cred:
            raise ConvUnsupported("softmax over a dim other than the channels")
        m = self.b.new_op("creduce", [x.op], attrs={"fn": "max"}, cred=True)
        sh = self.b.new_op("binary", [x.op, m], attrs={"fn": "sub"})
        e = self.b.new_op("unary", [sh], attrs={"fn": "exp"})
        s = self.b.new_op("creduce", [e], attrs={"fn": "sum"}, cred=True)
        if log:
            lg = self.b.new_op("unary", [s], attrs={"fn": "log"}, cred=True)
            op = self.b.new_op("binary", [sh, lg], attrs={"fn": "sub"})
        else:
            op = self.b.new_op("binary", [e, s], attrs={"fn": "div"})
        return self.b.chain_like(x, op, node)

    def pool(self, node: fx.Node, x: Any, kind: str, part: PoolPart, nd: int, values: tuple) -> Chain:
        x = self.b.require_standard(x, f"{kind} pooling")
        assert self.b.spec is not None
        if nd != self.b.spec.ndim:
            raise ConvUnsupported(f"{nd}-D pooling after a {self.b.spec.ndim}-D convolution")
        kernel, stride, padding, dilation = values
        k = int_tuple(kernel, nd)
        s = int_tuple(stride if stride not in (None, ()) else kernel, nd)
        p, d = int_tuple(padding, nd), int_tuple(dilation, nd)
        prev = self.b.ops[x.op]
        src = node.args[0]
        composable = (
            prev.kind == "pool"
            and prev.attrs["kind"] == kind
            and isinstance(src, fx.Node)
            and len(src.users) == 1
            and k == s
            and all(v == 0 for v in p)
            and all(v == 1 for v in d)
            and all(pp["simple"] for pp in prev.attrs["parts"])
        )
        info = part.model_dump() | {"simple": k == s and not any(p) and all(v == 1 for v in d)}
        if composable:
            prev.attrs["parts"].append(info)
            return self.b.chain_like(x, x.op, node)
        self.b.regions += 1
        # a pool of a value reduced over channels is one channel too (the stage's buffer and store follow it)
        op = self.b.new_op("pool", [x.op], attrs={"kind": kind, "parts": [info]}, cred=x.cred)
        return self.b.chain_like(x, op, node, region=self.b.regions)

    def adaptive(self, node: fx.Node, x: Any, fn: str, output_size: Any) -> Any:
        x = self.b.require_standard(x, "adaptive pooling")
        assert self.b.spec is not None
        sizes = [output_size] if isinstance(output_size, int) or output_size is None else list(output_size)
        if any(s not in (1,) for s in sizes):
            raise ConvUnsupported("adaptive pooling to a size other than 1")
        dims = list(range(2, 2 + self.b.spec.ndim))
        return self.reduce_dims(node, x, fn, dims, keepdim=True)

    def norm(
        self, node: fx.Node, x: Any, kind: str, groups: str, eps: str, weight: str | None, bias: str | None,
        running: str | None = None,
    ) -> Any:  # fmt: skip
        """`running`: the BatchNorm module (as an expression) whose running statistics the program keeps."""
        x = self.b.require_standard(x, f"{kind} norm")
        if x.cred:
            raise ConvUnsupported("a normalisation after a channel reduction")
        self.b.regions += 1
        self.b.region_src[self.b.regions] = x.op
        attrs = {"kind": kind, "groups": groups, "eps": eps}
        if running is not None:
            attrs["running"] = running
        op = self.b.new_op("norm", [x.op], attrs=attrs)
        v = self.b.chain_like(x, op, node, region=self.b.regions)
        for expr, fn in ((weight, "mul"), (bias, "add")):
            if expr is None:
                continue
            tensor = self.eval_expr(expr)
            if tensor is None:
                continue
            leaf = leaf_of(expr, tuple(tensor.shape))
            if kind in ("group", "instance", "batch") and tensor.dim() == 1:
                # Per-channel affine parameters: shape (C,) broadcast as (C, 1, ...).
                leaf = leaf_of(expr, tuple(tensor.shape), (0,), len(v.dims) - 1)
            v = self.b.binary_on(node, fn, v, leaf)
        return v

    def running_norm(self, node: fx.Node, x: Any, t: str, affine: bool) -> Any:
        """Eval-mode batch/instance norm: (x - running_mean) / sqrt(running_var + eps) * w + b."""
        x = self.b.require_standard(x, "normalisation")
        nd = len(x.dims) - 2

        def leaf(name: str) -> Indep:
            size = int(self.eval_expr(f"self.{t}.{name}").shape[0])  # type: ignore[union-attr]
            return leaf_of(f"self.{t}.{name}", (size,), (0,), 1 + nd)

        eps = Const(value=float(self.attr(t).eps), expr=f"self.{t}.eps")
        var = Indep(("binary", "add", (leaf("running_var").tree, ("const", eps))), leaf("running_var").shape)
        inv = Indep(("unary", "rsqrt", (var.tree,), ()), var.shape)
        v = self.b.binary_on(node, "sub", x, leaf("running_mean"))
        v = self.b.binary_on(node, "mul", v, inv)
        if affine:
            v = self.b.binary_on(node, "mul", v, leaf("weight"))
            v = self.b.binary_on(node, "add", v, leaf("bias"))
        return v

    def layer_norm(
        self, node: fx.Node, x: Any, n_norm: int, eps: str, weight: str | None, bias: str | None
    ) -> Any:
        x = self.b.require_standard(x, "layer norm")
        nd = len(x.dims)
        covered = [g[0] for g in x.dims[nd - n_norm :]]
        spatial = [g[0] for g in x.dims[2:]]
        if covered == [1, *spatial]:
            kind = "layer"
        elif covered == spatial:
            kind = "instance"
        else:
            raise ConvUnsupported("layer norm over dims other than (C, spatial...) or (spatial...)")
        return self.norm(node, x, kind, "1" if kind == "layer" else "None", eps, weight, bias)

    def _view_indep(self, x: Indep, new: tuple[int, ...]) -> Indep:
        """A view of a parameter expression that adds or drops size-1 dims (no merges or splits)."""
        old = x.shape
        old_big = [i for i, s in enumerate(old) if s != 1]
        new_big = [i for i, s in enumerate(new) if s != 1]
        if [old[i] for i in old_big] != [new[i] for i in new_big]:
            raise ConvUnsupported("a view of a parameter that merges or splits dims")
        where = dict(zip(old_big, new_big, strict=True))
        rank_old = len(old)

        def move(leaf: tuple) -> tuple:
            _, expr, shape, pos, rank = leaf
            moved = tuple(None if p is None else where[rank_old - rank + p] for p in pos)
            return ("leaf", expr, shape, moved, len(new))

        return Indep(map_leaves(x.tree, move), tuple(new))

    def view(self, node: fx.Node, x: Any) -> Any:
        if not isinstance(x, Chain):
            if isinstance(x, Indep):
                return self._view_indep(x, node_shape(node))
            raise ConvUnsupported("a view of a non-tensor")
        s_in = self.b.chain_shape(x)
        s_out = node_shape(node)
        units = list(zip(s_in, x.dims, strict=True))
        i = 0
        out: list[Group] = []

        def skip_ones() -> None:
            nonlocal i
            while i < len(units) and units[i][0] == 1:
                if not x.definitely_one(units[i][1]):
                    raise ConvUnsupported("a view over a dim of size 1 in the small example (ambiguous)")
                i += 1

        for size in s_out:
            if size == 1:
                out.append(())
                continue
            skip_ones()
            prod, group = 1, []  # type: tuple[int, list[int]]
            while prod < size:
                if i >= len(units):
                    raise ConvUnsupported("a view that is not a reshape of whole dims")
                s, g = units[i]
                i += 1
                if s == 1:
                    if not x.definitely_one(g):
                        raise ConvUnsupported("a view over a dim of size 1 in the small example (ambiguous)")
                    continue
                prod *= s
                group.extend(g)
            if prod != size:
                raise ConvUnsupported("a view that splits a dim")
            out.append(tuple(group))
        skip_ones()
        if i != len(units):
            raise ConvUnsupported("a view that is not a reshape of whole dims")
        v = Chain(op=x.op, dims=out, region=x.region, cred=x.cred, sred=x.sred)
        v.shape = s_out
        return v
