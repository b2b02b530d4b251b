"""Reading a task's Model as "one convolution, then fusable work", with torch.fx.

`analyze_conv_model(model, inputs)` traces the forward symbolically (torch.fx), propagates the example
inputs' shapes through the graph, and walks it from the convolution to the output. Everything after
the convolution must be one of:
- pointwise ops (activations, arithmetic, clamps, comparisons, where) on the convolution's values and
  on tensors that do not depend on it (parameters, buffers, other forward inputs, scalars), broadcast
  onto the convolution's grid;
- reductions over channels (sum/mean/max/min, logsumexp, softmax and log-softmax over dim 1);
- pooling (max/avg with any kernel, stride, padding; adaptive pooling to size 1);
- reductions over spatial dims (sum/mean/max/min over any subset);
- normalisations (group, instance, batch in training or eval mode, layer norm over C and/or all
  spatial dims);
- views that only add, drop or (at the end) merge dims.
Anything else gives None (with the reason from `explain_conv_model`), and the writer keeps the torch
convolution instead.

`find_norm_fold(plan)` (run on every plan, stored as plan.fold) finds a normalisation whose value
reaches the output only through affine per-channel work and a sum or mean over every spatial dim.

Scalars from the model's own attributes (`self.scale = scale`) stay attribute reads in the generated
forward, so the program is right for every constructor argument, not only the analysed one.
"""

from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from kernelwright.providers.offline.conv_ir import (
    SPATIAL,
    Const,
    ConvPlan,
    ConvSpec,
    NormFold,
    Op,
    Operand,
    PoolPart,
)


class ConvUnsupported(Exception):
    """The model is not (one convolution + fusable work); the message says what was not supported."""


@dataclass
class ConvAnalysis:
    """A plan, or why there is none."""

    plan: ConvPlan | None
    reason: str = ""


# ---------------------------------------------------------------------------------------------------
# scalars that remember which attribute they came from


class _NamedFloat(float):
    kw_expr: str

    def __new__(cls, value: float, expr: str) -> _NamedFloat:
        obj = float.__new__(cls, value)
        obj.kw_expr = expr
        return obj


class _NamedInt(int):
    kw_expr: str

    def __new__(cls, value: int, expr: str) -> _NamedInt:
        obj = int.__new__(cls, value)
        obj.kw_expr = expr
        return obj


def _name_scalars(model: nn.Module) -> dict[str, Any]:
    """Replace the model's own int/float attributes by named twins; returns the originals."""
    saved: dict[str, Any] = {}
    for name, value in list(vars(model).items()):
        if name.startswith("_") or type(value) not in (int, float):
            continue
        saved[name] = value
        twin = (
            _NamedFloat(value, f"self.{name}") if type(value) is float else _NamedInt(value, f"self.{name}")
        )
        object.__setattr__(model, name, twin)
    return saved


def _restore_scalars(model: nn.Module, saved: dict[str, Any]) -> None:
    for name, value in saved.items():
        object.__setattr__(model, name, value)


def _const(value: Any) -> Const:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConvUnsupported(f"expected a number, got {type(value).__name__}")
    expr = getattr(value, "kw_expr", None) or repr(float(value))
    if expr in ("inf", "-inf", "nan"):
        expr = f"float('{expr}')"
    return Const(value=float(value), expr=expr)


def _expr(value: Any) -> str:
    """A Python expression for an int / tuple hyper-parameter (pool sizes, conv strides)."""
    if hasattr(value, "kw_expr"):
        return str(value.kw_expr)
    if isinstance(value, list | tuple):
        return "(" + ", ".join(_expr(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, bool) or value is None or isinstance(value, int | float | str):
        return repr(value)
    raise ConvUnsupported(f"hyper-parameter of type {type(value).__name__}")


def _tuple(value: Any, n: int) -> list[int]:
    if isinstance(value, int):
        return [int(value)] * n
    vals = [int(v) for v in value]
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise ConvUnsupported(f"expected {n} values, got {vals}")
    return vals


# ---------------------------------------------------------------------------------------------------
# values while walking the graph

Group = tuple[int, ...]  # the logical dims one actual dim runs over; () = a size-1 dim of its own


@dataclass
class _Chain:
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
class _Indep:
    """A tensor expression that does not depend on the convolution (parameters, inputs, constants).

    tree: ("leaf", expr, shape, pos, rank) | ("const", Const) | ("unary", fn, (tree,), consts) |
          ("binary", fn, (tree, tree)) | ("where", (tree, tree, tree))
    """

    tree: tuple
    shape: tuple[int, ...]


def _leaf(
    expr: str, shape: tuple[int, ...], pos: tuple[int | None, ...] | None = None, rank: int | None = None
) -> _Indep:
    """A tensor read by expression. `pos[j]` is where its dim j sits in a space of `rank` dims that is
    right-aligned with whatever it meets (None for size-1 dims); by default the tensor's own dims."""
    if pos is None:
        pos = tuple(j if s != 1 else None for j, s in enumerate(shape))
    rank = len(shape) if rank is None else rank
    view = [1] * rank
    for j, p in enumerate(pos):
        if p is not None:
            view[p] = shape[j]
    return _Indep(("leaf", expr, tuple(shape), tuple(pos), rank), tuple(view))


def _map_leaves(tree: tuple, fn: Any) -> tuple:
    if tree[0] == "leaf":
        return fn(tree)
    if tree[0] == "const":
        return tree
    if tree[0] == "unary":
        return ("unary", tree[1], (_map_leaves(tree[2][0], fn),), tree[3])
    if tree[0] == "binary":
        return ("binary", tree[1], tuple(_map_leaves(t, fn) for t in tree[2]))
    if tree[0] == "where":
        return ("where", tuple(_map_leaves(t, fn) for t in tree[1]))
    raise AssertionError(tree[0])


@dataclass
class _Tuple:
    items: list[Any]


class _Shape:
    """Sizes read from a tensor (x.size(0), x.shape): only feed views, whose result shapes we know."""


_UNARY_NAMES = {
    "relu": "relu", "relu_": "relu", "sigmoid": "sigmoid", "sigmoid_": "sigmoid", "tanh": "tanh",
    "tanh_": "tanh", "exp": "exp", "exp_": "exp", "log": "log", "log_": "log", "abs": "abs", "abs_": "abs",
    "neg": "neg", "negative": "neg", "neg_": "neg", "sqrt": "sqrt", "sqrt_": "sqrt", "rsqrt": "rsqrt",
    "reciprocal": "reciprocal", "square": "square", "erf": "erf", "sin": "sin", "cos": "cos",
    "floor": "floor", "ceil": "ceil", "silu": "silu", "mish": "mish", "hardswish": "hardswish",
    "hardsigmoid": "hardsigmoid", "relu6": "relu6", "selu": "selu", "logsigmoid": "logsigmoid",
    "softsign": "softsign", "tanhshrink": "tanhshrink",
}  # fmt: skip
_IDENTITY_NAMES = {"contiguous", "clone", "detach", "identity", "float"}
_BINARY_NAMES = {
    "add": "add", "add_": "add", "iadd": "add", "sub": "sub", "sub_": "sub", "subtract": "sub", "isub": "sub",
    "mul": "mul", "mul_": "mul", "multiply": "mul", "imul": "mul", "div": "div", "div_": "div",
    "divide": "div", "true_divide": "div", "itruediv": "div", "maximum": "maximum", "minimum": "minimum",
    "fmax": "maximum", "fmin": "minimum", "pow": "pow", "pow_": "pow", "gt": "gt", "lt": "lt", "ge": "ge",
    "le": "le", "eq": "eq", "ne": "ne", "greater": "gt", "less": "lt",
}  # fmt: skip
_REDUCE_NAMES = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "max": "max", "min": "min"}
_ACT_MODULES: dict[type, str] = {
    nn.ReLU: "relu", nn.ReLU6: "relu6", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu",
    nn.Mish: "mish", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.SELU: "selu",
    nn.LogSigmoid: "logsigmoid", nn.Softsign: "softsign", nn.Tanhshrink: "tanhshrink",
}  # fmt: skip
_CONV_MODULES: dict[type, tuple[int, bool]] = {
    nn.Conv1d: (1, False), nn.Conv2d: (2, False), nn.Conv3d: (3, False),
    nn.ConvTranspose1d: (1, True), nn.ConvTranspose2d: (2, True), nn.ConvTranspose3d: (3, True),
}  # fmt: skip
_CONV_FUNCTIONS = {
    "conv1d": (1, False), "conv2d": (2, False), "conv3d": (3, False),
    "conv_transpose1d": (1, True), "conv_transpose2d": (2, True), "conv_transpose3d": (3, True),
}  # fmt: skip


def _call_name(node: fx.Node) -> str:
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


def _arg(node: fx.Node, index: int, name: str, default: Any = None) -> Any:
    """A call's argument by position (counting the tensor itself for methods) or keyword."""
    if name in node.kwargs:
        return node.kwargs[name]
    if index < len(node.args):
        return node.args[index]
    return default


class _Analyzer:
    def __init__(self, model: nn.Module, inputs: list[Any]) -> None:
        self.model = model
        self.inputs = inputs
        self.ops: list[Op] = []
        self.operands: list[Operand] = []
        self.vals: dict[fx.Node, Any] = {}
        self.regions = 0
        self.region_src: dict[int, int] = {}  # region -> op whose value the region's stage loads raw
        self.spec: ConvSpec | None = None
        self.conv_input = ""
        self.notes: list[str] = []
        self.gm: fx.GraphModule | None = None
        self.own_attrs: set[str] = set()

    # ------------------------------------------------------------------ entry
    def run(self) -> ConvPlan:
        saved = _name_scalars(self.model)
        self.own_attrs = set(vars(self.model))
        try:
            try:
                gm = fx.symbolic_trace(self.model)
            except Exception as exc:
                raise ConvUnsupported(
                    f"torch.fx cannot trace the forward ({type(exc).__name__}: {exc})"
                ) from None
            self.gm = gm
            try:
                with torch.no_grad():
                    ShapeProp(gm).propagate(*self.inputs)
            except Exception as exc:
                raise ConvUnsupported(f"shape propagation failed ({type(exc).__name__}: {exc})") from None
            forward_args = self._forward_args()
            result = None
            for node in gm.graph.nodes:
                if node.op == "output":
                    result = node.args[0]
                    break
                self.vals[node] = self._visit(node)
        finally:
            _restore_scalars(self.model, saved)
            for name in set(vars(self.model)) - self.own_attrs:  # constants the tracer lifted onto it
                delattr(self.model, name)
        if self.spec is None:
            raise ConvUnsupported("no convolution in the forward")
        if not isinstance(result, fx.Node) or not isinstance(self.vals.get(result), _Chain):
            raise ConvUnsupported("the forward must return one tensor computed from the convolution")
        out = self.vals[result]
        flat = [d for g in out.dims for d in g]
        if flat != sorted(flat):
            raise ConvUnsupported("the output permutes dims")
        return self._finish(out, forward_args)

    def _forward_args(self) -> list[str]:
        sig = inspect.signature(self.model.forward)
        names = []
        for p in sig.parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise ConvUnsupported("forward takes *args/**kwargs or keyword-only arguments")
            names.append(p.name)
        if len(names) != len(self.inputs):
            raise ConvUnsupported(f"forward takes {len(names)} arguments, the inputs are {len(self.inputs)}")
        return names

    def _finish(self, out: _Chain, forward_args: list[str]) -> ConvPlan:
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

    # ------------------------------------------------------------------ helpers
    def _shape(self, node: Any) -> tuple[int, ...]:
        meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
        if meta is None or not hasattr(meta, "shape"):
            raise ConvUnsupported(f"no tensor shape for {node}")
        return tuple(int(s) for s in meta.shape)

    def _dtype(self, node: fx.Node) -> torch.dtype:
        return node.meta["tensor_meta"].dtype

    def _new_op(self, kind: str, args: list[int] | None = None, **kw: Any) -> int:
        op = Op(id=len(self.ops), kind=kind, args=args or [], **kw)  # type: ignore[arg-type]
        self.ops.append(op)
        return op.id

    def _value(self, arg: Any) -> Any:
        if isinstance(arg, fx.Node):
            if arg not in self.vals:
                raise ConvUnsupported(f"unknown value {arg}")
            return self.vals[arg]
        if isinstance(arg, bool):
            raise ConvUnsupported("boolean argument")
        if isinstance(arg, int | float):
            return _const(arg)
        raise ConvUnsupported(f"argument of type {type(arg).__name__}")

    def _standard_dims(self, ndim: int) -> list[Group]:
        dims: list[Group] = [(0,), (1,)]
        return dims + [(d,) for d in SPATIAL[3 - ndim :]]

    def _check_plain(self, v: _Chain, what: str) -> None:
        if any(len(g) > 1 for g in v.dims):
            raise ConvUnsupported(f"{what} after a view that merges dims")

    # ------------------------------------------------------------------ materialising operands
    def _materialize(self, ind: _Indep | Const, target: _Chain, shape: tuple[int, ...] | None = None) -> int:
        """Ops computing an independent expression on `target`'s grid (of `shape`, default the target's
        own); returns the op id."""
        if isinstance(ind, Const):
            return self._new_op("const", consts=[ind])
        tshape = shape or self._chain_shape(target)
        if len(ind.shape) > len(tshape):
            raise ConvUnsupported("an operand has more dims than the value it meets")
        return self._emit_tree(ind.tree, target, tshape)

    def _chain_shape(self, v: _Chain) -> tuple[int, ...]:
        return v.shape

    def _emit_tree(self, tree: tuple, target: _Chain, tshape: tuple[int, ...]) -> int:
        kind = tree[0]
        if kind == "const":
            return self._new_op("const", consts=[tree[1]])
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
            operand = Operand(expr=expr, align=align, kind=kind_)  # type: ignore[arg-type]
            if operand in self.operands:
                idx = self.operands.index(operand)
            else:
                idx = len(self.operands)
                self.operands.append(operand)
            return self._new_op("operand", operand=idx)
        if kind == "unary":
            a = self._emit_tree(tree[2][0], target, tshape)
            return self._new_op("unary", [a], consts=list(tree[3]), attrs={"fn": tree[1]})
        if kind == "binary":
            a = self._emit_tree(tree[2][0], target, tshape)
            b = self._emit_tree(tree[2][1], target, tshape)
            return self._new_op("binary", [a, b], attrs={"fn": tree[1]})
        if kind == "where":
            c, a, b = (self._emit_tree(t, target, tshape) for t in tree[1])
            return self._new_op("where", [c, a, b])
        raise AssertionError(kind)

    # ------------------------------------------------------------------ generic pointwise
    def _unary(self, node: fx.Node, fn: str, x: Any, consts: list[Const] | None = None) -> Any:
        consts = consts or []
        if isinstance(x, _Chain):
            self._check_plain(x, fn)
            op = self._new_op("unary", [x.op], consts=consts, attrs={"fn": fn}, cred=x.cred)
            return self._chain_like(x, op, node)
        if isinstance(x, _Indep):
            return _Indep(("unary", fn, (x.tree,), tuple(consts)), x.shape)
        if isinstance(x, Const):
            return _Indep(("unary", fn, (("const", x),), tuple(consts)), ())
        raise ConvUnsupported(f"{fn} of {type(x).__name__}")

    def _chain_like(self, x: _Chain, op: int, node: fx.Node, **changes: Any) -> _Chain:
        v = _Chain(op=op, dims=list(x.dims), region=x.region, cred=x.cred, sred=x.sred)
        for k, val in changes.items():
            setattr(v, k, val)
        v.shape = self._shape(node)
        return v

    def _binary(self, node: fx.Node, fn: str, a: Any, b: Any) -> Any:
        if not isinstance(a, _Chain) and not isinstance(b, _Chain):
            ta = a.tree if isinstance(a, _Indep) else ("const", a)
            tb = b.tree if isinstance(b, _Indep) else ("const", b)
            shape = self._shape(node) if isinstance(node, fx.Node) and "tensor_meta" in node.meta else ()
            return _Indep(("binary", fn, (ta, tb)), shape)
        out_shape = self._shape(node)
        if isinstance(a, _Chain) and isinstance(b, _Chain):
            region = self._common_region([a, b], fn)
            self._check_plain(a, fn)
            self._check_plain(b, fn)
            dims = self._broadcast_dims(a, b, out_shape)
            op = self._new_op("binary", [a.op, b.op], attrs={"fn": fn}, cred=a.cred and b.cred)
            v = _Chain(op=op, dims=dims, region=region, cred=a.cred and b.cred, sred=a.sred | b.sred)
            v.shape = out_shape
            return v
        chain, other = (a, b) if isinstance(a, _Chain) else (b, a)
        self._check_plain(chain, fn)
        cred = chain.cred
        if self._chain_shape(chain) != out_shape:
            if not self._channel_expansion(chain, out_shape):
                raise ConvUnsupported(f"{fn} with an operand that enlarges the convolution's value")
            # a per-channel operand spreads a channel-reduced value over the channels again
            cred = False
        oid = self._materialize(other, chain, out_shape)
        args = [chain.op, oid] if chain is a else [oid, chain.op]
        op = self._new_op("binary", args, attrs={"fn": fn}, cred=cred)
        return self._chain_like(chain, op, node, cred=cred)

    def _channel_expansion(self, chain: _Chain, out_shape: tuple[int, ...]) -> bool:
        """Whether `out_shape` is `chain` (reduced over channels) spread over the convolution's channels."""
        assert self.spec is not None
        shape = self._chain_shape(chain)
        if not chain.cred or len(shape) != len(out_shape):
            return False
        diff = [i for i, (x, y) in enumerate(zip(shape, out_shape, strict=True)) if x != y]
        return (
            len(diff) == 1
            and chain.dims[diff[0]] == (1,)
            and shape[diff[0]] == 1
            and out_shape[diff[0]] == self.spec.out_channels
        )

    def _common_region(self, values: list[_Chain], what: str) -> int:
        """The region values meet in. A normalisation's input may meet values after it: the stage
        after the normalisation loads that input anyway."""
        region = max(v.region for v in values)
        for v in values:
            if v.region != region and self.region_src.get(region) != v.op:
                raise ConvUnsupported(f"{what} combines values from before and after a pooling/reduction")
        return region

    def _broadcast_dims(self, a: _Chain, b: _Chain, out_shape: tuple[int, ...]) -> list[Group]:
        sa, sb = self._chain_shape(a), self._chain_shape(b)
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

    # ------------------------------------------------------------------ the walk
    def _visit(self, node: fx.Node) -> Any:
        if node.op == "placeholder":
            return self._placeholder(node)
        if node.op == "get_attr":
            value = self._attr(str(node.target))
            if not self._model_has(str(node.target)):
                # a constant the tracer lifted (torch.tensor(0.0) in the forward): ModelNew lacks it
                if isinstance(value, torch.Tensor) and value.numel() == 1 and value.is_floating_point():
                    return Const(value=float(value), expr=repr(float(value)))
                raise ConvUnsupported("a tensor constant created in the forward")
            if isinstance(value, torch.Tensor):
                return _leaf(f"self.{node.target}", tuple(value.shape))
            return _const(value)
        if node.op == "call_module":
            return self._module(node, self.gm.get_submodule(str(node.target)))  # type: ignore[union-attr]
        if node.op in ("call_function", "call_method"):
            return self._function(node, _call_name(node))
        raise ConvUnsupported(f"graph node {node.op}")

    def _model_has(self, target: str) -> bool:
        """Whether `target` is the model's own (not a constant the tracer lifted onto it)."""
        first = target.split(".")[0]
        m = self.model
        if first not in self.own_attrs and all(
            first not in d for d in (m._parameters, m._buffers, m._modules)
        ):
            return False
        obj: Any = m
        for part in target.split("."):
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True

    def _attr(self, target: str) -> Any:
        obj: Any = self.gm
        for part in target.split("."):
            obj = getattr(obj, part)
        return obj

    def _placeholder(self, node: fx.Node) -> Any:
        index = [n for n in self.gm.graph.nodes if n.op == "placeholder"].index(node)  # type: ignore[union-attr]
        example = self.inputs[index]
        if isinstance(example, torch.Tensor):
            shape = tuple(example.shape)
            return _leaf(str(node.target), shape)
        if isinstance(example, int | float) and not isinstance(example, bool):
            return Const(value=float(example), expr=str(node.target))
        raise ConvUnsupported(f"forward argument {node.target} of type {type(example).__name__}")

    def _check_inplace(self, node: fx.Node, inplace: bool) -> None:
        """An in-place op whose input is read again later would change that later read."""
        if not inplace:
            return
        src = node.args[0] if node.args else None
        if isinstance(src, fx.Node):
            later = [u for u in src.users if u is not node and self._after(u, node)]
            if later:
                raise ConvUnsupported("an in-place op whose input is used again afterwards")

    def _after(self, a: fx.Node, b: fx.Node) -> bool:
        for n in b.graph.nodes:
            if n is b:
                return True
            if n is a:
                return False
        return False

    # ------------------------------------------------------------------ modules
    def _module(self, node: fx.Node, mod: nn.Module) -> Any:
        t = str(node.target)
        if type(mod) in _CONV_MODULES:
            return self._conv_module(node, mod, t)
        x = self._value(node.args[0]) if node.args else None
        if isinstance(mod, nn.Identity):
            return x
        if type(mod) in _ACT_MODULES:
            self._check_inplace(node, bool(getattr(mod, "inplace", False)))
            return self._unary(node, _ACT_MODULES[type(mod)], x)
        if isinstance(mod, nn.GELU):
            return self._unary(node, "gelu_tanh" if mod.approximate == "tanh" else "gelu", x)
        if isinstance(mod, nn.LeakyReLU):
            self._check_inplace(node, mod.inplace)
            c = Const(value=float(mod.negative_slope), expr=f"self.{t}.negative_slope")
            return self._unary(node, "leaky_relu", x, [c])
        if isinstance(mod, nn.Hardtanh):  # ReLU6 is a Hardtanh too, but caught above
            lo = Const(value=float(mod.min_val), expr=f"self.{t}.min_val")
            hi = Const(value=float(mod.max_val), expr=f"self.{t}.max_val")
            return self._unary(node, "hardtanh", x, [lo, hi])
        if isinstance(mod, nn.ELU | nn.CELU):
            c = Const(value=float(mod.alpha), expr=f"self.{t}.alpha")
            return self._unary(node, "elu" if isinstance(mod, nn.ELU) else "celu", x, [c])
        if isinstance(mod, nn.Softplus):
            b = Const(value=float(mod.beta), expr=f"self.{t}.beta")
            th = Const(value=float(mod.threshold), expr=f"self.{t}.threshold")
            return self._unary(node, "softplus", x, [b, th])
        if isinstance(mod, nn.Dropout | nn.Dropout1d | nn.Dropout2d | nn.Dropout3d | nn.AlphaDropout):
            if mod.training and mod.p > 0:
                raise ConvUnsupported("dropout in training mode is random")
            return x
        if isinstance(mod, nn.Softmax | nn.LogSoftmax):
            return self._softmax(node, x, mod.dim, log=isinstance(mod, nn.LogSoftmax))
        if isinstance(mod, nn.MaxPool1d | nn.MaxPool2d | nn.MaxPool3d):
            if mod.ceil_mode or mod.return_indices:
                raise ConvUnsupported("max pooling with ceil_mode or indices")
            part = PoolPart(
                kernel=f"self.{t}.kernel_size",
                stride=f"self.{t}.stride",
                padding=f"self.{t}.padding",
                dilation=f"self.{t}.dilation",
            )
            nd = {nn.MaxPool1d: 1, nn.MaxPool2d: 2, nn.MaxPool3d: 3}[type(mod)]
            return self._pool(
                node, x, "max", part, nd, (mod.kernel_size, mod.stride, mod.padding, mod.dilation)
            )
        if isinstance(mod, nn.AvgPool1d | nn.AvgPool2d | nn.AvgPool3d):
            if mod.ceil_mode or getattr(mod, "divisor_override", None):
                raise ConvUnsupported("average pooling with ceil_mode or divisor_override")
            part = PoolPart(
                kernel=f"self.{t}.kernel_size",
                stride=f"self.{t}.stride",
                padding=f"self.{t}.padding",
                count_include_pad=bool(mod.count_include_pad),
            )
            nd = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}[type(mod)]
            return self._pool(node, x, "avg", part, nd, (mod.kernel_size, mod.stride, mod.padding, 1))
        if isinstance(mod, nn.AdaptiveAvgPool1d | nn.AdaptiveAvgPool2d | nn.AdaptiveAvgPool3d):
            return self._adaptive(node, x, "mean", mod.output_size)
        if isinstance(mod, nn.AdaptiveMaxPool1d | nn.AdaptiveMaxPool2d | nn.AdaptiveMaxPool3d):
            if mod.return_indices:
                raise ConvUnsupported("adaptive max pooling with indices")
            return self._adaptive(node, x, "max", mod.output_size)
        if isinstance(mod, nn.GroupNorm):
            w_expr = f"self.{t}.weight" if mod.affine else None
            b_expr = f"self.{t}.bias" if mod.affine else None
            return self._norm(node, x, "group", f"self.{t}.num_groups", f"self.{t}.eps", w_expr, b_expr)
        if isinstance(mod, nn.InstanceNorm1d | nn.InstanceNorm2d | nn.InstanceNorm3d):
            w_expr = f"self.{t}.weight" if mod.affine else None
            b_expr = f"self.{t}.bias" if mod.affine else None
            if mod.training or not mod.track_running_stats:
                return self._norm(node, x, "instance", "None", f"self.{t}.eps", w_expr, b_expr)
            return self._running_norm(node, x, t, mod.affine)
        if isinstance(mod, nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d):
            w_expr = f"self.{t}.weight" if mod.affine else None
            b_expr = f"self.{t}.bias" if mod.affine else None
            if mod.training or not mod.track_running_stats:
                # With running statistics, the program follows the module's mode: batch statistics and
                # their update in train mode, the running statistics in eval mode (conv_codegen).
                running = f"self.{t}" if mod.track_running_stats else None
                return self._norm(node, x, "batch", "None", f"self.{t}.eps", w_expr, b_expr, running=running)
            return self._running_norm(node, x, t, mod.affine)
        if isinstance(mod, nn.LayerNorm):
            w_expr = f"self.{t}.weight" if mod.elementwise_affine else None
            b_expr = f"self.{t}.bias" if (mod.elementwise_affine and mod.bias is not None) else None
            return self._layer_norm(node, x, len(mod.normalized_shape), f"self.{t}.eps", w_expr, b_expr)
        if isinstance(mod, nn.Flatten):
            return self._view(node, x)
        raise ConvUnsupported(f"module {type(mod).__name__}")

    def _conv_module(self, node: fx.Node, mod: nn.Module, t: str) -> Any:
        if self.spec is not None:
            raise ConvUnsupported("more than one convolution")
        ndim, transposed = _CONV_MODULES[type(mod)]
        if mod.padding_mode != "zeros":  # type: ignore[comparison-overlap]
            raise ConvUnsupported(f"padding_mode={mod.padding_mode}")
        if len(node.args) != 1 or node.kwargs:
            raise ConvUnsupported("a transposed convolution called with output_size")
        same = isinstance(mod.padding, str)
        if same and mod.padding == "same":  # type: ignore[comparison-overlap]
            padding = [d * (k - 1) // 2 for d, k in zip(mod.dilation, mod.kernel_size, strict=True)]  # type: ignore[arg-type]
        elif same:
            padding, same = [0] * ndim, False
        else:
            padding = list(mod.padding)  # type: ignore[arg-type]
        weight = mod.weight  # type: ignore[union-attr]
        spec = ConvSpec(
            ndim=ndim,  # type: ignore[arg-type]
            transposed=transposed,
            in_channels=int(mod.in_channels),  # type: ignore[arg-type]
            out_channels=int(mod.out_channels),  # type: ignore[arg-type]
            kernel_size=list(mod.kernel_size),  # type: ignore[arg-type]
            stride=list(mod.stride),  # type: ignore[arg-type]
            padding=padding,
            dilation=list(mod.dilation),  # type: ignore[arg-type]
            output_padding=list(getattr(mod, "output_padding", (0,) * ndim)),
            groups=int(mod.groups),  # type: ignore[arg-type]
            bias=mod.bias is not None,
            dtype=str(weight.dtype).removeprefix("torch."),  # type: ignore[union-attr]
            same_padding=same,
            module=t,
            weight=f"self.{t}.weight",
            bias_expr=f"self.{t}.bias" if mod.bias is not None else None,
        )
        return self._conv_value(node, spec, node.args[0])

    def _conv_function(self, node: fx.Node, name: str) -> Any:
        if self.spec is not None:
            raise ConvUnsupported("more than one convolution")
        ndim, transposed = _CONV_FUNCTIONS[name]
        w_node = _arg(node, 1, "weight")
        b_node = _arg(node, 2, "bias")
        if not isinstance(w_node, fx.Node) or w_node.op != "get_attr":
            raise ConvUnsupported("a functional convolution whose weight is not a parameter")
        if b_node is not None and (not isinstance(b_node, fx.Node) or b_node.op != "get_attr"):
            raise ConvUnsupported("a functional convolution whose bias is not a parameter")
        weight = self._attr(str(w_node.target))
        if transposed:
            stride = _arg(node, 3, "stride", 1)
            padding = _arg(node, 4, "padding", 0)
            out_pad = _arg(node, 5, "output_padding", 0)
            groups = _arg(node, 6, "groups", 1)
            dilation = _arg(node, 7, "dilation", 1)
        else:
            stride = _arg(node, 3, "stride", 1)
            padding = _arg(node, 4, "padding", 0)
            dilation = _arg(node, 5, "dilation", 1)
            groups = _arg(node, 6, "groups", 1)
            out_pad = 0
        if isinstance(padding, str):
            raise ConvUnsupported("string padding in a functional convolution")
        for v in (stride, padding, dilation, groups, out_pad):
            if isinstance(v, fx.Node):
                raise ConvUnsupported("convolution hyper-parameters computed in the forward")
        g = int(groups)
        spec = ConvSpec(
            ndim=ndim,  # type: ignore[arg-type]
            transposed=transposed,
            in_channels=int(weight.shape[0] if transposed else weight.shape[1] * g),
            out_channels=int(weight.shape[1] * g if transposed else weight.shape[0]),
            kernel_size=[int(k) for k in weight.shape[2:]],
            stride=_tuple(stride, ndim),
            padding=_tuple(padding, ndim),
            dilation=_tuple(dilation, ndim),
            output_padding=_tuple(out_pad, ndim),
            groups=g,
            bias=b_node is not None,
            dtype=str(weight.dtype).removeprefix("torch."),
            weight=f"self.{w_node.target}",
            bias_expr=f"self.{b_node.target}" if b_node is not None else None,
            hyper={
                "stride": _expr(stride),
                "padding": _expr(padding),
                "dilation": _expr(dilation),
                "groups": _expr(groups),
                "output_padding": _expr(out_pad),
            },
        )
        return self._conv_value(node, spec, node.args[0])

    def _conv_value(self, node: fx.Node, spec: ConvSpec, x_node: Any) -> _Chain:
        if not isinstance(x_node, fx.Node) or x_node.op != "placeholder":
            raise ConvUnsupported("the convolution's input is not a forward argument")
        x_dtype = self._dtype(x_node)
        if str(x_dtype).removeprefix("torch.") != spec.dtype:
            raise ConvUnsupported(f"input dtype {x_dtype} differs from the weight's {spec.dtype}")
        if spec.dtype not in ("float32", "float16", "bfloat16"):
            raise ConvUnsupported(f"dtype {spec.dtype}")
        if len(self._shape(x_node)) != spec.ndim + 2:
            raise ConvUnsupported("an unbatched convolution input")
        self.spec = spec
        self.conv_input = str(x_node.target)
        op = self._new_op("conv")
        if spec.bias_expr is not None:
            bias = self._new_op(
                "operand", operand=self._add_operand(Operand(expr=spec.bias_expr, align=[1], kind="channel"))
            )
            op = self._new_op("binary", [op, bias], attrs={"fn": "add"})
        v = _Chain(op=op, dims=self._standard_dims(spec.ndim), region=0)
        v.shape = self._shape(node)
        return v

    def _add_operand(self, operand: Operand) -> int:
        if operand in self.operands:
            return self.operands.index(operand)
        self.operands.append(operand)
        return len(self.operands) - 1

    # ------------------------------------------------------------------ functions and methods
    def _function(self, node: fx.Node, name: str) -> Any:
        if name in _CONV_FUNCTIONS:
            return self._conv_function(node, name)
        if name == "builtins.getattr":
            base = self._raw(node.args[0])
            if isinstance(base, _Tuple):
                if node.args[1] != "values":
                    raise ConvUnsupported("indices of a max/min reduction")
                return base.items[0]
            return _Shape()
        if name in ("size", "dim", "numel"):
            return _Shape()
        if name == "getitem":
            base = self._raw(node.args[0])
            if isinstance(base, _Tuple):
                idx = node.args[1]
                if idx != 0:
                    raise ConvUnsupported("indices of a max/min reduction")
                return base.items[0]
            if isinstance(base, _Shape):
                return _Shape()
            raise ConvUnsupported("indexing a tensor")
        args = node.args
        x = self._raw(args[0]) if args else None
        if isinstance(x, _Shape):
            return _Shape()
        inplace = name.endswith("_") or bool(node.kwargs.get("inplace", False))
        self._check_inplace(node, inplace)
        if name in _IDENTITY_NAMES:
            return self._value(args[0])
        if name in ("to", "type"):
            raise ConvUnsupported("dtype conversions")
        if name in _UNARY_NAMES:
            return self._unary(node, _UNARY_NAMES[name], self._value(args[0]))
        if name == "gelu":
            approx = _arg(node, 1, "approximate", "none")
            return self._unary(node, "gelu_tanh" if approx == "tanh" else "gelu", self._value(args[0]))
        if name in ("leaky_relu", "leaky_relu_"):
            slope = _arg(node, 1, "negative_slope", 0.01)
            return self._unary(node, "leaky_relu", self._value(args[0]), [_const(slope)])
        if name in ("hardtanh", "hardtanh_"):
            lo, hi = _arg(node, 1, "min_val", -1.0), _arg(node, 2, "max_val", 1.0)
            return self._unary(node, "hardtanh", self._value(args[0]), [_const(lo), _const(hi)])
        if name in ("elu", "elu_", "celu", "celu_"):
            alpha = _arg(node, 1, "alpha", 1.0)
            return self._unary(node, name.rstrip("_"), self._value(args[0]), [_const(alpha)])
        if name == "softplus":
            beta, th = _arg(node, 1, "beta", 1.0), _arg(node, 2, "threshold", 20.0)
            return self._unary(node, "softplus", self._value(args[0]), [_const(beta), _const(th)])
        if name in (
            "dropout",
            "dropout1d",
            "dropout2d",
            "dropout3d",
            "alpha_dropout",
            "feature_alpha_dropout",
        ):
            p, training = _arg(node, 1, "p", 0.5), _arg(node, 2, "training", True)
            if training and p > 0:
                raise ConvUnsupported("dropout in training mode is random")
            return self._value(args[0])
        if name in ("clamp", "clip", "clamp_", "clip_", "clamp_min", "clamp_max", "clamp_min_", "clamp_max_"):
            return self._clamp(node, name.rstrip("_"))
        if name == "rsub":
            a, b = self._value(args[0]), self._value(args[1])
            return self._binary(node, "sub", b, a)
        if name in _BINARY_NAMES:
            return self._binary_call(node, _BINARY_NAMES[name])
        if name in ("max", "min") and len(args) >= 2 and isinstance(args[1], fx.Node):
            return self._binary_call(node, "maximum" if name == "max" else "minimum")
        if name == "where":
            return self._where(node)
        if name in _REDUCE_NAMES:
            return self._reduce(node, name)
        if name == "logsumexp":
            return self._logsumexp(node)
        if name in ("softmax", "log_softmax", "_softmax"):
            dim = _arg(node, 1, "dim")
            return self._softmax(node, self._value(args[0]), dim, log=name == "log_softmax")
        if name in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
            return self._pool_function(node, name)
        if name.startswith("adaptive_avg_pool") or name.startswith("adaptive_max_pool"):
            out = _arg(node, 1, "output_size")
            if name.startswith("adaptive_max_pool") and _arg(node, 2, "return_indices", False):
                raise ConvUnsupported("adaptive max pooling with indices")
            return self._adaptive(node, self._value(args[0]), "mean" if "avg" in name else "max", out)
        if name == "group_norm":
            return self._group_norm_function(node)
        if name in ("batch_norm", "instance_norm", "layer_norm"):
            return self._norm_function(node, name)
        if name in ("view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as", "reshape_as"):
            return self._view(node, self._value(args[0]))
        raise ConvUnsupported(f"{node.op} {name}")

    def _raw(self, arg: Any) -> Any:
        if isinstance(arg, fx.Node):
            return self.vals.get(arg)
        return arg

    def _binary_call(self, node: fx.Node, fn: str) -> Any:
        a = self._value(node.args[0])
        b = self._value(_arg(node, 1, "other"))
        alpha = node.kwargs.get("alpha")
        if alpha is not None and fn in ("add", "sub"):
            scaled = self._binary_scalar_mul(b, _const(alpha), node)
            return self._binary(node, fn, a, scaled)
        if fn == "div" and node.kwargs.get("rounding_mode") is not None:
            raise ConvUnsupported("division with a rounding mode")
        return self._binary(node, fn, a, b)

    def _binary_scalar_mul(self, b: Any, c: Const, node: fx.Node) -> Any:
        if isinstance(b, _Chain):
            raise ConvUnsupported("add/sub with alpha on a convolution value")
        tb = b.tree if isinstance(b, _Indep) else ("const", b)
        shape = b.shape if isinstance(b, _Indep) else ()
        return _Indep(("binary", "mul", (tb, ("const", c))), shape)

    def _clamp(self, node: fx.Node, name: str) -> Any:
        x = self._value(node.args[0])
        if name == "clamp_min":
            lo, hi = _arg(node, 1, "min"), None
        elif name == "clamp_max":
            lo, hi = None, _arg(node, 1, "max")
        else:
            lo, hi = _arg(node, 1, "min"), _arg(node, 2, "max")
        if isinstance(lo, fx.Node) or isinstance(hi, fx.Node):  # tensor bounds: max/min with tensors
            out = x
            if lo is not None:
                out = self._binary(node, "maximum", out, self._value(lo))
            if hi is not None:
                out = self._binary(node, "minimum", out, self._value(hi))
            return out
        if lo is not None and hi is not None:
            return self._unary(node, "clamp", x, [_const(lo), _const(hi)])
        if lo is not None:
            return self._unary(node, "clamp_min", x, [_const(lo)])
        if hi is not None:
            return self._unary(node, "clamp_max", x, [_const(hi)])
        raise ConvUnsupported("clamp without bounds")

    def _where(self, node: fx.Node) -> Any:
        c, a, b = (self._value(_arg(node, i, n)) for i, n in enumerate(("condition", "input", "other")))
        chains = [v for v in (c, a, b) if isinstance(v, _Chain)]
        if not chains:
            trees = tuple(v.tree if isinstance(v, _Indep) else ("const", v) for v in (c, a, b))
            return _Indep(("where", trees), self._shape(node))
        region = self._common_region(chains, "where()")
        ref = next(v for v in chains if v.region == region)
        out_shape = self._shape(node)
        ids = []
        for v in (c, a, b):
            if isinstance(v, _Chain):
                self._check_plain(v, "where")
                ids.append(v.op)
            else:
                ids.append(self._materialize(v, ref))
        if any(self._chain_shape(v) != out_shape for v in chains):
            raise ConvUnsupported("where() broadcasts values of the convolution")
        op = self._new_op("where", ids, cred=all(v.cred for v in chains))
        return self._chain_like(ref, op, node, cred=all(v.cred for v in chains))

    # ------------------------------------------------------------------ reductions
    def _dims_arg(self, node: fx.Node, index: int, ndim: int) -> list[int] | None:
        dim = _arg(node, index, "dim")
        if dim is None:
            return None
        dims = [dim] if isinstance(dim, int) else list(dim)
        return sorted({int(d) % ndim for d in dims})

    def _reduce(self, node: fx.Node, name: str) -> Any:
        x = self._value(node.args[0])
        if not isinstance(x, _Chain):
            raise ConvUnsupported(f"{name} of a tensor independent of the convolution")
        ndim = len(x.dims)
        dims = self._dims_arg(node, 1, ndim)
        if dims is None:
            raise ConvUnsupported(f"{name} over every dim (including the batch)")
        keepdim = bool(_arg(node, 2, "keepdim", False))
        fn = _REDUCE_NAMES[name]
        result = self._reduce_dims(node, x, fn, dims, keepdim)
        if name in ("max", "min"):
            return _Tuple([result])
        return result

    def _reduce_dims(self, node: fx.Node, x: _Chain, fn: str, dims: list[int], keepdim: bool) -> _Chain:
        self._check_plain(x, fn)
        logical = [x.dims[d][0] for d in dims if x.dims[d]]
        if 0 in logical:
            raise ConvUnsupported(f"{fn} over the batch dim")
        v = x
        op = v.op
        cred, sred, region = v.cred, set(v.sred), v.region
        if 1 in logical and not v.cred:
            op = self._new_op("creduce", [op], attrs={"fn": fn}, cred=True)
            cred = True
        spatial = sorted(d for d in logical if d != 1 and d not in v.sred)
        if spatial:
            self.regions += 1
            region = self.regions
            op = self._new_op("sreduce", [op], attrs={"fn": fn, "dims": spatial}, cred=cred)
            sred |= set(spatial)
        new_dims = list(x.dims) if keepdim else [g for i, g in enumerate(x.dims) if i not in dims]
        out = _Chain(op=op, dims=new_dims, region=region, cred=cred, sred=frozenset(sred))
        out.shape = tuple(
            1 if (keepdim and i in dims) else s for i, s in enumerate(x.shape) if keepdim or i not in dims
        )
        return out

    def _logsumexp(self, node: fx.Node) -> Any:
        x = self._value(node.args[0])
        if not isinstance(x, _Chain):
            raise ConvUnsupported("logsumexp of a tensor independent of the convolution")
        self._check_plain(x, "logsumexp")
        dims = self._dims_arg(node, 1, len(x.dims)) or []
        logical = [x.dims[d][0] for d in dims if x.dims[d]]
        if logical != [1] or x.cred:
            raise ConvUnsupported("logsumexp over dims other than the channels")
        keepdim = bool(_arg(node, 2, "keepdim", False))
        m = self._new_op("creduce", [x.op], attrs={"fn": "max"}, cred=True)
        d = self._new_op("binary", [x.op, m], attrs={"fn": "sub"})
        e = self._new_op("unary", [d], attrs={"fn": "exp"})
        s = self._new_op("creduce", [e], attrs={"fn": "sum"}, cred=True)
        lg = self._new_op("unary", [s], attrs={"fn": "log"}, cred=True)
        op = self._new_op("binary", [lg, m], attrs={"fn": "add"}, cred=True)
        new_dims = list(x.dims) if keepdim else [g for i, g in enumerate(x.dims) if i not in dims]
        out = _Chain(op=op, dims=new_dims, region=x.region, cred=True, sred=x.sred)
        out.shape = self._shape(node)
        return out

    def _softmax(self, node: fx.Node, x: Any, dim: Any, *, log: bool) -> Any:
        if not isinstance(x, _Chain):
            raise ConvUnsupported("softmax of a tensor independent of the convolution")
        self._check_plain(x, "softmax")
        if dim is None:
            raise ConvUnsupported("softmax without dim")
        d = int(dim) % len(x.dims)
        if x.dims[d] != (1,) or x.cred:
            raise ConvUnsupported("softmax over a dim other than the channels")
        m = self._new_op("creduce", [x.op], attrs={"fn": "max"}, cred=True)
        sh = self._new_op("binary", [x.op, m], attrs={"fn": "sub"})
        e = self._new_op("unary", [sh], attrs={"fn": "exp"})
        s = self._new_op("creduce", [e], attrs={"fn": "sum"}, cred=True)
        if log:
            lg = self._new_op("unary", [s], attrs={"fn": "log"}, cred=True)
            op = self._new_op("binary", [sh, lg], attrs={"fn": "sub"})
        else:
            op = self._new_op("binary", [e, s], attrs={"fn": "div"})
        return self._chain_like(x, op, node)

    # ------------------------------------------------------------------ pooling
    def _require_standard(self, x: Any, what: str) -> _Chain:
        if not isinstance(x, _Chain):
            raise ConvUnsupported(f"{what} of a tensor independent of the convolution")
        assert self.spec is not None
        if x.dims != self._standard_dims(self.spec.ndim):
            raise ConvUnsupported(f"{what} on a value whose dims are not (N, C, spatial...)")
        return x

    def _pool(self, node: fx.Node, x: Any, kind: str, part: PoolPart, nd: int, values: tuple) -> _Chain:
        x = self._require_standard(x, f"{kind} pooling")
        assert self.spec is not None
        if nd != self.spec.ndim:
            raise ConvUnsupported(f"{nd}-D pooling after a {self.spec.ndim}-D convolution")
        kernel, stride, padding, dilation = values
        k = _tuple(kernel, nd)
        s = _tuple(stride if stride not in (None, ()) else kernel, nd)
        p, d = _tuple(padding, nd), _tuple(dilation, nd)
        prev = self.ops[x.op]
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
            return self._chain_like(x, x.op, node)
        self.regions += 1
        op = self._new_op("pool", [x.op], attrs={"kind": kind, "parts": [info]})
        return self._chain_like(x, op, node, region=self.regions)

    def _pool_function(self, node: fx.Node, name: str) -> Any:
        nd = int(name[-2])
        x = self._value(node.args[0])
        kernel = _arg(node, 1, "kernel_size")
        stride = _arg(node, 2, "stride")
        padding = _arg(node, 3, "padding", 0)
        if name.startswith("max"):
            dilation = _arg(node, 4, "dilation", 1)
            if _arg(node, 5, "ceil_mode", False) or _arg(node, 6, "return_indices", False):
                raise ConvUnsupported("max pooling with ceil_mode or indices")
            part = PoolPart(
                kernel=_expr(kernel),
                stride=_expr(stride if stride not in (None, [], ()) else kernel),
                padding=_expr(padding),
                dilation=_expr(dilation),
            )
            return self._pool(node, x, "max", part, nd, (kernel, stride, padding, dilation))
        if _arg(node, 4, "ceil_mode", False) or _arg(node, 6, "divisor_override"):
            raise ConvUnsupported("average pooling with ceil_mode or divisor_override")
        include = bool(_arg(node, 5, "count_include_pad", True))
        part = PoolPart(
            kernel=_expr(kernel),
            stride=_expr(stride if stride not in (None, [], ()) else kernel),
            padding=_expr(padding),
            count_include_pad=include,
        )
        return self._pool(node, x, "avg", part, nd, (kernel, stride, padding, 1))

    def _adaptive(self, node: fx.Node, x: Any, fn: str, output_size: Any) -> Any:
        x = self._require_standard(x, "adaptive pooling")
        assert self.spec is not None
        sizes = [output_size] if isinstance(output_size, int) or output_size is None else list(output_size)
        if any(s not in (1,) for s in sizes):
            raise ConvUnsupported("adaptive pooling to a size other than 1")
        dims = list(range(2, 2 + self.spec.ndim))
        return self._reduce_dims(node, x, fn, dims, keepdim=True)

    # ------------------------------------------------------------------ normalisation
    def _norm(
        self, node: fx.Node, x: Any, kind: str, groups: str, eps: str, weight: str | None, bias: str | None,
        running: str | None = None,
    ) -> Any:  # fmt: skip
        """`running`: the BatchNorm module (as an expression) whose running statistics the program keeps."""
        x = self._require_standard(x, f"{kind} norm")
        if x.cred:
            raise ConvUnsupported("a normalisation after a channel reduction")
        self.regions += 1
        self.region_src[self.regions] = x.op
        attrs = {"kind": kind, "groups": groups, "eps": eps}
        if running is not None:
            attrs["running"] = running
        op = self._new_op("norm", [x.op], attrs=attrs)
        v = self._chain_like(x, op, node, region=self.regions)
        for expr, fn in ((weight, "mul"), (bias, "add")):
            if expr is None:
                continue
            tensor = self._eval_expr(expr)
            if tensor is None:
                continue
            leaf = _leaf(expr, tuple(tensor.shape))
            if kind in ("group", "instance", "batch") and tensor.dim() == 1:
                # Per-channel affine parameters: shape (C,) broadcast as (C, 1, ...).
                leaf = _leaf(expr, tuple(tensor.shape), (0,), len(v.dims) - 1)
            v = self._binary_on(node, fn, v, leaf)
        return v

    def _binary_on(self, node: fx.Node, fn: str, v: _Chain, leaf: _Indep) -> _Chain:
        oid = self._materialize(leaf, v)
        op = self._new_op("binary", [v.op, oid], attrs={"fn": fn})
        return self._chain_like(v, op, node)

    def _eval_expr(self, expr: str) -> torch.Tensor | None:
        obj: Any = self.model
        for part in expr.removeprefix("self.").split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj if isinstance(obj, torch.Tensor) else None

    def _running_norm(self, node: fx.Node, x: Any, t: str, affine: bool) -> Any:
        """Eval-mode batch/instance norm: (x - running_mean) / sqrt(running_var + eps) * w + b."""
        x = self._require_standard(x, "normalisation")
        nd = len(x.dims) - 2

        def leaf(name: str) -> _Indep:
            size = int(self._eval_expr(f"self.{t}.{name}").shape[0])  # type: ignore[union-attr]
            return _leaf(f"self.{t}.{name}", (size,), (0,), 1 + nd)

        eps = Const(value=float(self._attr(t).eps), expr=f"self.{t}.eps")
        var = _Indep(("binary", "add", (leaf("running_var").tree, ("const", eps))), leaf("running_var").shape)
        inv = _Indep(("unary", "rsqrt", (var.tree,), ()), var.shape)
        v = self._binary_on(node, "sub", x, leaf("running_mean"))
        v = self._binary_on(node, "mul", v, inv)
        if affine:
            v = self._binary_on(node, "mul", v, leaf("weight"))
            v = self._binary_on(node, "add", v, leaf("bias"))
        return v

    def _layer_norm(
        self, node: fx.Node, x: Any, n_norm: int, eps: str, weight: str | None, bias: str | None
    ) -> Any:
        x = self._require_standard(x, "layer norm")
        nd = len(x.dims)
        covered = [g[0] for g in x.dims[nd - n_norm :]]
        spatial = [g[0] for g in x.dims[2:]]
        if covered == [1, *spatial]:
            kind = "layer"
        elif covered == spatial:
            kind = "instance"
        else:
            raise ConvUnsupported("layer norm over dims other than (C, spatial...) or (spatial...)")
        return self._norm(node, x, kind, "1" if kind == "layer" else "None", eps, weight, bias)

    def _group_norm_function(self, node: fx.Node) -> Any:
        x = self._value(node.args[0])
        groups = _arg(node, 1, "num_groups")
        weight, bias = _arg(node, 2, "weight"), _arg(node, 3, "bias")
        eps = _arg(node, 4, "eps", 1e-5)
        return self._norm(
            node,
            x,
            "group",
            _expr(groups),
            _const(eps).expr,
            self._param_expr(weight),
            self._param_expr(bias),
        )

    def _param_expr(self, arg: Any) -> str | None:
        if arg is None:
            return None
        if isinstance(arg, fx.Node) and arg.op == "get_attr":
            return f"self.{arg.target}"
        raise ConvUnsupported("normalisation parameters that are not parameters of the model")

    def _norm_function(self, node: fx.Node, name: str) -> Any:
        x = self._value(node.args[0])
        if name == "layer_norm":
            shape = _arg(node, 1, "normalized_shape")
            n_norm = 1 if isinstance(shape, int) else len(shape)
            weight, bias = _arg(node, 2, "weight"), _arg(node, 3, "bias")
            eps = _arg(node, 4, "eps", 1e-5)
            return self._layer_norm(
                node, x, n_norm, _const(eps).expr, self._param_expr(weight), self._param_expr(bias)
            )
        if name == "batch_norm":
            weight, bias = _arg(node, 3, "weight"), _arg(node, 4, "bias")
            training = _arg(node, 5, "training", False)
            eps = _arg(node, 7, "eps", 1e-5)
            if not training:
                raise ConvUnsupported("functional batch norm in eval mode")
            return self._norm(
                node, x, "batch", "None", _const(eps).expr, self._param_expr(weight), self._param_expr(bias)
            )
        weight, bias = _arg(node, 3, "weight"), _arg(node, 4, "bias")
        if not _arg(node, 5, "use_input_stats", True):
            raise ConvUnsupported("functional instance norm with running statistics")
        eps = _arg(node, 7, "eps", 1e-5)
        return self._norm(
            node, x, "instance", "None", _const(eps).expr, self._param_expr(weight), self._param_expr(bias)
        )

    # ------------------------------------------------------------------ views
    def _view_indep(self, x: _Indep, new: tuple[int, ...]) -> _Indep:
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

        return _Indep(_map_leaves(x.tree, move), tuple(new))

    def _view(self, node: fx.Node, x: Any) -> Any:
        if not isinstance(x, _Chain):
            if isinstance(x, _Indep):
                return self._view_indep(x, self._shape(node))
            raise ConvUnsupported("a view of a non-tensor")
        s_in = self._chain_shape(x)
        s_out = self._shape(node)
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
        v = _Chain(op=x.op, dims=out, region=x.region, cred=x.cred, sred=x.sred)
        v.shape = s_out
        return v


# ---------------------------------------------------------------------------------------------------
# a normalisation that only feeds a full spatial sum or mean

_FOLD_NORMS = ("group", "instance", "batch", "layer")


def find_norm_fold(plan: ConvPlan) -> NormFold | None:
    """The normalisation whose effect reaches the output only through a sum or mean over every spatial
    dim, with nothing in between but work affine in the normalised value, or None.

    Affine work: +, - of such values or of values constant over the spatial dims, *, / (as numerator)
    by a value constant over the spatial dims, negation, and sums or means over channels. A value is
    constant over the spatial dims when it is built from scalars and per-channel tensors only (not
    from the convolution). Such work commutes with the spatial mean, so the reduction equals the work
    applied to each (sample, channel)'s mean of the normalised value (see conv_ir.NormFold). Work
    after the reduction is unrestricted (it reads the reduced buffer as before).
    """
    ops = plan.ops
    users: dict[int, list[int]] = {op.id: [] for op in ops}
    for op in ops:
        for a in op.args:
            users[a].append(op.id)
    static: dict[int, bool] = {}

    def is_static(i: int) -> bool:
        """The value is built from scalars and per-channel tensors only."""
        if i not in static:
            op = ops[i]
            if op.kind == "const":
                static[i] = True
            elif op.kind == "operand":
                static[i] = op.operand is not None and plan.operands[op.operand].kind in ("scalar", "channel")
            elif op.kind in ("unary", "binary", "where"):
                static[i] = bool(op.args) and all(is_static(a) for a in op.args)
            else:
                static[i] = False
        return static[i]

    spatial = set(SPATIAL[3 - plan.spec.ndim :])
    for norm in ops:
        if norm.kind != "norm" or norm.attrs.get("kind") not in _FOLD_NORMS:
            continue
        path = {norm.id}  # values affine in the normalised value
        reduce: Op | None = None
        ok = True
        for op in ops[norm.id + 1 :]:
            on = [a for a in op.args if a in path]
            if not on:
                continue
            rest = [a for a in op.args if a not in path]
            if op.kind == "sreduce":
                if reduce is not None or op.attrs.get("fn") not in ("sum", "mean"):
                    ok = False
                elif not set(op.attrs.get("dims", [])) >= spatial:
                    ok = False
                reduce = op
                break
            fn = op.attrs.get("fn")
            if op.kind == "creduce":
                ok = fn in ("sum", "mean")
            elif op.kind == "unary":
                ok = fn == "neg"
            elif op.kind == "binary":
                if not all(is_static(a) for a in rest):
                    ok = False
                elif fn in ("add", "sub"):
                    ok = True
                elif fn == "mul":
                    ok = len(on) == 1
                elif fn == "div":
                    ok = len(on) == 1 and op.args[0] in path
                else:
                    ok = False
            else:
                ok = False
            if not ok:
                break
            path.add(op.id)
        if not ok or reduce is None:
            continue
        # nothing but the reduction may read the affine values (a later use would need every element)
        if any(u not in path and u != reduce.id for p in path for u in users[p]):
            continue
        return NormFold(norm=norm.id, reduce=reduce.id)
    return None


def explain_conv_model(model: nn.Module, inputs: list[Any] | tuple[Any, ...]) -> ConvAnalysis:
    """Like analyze_conv_model, with the reason when the model is not supported."""
    try:
        return ConvAnalysis(plan=_Analyzer(model, list(inputs)).run())
    except ConvUnsupported as exc:
        return ConvAnalysis(plan=None, reason=str(exc))


def analyze_conv_model(model: nn.Module, inputs: list[Any] | tuple[Any, ...]) -> ConvPlan | None:
    """The model's forward as one convolution plus fusable work, or None when it is not of that form.

    `inputs` are example forward inputs (small ones are best: the forward is run once for shapes).
    The model is not changed.
    """
    return explain_conv_model(model, inputs).plan


_ = operator  # operator names are matched by string in _call_name
