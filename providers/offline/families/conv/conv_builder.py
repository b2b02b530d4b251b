"""The op list a conv analysis builds, and the rules by which values meet on the convolution's grid.

`OpBuilder` holds the plan under construction (ops, operands, the convolution's spec) and adds pointwise
ops: an independent operand is materialised with the dims it lines up with (a scalar, one value per
channel, or a whole tensor), two values of the convolution broadcast only where that is unambiguous at
full size, and values from different fusion regions (before and after a pooling or reduction) may not
meet. `finish` keeps the ops the output needs, renumbered, as a ConvPlan.
"""

from __future__ import annotations

from typing import Any

import torch.fx as fx

from kernelwright.providers.offline.families.conv.conv_fold import find_norm_fold
from kernelwright.providers.offline.families.conv.conv_ir import (
    SPATIAL,
    Const,
    ConvOperand,
    ConvPlan,
    ConvSpec,
    Op,
)
from kernelwright.providers.offline.families.conv.conv_values import (
    Chain,
    ConvUnsupported,
    Group,
    Indep,
    node_dtype,
    node_shape,
)


class OpBuilder:
    """The plan under construction: its ops and operands, the convolution, and the fusion regions."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.operands: list[ConvOperand] = []
        self.regions = 0
        self.region_src: dict[int, int] = {}  # region -> op whose value the region's stage loads raw
        self.spec: ConvSpec | None = None
        self.conv_input = ""
        self.notes: list[str] = []

    def new_op(self, kind: str, args: list[int] | None = None, **kw: Any) -> int:
        op = Op(id=len(self.ops), kind=kind, args=args or [], **kw)  # type: ignore[arg-type]
        self.ops.append(op)
        return op.id

    def add_operand(self, operand: ConvOperand) -> int:
        if operand in self.operands:
            return self.operands.index(operand)
        self.operands.append(operand)
        return len(self.operands) - 1

    def standard_dims(self, ndim: int) -> list[Group]:
        dims: list[Group] = [(0,), (1,)]
        return dims + [(d,) for d in SPATIAL[3 - ndim :]]

    def check_plain(self, v: Chain, what: str) -> None:
        if any(len(g) > 1 for g in v.dims):
            raise ConvUnsupported(f"{what} after a view that merges dims")

    def chain_shape(self, v: Chain) -> tuple[int, ...]:
        return v.shape

    def chain_like(self, x: Chain, op: int, node: fx.Node, **changes: Any) -> Chain:
        v = Chain(op=op, dims=list(x.dims), region=x.region, cred=x.cred, sred=x.sred)
        for k, val in changes.items():
            setattr(v, k, val)
        v.shape = node_shape(node)
        return v

    def materialize(self, ind: Indep | Const, target: Chain, shape: tuple[int, ...] | None = None) -> int:
        """Ops computing an independent expression on `target`'s grid (of `shape`, default the target's
        own); returns the op id."""
        if isinstance(ind, Const):
            return self.new_op("const", consts=[ind])
        tshape = shape or self.chain_shape(target)
        if len(ind.shape) > len(tshape):
            raise ConvUnsupported("an operand has more dims than the value it meets")
        return self._emit_tree(ind.tree, target, tshape)

    def _emit_tree(self, tree: tuple, target: Chain, tshape: tuple[int, ...]) -> int:
        kind = tree[0]
        if kind == "const":
            return self.new_op("const", consts=[tree[1]])
        if kind == "leaf":
            expr, shape, pos, rank = tree[1], tree[2], tree[3], tree[4]
            off = len(tshape) - rank
            align: list[int | None] = []
            for j, s in enumerate(shape):
                if pos[j] is None:
                    align.append(None)
                    continue
                cp = off + pos[j]
                if cp < 0 or tshape[cp] != s:
                    raise ConvUnsupported(
                        f"{expr} of shape {list(shape)} enlarges a value of shape {list(tshape)}"
                    )
                group = target.dims[cp]
                if len(group) != 1:
                    raise ConvUnsupported(f"{expr} meets a merged or size-1 dim")
                align.append(group[0])
            logical = {a for a in align if a is not None}
            kind_ = "scalar" if not logical else ("channel" if logical == {1} else "full")
            operand = ConvOperand(expr=expr, align=align, kind=kind_)  # type: ignore[arg-type]
            if operand in self.operands:
                idx = self.operands.index(operand)
            else:
                idx = len(self.operands)
                self.operands.append(operand)
            return self.new_op("operand", operand=idx)
        if kind == "unary":
            a = self._emit_tree(tree[2][0], target, tshape)
            return self.new_op("unary", [a], consts=list(tree[3]), attrs={"fn": tree[1]})
        if kind == "binary":
            a = self._emit_tree(tree[2][0], target, tshape)
            b = self._emit_tree(tree[2][1], target, tshape)
            return self.new_op("binary", [a, b], attrs={"fn": tree[1]})
        if kind == "where":
            c, a, b = (self._emit_tree(t, target, tshape) for t in tree[1])
            return self.new_op("where", [c, a, b])
        raise AssertionError(kind)

    def unary(self, node: fx.Node, fn: str, x: Any, consts: list[Const] | None = None) -> Any:
        consts = consts or []
        if isinstance(x, Chain):
            self.check_plain(x, fn)
            op = self.new_op("unary", [x.op], consts=consts, attrs={"fn": fn}, cred=x.cred)
            return self.chain_like(x, op, node)
        if isinstance(x, Indep):
            return Indep(("unary", fn, (x.tree,), tuple(consts)), x.shape)
        if isinstance(x, Const):
            return Indep(("unary", fn, (("const", x),), tuple(consts)), ())
        raise ConvUnsupported(f"{fn} of {type(x).__name__}")

    def binary(self, node: fx.Node, fn: str, a: Any, b: Any) -> Any:
        if not isinstance(a, Chain) and not isinstance(b, Chain):
            ta = a.tree if isinstance(a, Indep) else ("const", a)
            tb = b.tree if isinstance(b, Indep) else ("const", b)
            shape = node_shape(node) if isinstance(node, fx.Node) and "tensor_meta" in node.meta else ()
            return Indep(("binary", fn, (ta, tb)), shape)
        out_shape = node_shape(node)
        if isinstance(a, Chain) and isinstance(b, Chain):
            region = self.common_region([a, b], fn)
            self.check_plain(a, fn)
            self.check_plain(b, fn)
            dims = self._broadcast_dims(a, b, out_shape)
            op = self.new_op("binary", [a.op, b.op], attrs={"fn": fn}, cred=a.cred and b.cred)
            v = Chain(op=op, dims=dims, region=region, cred=a.cred and b.cred, sred=a.sred | b.sred)
            v.shape = out_shape
            return v
        chain, other = (a, b) if isinstance(a, Chain) else (b, a)
        self.check_plain(chain, fn)
        cred = chain.cred
        if self.chain_shape(chain) != out_shape:
            if not self._channel_expansion(chain, out_shape):
                raise ConvUnsupported(f"{fn} with an operand that enlarges the convolution's value")
            # a per-channel operand spreads a channel-reduced value over the channels again
            cred = False
        oid = self.materialize(other, chain, out_shape)
        args = [chain.op, oid] if chain is a else [oid, chain.op]
        op = self.new_op("binary", args, attrs={"fn": fn}, cred=cred)
        return self.chain_like(chain, op, node, cred=cred)

    def binary_on(self, node: fx.Node, fn: str, v: Chain, leaf: Indep) -> Chain:
        oid = self.materialize(leaf, v)
        op = self.new_op("binary", [v.op, oid], attrs={"fn": fn})
        return self.chain_like(v, op, node)

    def _channel_expansion(self, chain: Chain, out_shape: tuple[int, ...]) -> bool:
        """Whether `out_shape` is `chain` (reduced over channels) spread over the convolution's channels."""
        assert self.spec is not None
        shape = self.chain_shape(chain)
        if not chain.cred or len(shape) != len(out_shape):
            return False
        diff = [i for i, (x, y) in enumerate(zip(shape, out_shape, strict=True)) if x != y]
        return (
            len(diff) == 1
            and chain.dims[diff[0]] == (1,)
            and shape[diff[0]] == 1
            and out_shape[diff[0]] == self.spec.out_channels
        )

    def common_region(self, values: list[Chain], what: str) -> int:
        """The region values meet in. A normalisation's input may meet values after it: the stage
        after the normalisation loads that input anyway."""
        region = max(v.region for v in values)
        for v in values:
            if v.region != region and self.region_src.get(region) != v.op:
                raise ConvUnsupported(f"{what} combines values from before and after a pooling/reduction")
        return region

    def _broadcast_dims(self, a: Chain, b: Chain, out_shape: tuple[int, ...]) -> list[Group]:
        sa, sb = self.chain_shape(a), self.chain_shape(b)
        n = len(out_shape)
        dims: list[Group] = []
        for i in range(n):
            ga = a.dims[i - (n - len(sa))] if i >= n - len(sa) else None
            gb = b.dims[i - (n - len(sb))] if i >= n - len(sb) else None
            za = sa[i - (n - len(sa))] if ga is not None else 1
            zb = sb[i - (n - len(sb))] if gb is not None else 1
            if ga is not None and gb is not None and ga != gb and za != 1 and zb != 1:
                raise ConvUnsupported("two values of the convolution meet on different dims")
            if za == 1 and zb != 1 and ga is not None and not a.definitely_one(ga):
                raise ConvUnsupported("a size-1 dim of the small example broadcasts (ambiguous at full size)")
            if zb == 1 and za != 1 and gb is not None and not b.definitely_one(gb):
                raise ConvUnsupported("a size-1 dim of the small example broadcasts (ambiguous at full size)")
            pick = ga if (za != 1 or gb is None) else gb
            if zb != 1 and gb is not None:
                pick = gb
            dims.append(pick if pick is not None else ())
        return dims

    def require_standard(self, x: Any, what: str) -> Chain:
        if not isinstance(x, Chain):
            raise ConvUnsupported(f"{what} of a tensor independent of the convolution")
        assert self.spec is not None
        if x.dims != self.standard_dims(self.spec.ndim):
            raise ConvUnsupported(f"{what} on a value whose dims are not (N, C, spatial...)")
        return x

    def conv_value(self, node: fx.Node, spec: ConvSpec, x_node: Any) -> Chain:
        if not isinstance(x_node, fx.Node) or x_node.op != "placeholder":
            raise ConvUnsupported("the convolution's input is not a forward argument")
        x_dtype = node_dtype(x_node)
        if str(x_dtype).removeprefix("torch.") != spec.dtype:
            raise ConvUnsupported(f"input dtype {x_dtype} differs from the weight's {spec.dtype}")
        if spec.dtype not in ("float32", "float16", "bfloat16"):
            raise ConvUnsupported(f"dtype {spec.dtype}")
        if len(node_shape(x_node)) != spec.ndim + 2:
            raise ConvUnsupported("an unbatched convolution input")
        self.spec = spec
        self.conv_input = str(x_node.target)
        op = self.new_op("conv")
        if spec.bias_expr is not None:
            bias = self.new_op(
                "operand",
                operand=self.add_operand(ConvOperand(expr=spec.bias_expr, align=[1], kind="channel")),
            )
            op = self.new_op("binary", [op, bias], attrs={"fn": "add"})
        v = Chain(op=op, dims=self.standard_dims(spec.ndim), region=0)
        v.shape = node_shape(node)
        return v

    def finish(self, out: Chain, forward_args: list[str]) -> ConvPlan:
        # Keep only the ops the output needs, renumbered in order (op 0 stays the convolution).
        needed = {out.op}
        for op in reversed(self.ops):
            if op.id in needed:
                needed.update(op.args)
        needed.add(0)
        remap: dict[int, int] = {}
        ops: list[Op] = []
        for op in self.ops:
            if op.id in needed:
                remap[op.id] = len(ops)
                ops.append(op.model_copy(update={"id": len(ops), "args": [remap[a] for a in op.args]}))
        used_operands = sorted({op.operand for op in ops if op.operand is not None})
        omap = {o: i for i, o in enumerate(used_operands)}
        ops = [
            op.model_copy(update={"operand": omap[op.operand]}) if op.operand is not None else op
            for op in ops
        ]
        assert self.spec is not None
        plan = ConvPlan(
            spec=self.spec,
            ops=ops,
            operands=[self.operands[o] for o in used_operands],
            output=remap[out.op],
            out_groups=[list(g) for g in out.dims],
            forward_args=forward_args,
            conv_input=self.conv_input,
            notes=self.notes,
        )
        plan.fold = find_norm_fold(plan)
        return plan
