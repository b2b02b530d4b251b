"""Lowering a traced forward (pre-dispatch aten ops, symbolic sizes) into the writer's IR (ir.py).

Each aten op has a handler that builds IR values through `Lowerer`'s helpers. High-level ops are
decomposed here, the way a person would write them in Triton: softmax is a max, an exp and a sum over a
row; layer norm a mean and a variance; cross entropy a log-softmax and a pick of the target column
(a sum of `where(column == target, ...)`, which stays in the same row kernel). Ops the writer does not
write (convolutions, pooling, concatenation, ...) become `opaque` values, kept as torch calls.

In-place ops (`x.add_(y)`) are read as their functional form: the tracer already routes later uses to the
in-place op's result. An in-place write into a view would change another tensor behind the graph's back,
so it is refused (`LoweringError`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import sympy
import torch
import torch.fx as fx

from kernelwright.providers.offline.ir import (
    Graph,
    Shape,
    SymScalar,
    Value,
    aligned,
    broadcast_shapes,
    is_one,
    promote,
)

aten = torch.ops.aten


class LoweringError(ValueError):
    """The forward uses something the writer cannot express; the message is one line."""


_HANDLERS: dict[str, Callable[..., Any]] = {}


def handles(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for n in names:
            _HANDLERS[n] = fn
        return fn

    return deco


# Unary pointwise aten ops whose IR op has the same name.
_SAME_UNARY = (
    "neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sin cos tan tanh sigmoid relu silu "
    "mish erf erfc floor ceil trunc sign logical_not isnan isinf isfinite atan asin acos sinh cosh asinh "
    "acosh atanh square frac"
).split()
_SAME_BINARY = {
    "mul": "mul", "maximum": "maximum", "minimum": "minimum", "fmax": "maximum", "fmin": "minimum",
    "atan2": "atan2", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le", "not_equal": "ne",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor",
    "remainder": "remainder", "fmod": "fmod", "xlogy": "xlogy", "hypot": "hypot", "copysign": "copysign",
    "logaddexp": "logaddexp", "true_divide": "div", "multiply": "mul",
}  # fmt: skip
_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
            "isnan", "isinf", "isfinite"}  # fmt: skip
_IDENTITY_OPS = {
    "clone",
    "contiguous",
    "alias",
    "detach",
    "lift_fresh_copy",
    "lift_fresh",
    "_assert_tensor_metadata",
}
_REDUCTION_NONE, _REDUCTION_MEAN, _REDUCTION_SUM = 0, 1, 2


def _to_sym(x: Any) -> sympy.Expr:
    if isinstance(x, torch.SymInt | torch.SymFloat):
        return sympy.sympify(x.node.expr)
    if isinstance(x, SymScalar):
        return x.expr
    return sympy.sympify(x)


class Lowerer:
    """Walks an fx graph of aten ops and builds the IR graph."""

    def __init__(self, gm: fx.GraphModule, var_to_val: dict[sympy.Symbol, int]) -> None:
        self.gm = gm
        self.g = Graph(var_to_val)
        self.env: dict[fx.Node, Any] = {}
        self.node: fx.Node | None = None

    # ---- entry -------------------------------------------------------------------------------------
    def run(self, placeholders: list[tuple[str, str]]) -> Graph:
        """`placeholders`: (kind, name) per fx placeholder, kind "param" (qualified name) or "input"."""
        ph = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(ph) != len(placeholders):
            raise LoweringError(f"traced {len(ph)} inputs, expected {len(placeholders)}")
        for node, (kind, name) in zip(ph, placeholders, strict=True):
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                shape = tuple(_to_sym(d) for d in val.shape)
                v = self.g.add(kind, name, (), shape, val.dtype, {"name": name})
                (self.g.params if kind == "param" else self.g.inputs).append(v)
                for i, d in enumerate(shape):
                    if isinstance(d, sympy.Symbol) and d not in self.g.sym_sources:
                        self.g.sym_sources[d] = (v, i)
                self.env[node] = v
            else:
                # A non-tensor forward argument: traced as a constant.
                self.env[node] = (
                    val if not isinstance(val, torch.SymInt | torch.SymFloat) else SymScalar(_to_sym(val))
                )
                self.g.inputs.append(
                    self.g.add("input", name, (), (), torch.float32, {"name": name, "scalar": True})
                )
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                continue
            if node.op == "output":
                outs = node.args[0]
                outs = list(outs) if isinstance(outs, list | tuple) else [outs]
                self.g.outputs = [self._as_value(self.env[o] if isinstance(o, fx.Node) else o) for o in outs]
                continue
            if node.op == "get_attr":
                raise LoweringError(f"the forward reads a constant tensor ({node.target}); not supported")
            if node.op != "call_function":
                raise LoweringError(f"unsupported graph node {node.op} {node.target}")
            self.env[node] = self._lower_call(node)
        self.g.prune()
        return self.g

    # ---- args --------------------------------------------------------------------------------------
    def _arg(self, a: Any) -> Any:
        if isinstance(a, fx.Node):
            if a in self.env:
                return self.env[a]
            raise LoweringError(f"value {a.name} used before it is defined")
        if isinstance(a, list | tuple):
            return type(a)(self._arg(x) for x in a)
        return a

    def _sym_value(self, node: fx.Node) -> Any:
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
            e = _to_sym(val)
            if e.is_number:
                return bool(e) if isinstance(val, torch.SymBool) else (int(e) if e.is_Integer else float(e))
            if isinstance(val, torch.SymBool):
                raise LoweringError("the forward branches on a symbolic size")
            return SymScalar(e, isinstance(val, torch.SymFloat))
        if isinstance(val, int | float | bool):
            return val
        raise LoweringError(f"cannot read the scalar {node.name}")

    def _lower_call(self, node: fx.Node) -> Any:
        target = node.target
        if target is operator.getitem:
            base = self._arg(node.args[0])
            idx = int(node.args[1])  # type: ignore[arg-type]
            if isinstance(base, tuple | list):
                return base[idx]
            if isinstance(base, Value) and base.kind == "opaque":
                return self._item(base, idx)
            raise LoweringError("indexing a tensor result that is not a tuple")
        if not isinstance(target, torch._ops.OpOverload):
            # Size arithmetic (operator.mul on SymInts, sym_float, ...): its value is in the node's meta.
            return self._sym_value(node)
        packet = target.overloadpacket.__name__
        if packet in ("sym_size", "sym_numel", "sym_stride", "sym_storage_offset", "size", "numel"):
            val = node.meta.get("val")
            if isinstance(val, list | tuple):
                return type(val)(_to_sym(v) if isinstance(v, torch.SymInt) else v for v in val)
            return self._sym_value(node)
        inplace = packet.endswith("_") and not packet.endswith("__")
        name = packet[:-1] if inplace else packet
        args = self._bind(target, node)
        if inplace and name not in ("copy",):
            dst = args.get("self")
            if isinstance(dst, Value) and dst.kind == "view":
                raise LoweringError(f"in-place {packet} writes into a view of another tensor")
        before = len(self.g.values)
        handler = _HANDLERS.get(name)
        if handler is None:
            if name in _SAME_UNARY:
                out = self.pw(name, args["self"])
            elif name in _SAME_BINARY:
                out = self.pw(_SAME_BINARY[name], args["self"], args["other"])
            else:
                out = self.opaque(target, node)
        else:
            out = handler(self, args, target)
        for v in self.g.values[before:]:
            if not v.origin:
                v.origin = name
        self._check_shape(node, out)
        return out

    def _bind(self, target: torch._ops.OpOverload, node: fx.Node) -> dict[str, Any]:
        schema = target._schema
        out: dict[str, Any] = {}
        pos = [a for a in schema.arguments if not a.kwarg_only]
        for a, v in zip(pos, node.args, strict=False):
            out[a.name] = self._arg(v)
        for k, v in node.kwargs.items():
            out[k] = self._arg(v)
        for a in schema.arguments:
            if a.name not in out and a.has_default_value():
                out[a.name] = a.default_value
        return out

    def _check_shape(self, node: fx.Node, out: Any) -> None:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and isinstance(out, Value):
            want = tuple(self.g.hint(_to_sym(d)) for d in val.shape)
            got = self.g.hints(out.shape)
            if want != got:
                raise LoweringError(f"internal: {node.target} lowered to shape {got}, traced {want}")

    def meta_shape(self) -> Shape:
        assert self.node is not None
        val = self.node.meta["val"]
        return tuple(_to_sym(d) for d in val.shape)

    def meta_dtype(self) -> torch.dtype:
        assert self.node is not None
        return self.node.meta["val"].dtype

    # ---- builders ----------------------------------------------------------------------------------
    def _as_value(self, a: Any) -> Value:
        if isinstance(a, Value):
            return a
        if isinstance(a, bool | int | float | SymScalar):
            return self.full((), a, _scalar_dtype(a))
        raise LoweringError(f"unexpected output {type(a).__name__}")

    def _scalar_of(self, a: Any) -> Any:
        """A 0-d constant value folds into a plain scalar argument."""
        if isinstance(a, Value) and a.kind == "pw" and a.op == "full" and a.rank == 0:
            return a.attrs["value"]
        return a

    def full(self, shape: Shape, value: Any, dtype: torch.dtype) -> Value:
        return self.g.add("pw", "full", (), shape, dtype, {"value": value})

    def pw(self, op: str, *args: Any, dtype: torch.dtype | None = None, attrs: dict | None = None) -> Value:
        args = tuple(self._scalar_of(a) for a in args)
        tensors = [a for a in args if isinstance(a, Value)]
        if not tensors:
            # All-scalar arithmetic (rare): a 0-d tensor holding the op applied to constants.
            tensors = [self._as_value(args[0])]
            args = (tensors[0],) + args[1:]
        shape = broadcast_shapes(*(t.shape for t in tensors))
        if dtype is None:
            dtype = _result_dtype(op, args)
        return self.g.add("pw", op, args, shape, dtype, attrs)

    def cast(self, x: Any, dtype: torch.dtype) -> Any:
        if isinstance(x, Value) and x.dtype == dtype:
            return x
        if not isinstance(x, Value):
            return float(x) if dtype.is_floating_point else x
        return self.pw("cast", x, dtype=dtype)

    def reduce(self, op: str, x: Value, dims: Any, keepdim: bool, dtype: torch.dtype | None = None) -> Value:
        x = self._as_value(x)
        rank = x.rank
        dl = _norm_dims(dims, rank)
        if rank == 0:
            dl = []
        if not dl and op in ("argmax", "argmin") and rank > 0:
            # argmax over all elements of an N-d tensor: flatten first (a contiguous view).
            flat = self.reshape(x, (_prod(x.shape),))
            return self.reduce(op, flat, [0], False, dtype)
        if not dl and rank > 0:
            dl = list(range(rank))
        shape = tuple(
            (sympy.Integer(1) if i in dl else d) for i, d in enumerate(x.shape) if keepdim or i not in dl
        )
        if dtype is None:
            if op in ("argmax", "argmin"):
                dtype = torch.int64
            elif op in ("any", "all"):
                dtype = torch.bool
            elif op == "numel":
                dtype = torch.float32
            elif op in ("sum", "prod") and not x.dtype.is_floating_point:
                dtype = torch.int64
            else:
                dtype = x.dtype
        return self.g.add("reduce", op, (x,), shape, dtype, {"dims": tuple(dl), "keepdim": keepdim})

    def scan(self, op: str, x: Value, dim: int, dtype: torch.dtype | None = None) -> Value:
        dim = _norm_dims([dim], x.rank)[0] if x.rank else 0
        if dtype is None:
            dtype = x.dtype if x.dtype.is_floating_point else torch.int64
        return self.g.add("scan", op, (x,), x.shape, dtype, {"dim": dim})

    def reshape(self, x: Value, shape: Any) -> Value:
        x = self._as_value(x)
        raw = [_to_sym(s) for s in shape]
        shape = _resolve_reshape(x.shape, raw, self.g)
        if self.g.hints(shape) == self.g.hints(x.shape) and all(
            sympy.simplify(a - b) == 0 for a, b in zip(shape, x.shape, strict=True)
        ):
            return x
        # The glue prints -1 where the source had it: always right, whatever the sizes.
        infer = next((i for i, r in enumerate(raw) if r == -1), None)
        return self.g.add("view", "reshape", (x,), shape, x.dtype, {"shape": shape, "infer": infer})

    def unsqueeze(self, x: Value, dim: int) -> Value:
        dim = dim + x.rank + 1 if dim < 0 else dim
        shape = list(x.shape)
        shape.insert(dim, sympy.Integer(1))
        return self.reshape(x, shape)

    def squeeze(self, x: Value, dims: Any = None) -> Value:
        dl = set(range(x.rank)) if dims is None else set(_norm_dims(dims, x.rank))
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
        shape = [_to_sym(s) for s in shape]
        xs = aligned(x.shape, len(shape))
        out = tuple(xs[i] if (s == -1) else s for i, s in enumerate(shape))
        if self.g.hints(out) == self.g.hints(x.shape) and len(out) == x.rank:
            return x
        return self.g.add("view", "expand", (x,), out, x.dtype, {"shape": out})

    def slice(self, x: Value, dim: int, start: Any, end: Any, step: int = 1) -> Value:
        dim = _norm_dims([dim], x.rank)[0]
        size = x.shape[dim]
        start = 0 if start is None else _to_sym(start)
        end = size if end is None else _to_sym(end)
        if isinstance(end, sympy.Integer) and int(end) >= 2**62:
            end = size
        start = _clamp_index(start, size, self.g)
        end = _clamp_index(end, size, self.g)
        if start == 0 and sympy.simplify(end - size) == 0 and step == 1:
            return x
        length = sympy.Max(sympy.Integer(0), (end - start + step - 1) // step) if step != 1 else end - start
        length = sympy.simplify(length)
        shape = list(x.shape)
        shape[dim] = length
        return self.g.add("view", "slice", (x,), tuple(shape), x.dtype,
                          {"dim": dim, "start": start, "end": end, "step": step})  # fmt: skip

    def select(self, x: Value, dim: int, index: Any) -> Value:
        dim = _norm_dims([dim], x.rank)[0]
        shape = tuple(d for i, d in enumerate(x.shape) if i != dim)
        return self.g.add("view", "select", (x,), shape, x.dtype, {"dim": dim, "index": _to_sym(index)})

    def matmul2(self, a: Value, b: Value, out_dtype: torch.dtype | None = None) -> Value:
        """a[..., M, K] @ b[..., K, N] with broadcast batch dims (both at least 2-d)."""
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        shape = tuple(batch) + (a.shape[-2], b.shape[-1])
        dtype = out_dtype or promote(a.dtype, b.dtype)
        if is_one(b.shape[-1]) and b.rank == 2 and a.shape[-1] != 1:
            # A matrix-vector product: memory-bound, written as a row reduction (one dot per row).
            prod = self.pw("mul", a, self.reshape(b, (sympy.Integer(1), b.shape[0])))
            return self.reshape(self.reduce("sum", prod, [-1], True, dtype), shape)
        if is_one(a.shape[-2]) and a.rank == 2 and b.rank == 2:
            prod = self.pw("mul", self.reshape(a, (a.shape[-1], sympy.Integer(1))), b)
            return self.reduce("sum", prod, [0], True, dtype)
        return self.g.add("matmul", "mm", (a, b), shape, dtype)

    def matmul(self, a: Value, b: Value) -> Value:
        """torch.matmul semantics, including 1-d operands."""
        if a.rank == 1 and b.rank == 1:
            return self.reduce("sum", self.pw("mul", a, b), [0], False)
        if b.rank == 1:
            return self.reduce("sum", self.pw("mul", a, b), [-1], False)
        if a.rank == 1:
            out = self.matmul2(self.reshape(a, (sympy.Integer(1), a.shape[0])), b)
            return self.squeeze(out, [-2])
        return self.matmul2(a, b)

    def opaque(self, target: torch._ops.OpOverload, node: fx.Node, *, without: str | None = None) -> Any:
        """The op kept as a torch call; `without` names an optional argument passed as None instead
        (its work is then done in Triton by the caller)."""
        args = self._arg(tuple(node.args))
        kwargs = {k: self._arg(v) for k, v in node.kwargs.items()}
        if without is not None:
            pos = [a.name for a in target._schema.arguments if not a.kwarg_only]
            i = pos.index(without)
            if i < len(args):
                args = args[:i] + (None,) + args[i + 1 :]
            kwargs.pop(without, None)
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            shape = tuple(_to_sym(d) for d in val.shape)
            return self.g.add(
                "opaque", str(target), args, shape, val.dtype, {"target": target, "kwargs": kwargs}
            )
        if isinstance(val, list | tuple) and all(isinstance(t, torch.Tensor) for t in val):
            base = self.g.add("opaque", str(target), args, (), torch.float32,
                              {"target": target, "kwargs": kwargs, "multi": [(tuple(_to_sym(d) for d in t.shape), t.dtype) for t in val]})  # fmt: skip
            return tuple(self._item(base, i) for i in range(len(val)))
        raise LoweringError(f"unsupported op {target} (result {type(val).__name__})")

    def _item(self, base: Value, idx: int) -> Value:
        shape, dtype = base.attrs["multi"][idx]
        return self.g.add("view", "item", (base,), shape, dtype, {"index": idx})

    def apply_reduction(self, v: Value, reduction: int) -> Value:
        if reduction == _REDUCTION_NONE:
            return v
        return self.reduce("mean" if reduction == _REDUCTION_MEAN else "sum", v, None, False)


# ---- small helpers ---------------------------------------------------------------------------------


def _scalar_dtype(a: Any) -> torch.dtype:
    if isinstance(a, bool):
        return torch.bool
    if isinstance(a, int):
        return torch.int64
    if isinstance(a, SymScalar):
        return torch.float32 if a.is_float else torch.int64
    return torch.float32


def _result_dtype(op: str, args: tuple) -> torch.dtype:
    if op in _COMPARE:
        return torch.bool
    tensors = [a for a in args if isinstance(a, Value)]
    dt = promote(*(t.dtype for t in tensors))
    scalars = [a for a in args if not isinstance(a, Value)]
    if not dt.is_floating_point and any(
        isinstance(s, float) or (isinstance(s, SymScalar) and s.is_float) for s in scalars
    ):
        dt = torch.float32
    if (
        dt == torch.bool
        and op in ("add", "sub", "mul")
        and any(isinstance(s, int) and not isinstance(s, bool) for s in scalars)
    ):
        dt = torch.int64
    if op in ("div", "sqrt", "rsqrt", "exp", "log", "sigmoid", "tanh", "erf") and not dt.is_floating_point:
        dt = torch.float32
    return dt


def _norm_dims(dims: Any, rank: int) -> list[int]:
    if dims is None:
        return []
    if isinstance(dims, int):
        dims = [dims]
    out = []
    for d in dims:
        d = int(d)
        out.append(d + rank if d < 0 else d)
    return sorted(set(out)) if len(out) > 1 else out


def _prod(shape: Shape) -> sympy.Expr:
    p: sympy.Expr = sympy.Integer(1)
    for d in shape:
        p = p * d
    return p


def _clamp_index(i: sympy.Expr, size: sympy.Expr, g: Graph) -> sympy.Expr:
    i = sympy.sympify(i)
    if i.is_number and int(i) < 0:
        return sympy.simplify(size + i)
    hi, hs = g.hint(i), g.hint(size)
    return size if hi >= hs else i


def _resolve_reshape(src: Shape, target: list[sympy.Expr], g: Graph) -> Shape:
    """Fill in -1 and re-express sizes that tracing fixed to numbers in terms of the source's sizes.

    A constructor argument used as a view size (`x.view(-1, self.dim)`) reaches the trace as a number.
    Where a target size equals the product of a run of source sizes (matched on the traced values), the
    symbolic product is used instead, so the program still works when the sizes change.
    """
    total = _prod(src)
    if any(t == -1 for t in target):
        known = _prod(tuple(t for t in target if t != -1))
        target = [sympy.simplify(total / known) if t == -1 else t for t in target]
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
        if j - j0 == 1 and out[j0].is_number:
            out[j0] = _prod(src[i0:i])
    return tuple(sympy.sympify(t) for t in out)


def _dims_arg(a: dict, key: str = "dim") -> Any:
    d = a.get(key)
    if d is None or (isinstance(d, list | tuple) and len(d) == 0):
        return None
    return d


# ---- handlers --------------------------------------------------------------------------------------


@handles("add", "sub", "rsub")
def _add(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__.rstrip("_")
    x, y = a["self"], a["other"]
    alpha = a.get("alpha", 1)
    if alpha not in (1, None):
        y = L.pw("mul", y, alpha) if isinstance(y, Value) else y * alpha
    if name == "rsub":
        return L.pw("sub", y, x)
    return L.pw(name, x, y)


@handles("div")
def _div(L: Lowerer, a: dict, target: Any) -> Value:
    mode = a.get("rounding_mode")
    op = {None: "div", "trunc": "truncdiv", "floor": "floordiv"}[mode]
    return L.pw(op, a["self"], a["other"])


@handles("floor_divide")
def _floor_divide(L: Lowerer, a: dict, target: Any) -> Value:
    return L.pw("floordiv", a["self"], a["other"])


@handles("pow", "float_power")
def _pow(L: Lowerer, a: dict, target: Any) -> Value:
    base = a.get("self")
    exp = a.get("exponent")
    return L.pw("pow", base, exp)


@handles("where")
def _where(L: Lowerer, a: dict, target: Any) -> Value:
    cond, x, y = a["condition"], a["self"], a["other"]
    dtype = L.meta_dtype()
    return L.pw("where", cond, x, y, dtype=dtype)


@handles("masked_fill")
def _masked_fill(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    return L.pw("where", a["mask"], a["value"], x, dtype=x.dtype)


@handles("clamp", "clip")
def _clamp(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    lo, hi = a.get("min"), a.get("max")
    if lo is not None:
        x = L.pw("maximum", x, lo)
    if hi is not None:
        x = L.pw("minimum", x, hi)
    return x


@handles("clamp_min")
def _clamp_min(L: Lowerer, a: dict, target: Any) -> Value:
    return L.pw("maximum", a["self"], a["min"])


@handles("clamp_max")
def _clamp_max(L: Lowerer, a: dict, target: Any) -> Value:
    return L.pw("minimum", a["self"], a["max"])


@handles("gelu")
def _gelu(L: Lowerer, a: dict, target: Any) -> Value:
    return L.pw("gelu_tanh" if a.get("approximate") == "tanh" else "gelu", a["self"])


@handles("relu6")
def _relu6(L: Lowerer, a: dict, target: Any) -> Value:
    return L.pw("minimum", L.pw("maximum", a["self"], 0.0), 6.0)


@handles("hardtanh")
def _hardtanh(L: Lowerer, a: dict, target: Any) -> Value:
    return L.pw("minimum", L.pw("maximum", a["self"], a.get("min_val", -1.0)), a.get("max_val", 1.0))


@handles("leaky_relu")
def _leaky_relu(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    slope = a.get("negative_slope", 0.01)
    return L.pw("where", L.pw("gt", x, 0.0), x, L.pw("mul", x, slope), dtype=x.dtype)


@handles("elu", "selu", "celu")
def _elu(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__.rstrip("_")
    x = a["self"]
    if name == "selu":
        alpha, scale, in_scale = 1.6732632423543772, 1.0507009873554805, 1.0
    elif name == "celu":
        alpha = a.get("alpha", 1.0)
        scale, in_scale = 1.0, 1.0 / alpha
    else:
        alpha, scale, in_scale = a.get("alpha", 1.0), a.get("scale", 1.0), a.get("input_scale", 1.0)
    neg = L.pw("mul", L.pw("expm1", L.pw("mul", x, in_scale)), alpha * scale)  # SymScalars multiply too
    return L.pw("where", L.pw("gt", x, 0.0), L.pw("mul", x, scale), neg, dtype=x.dtype)


@handles("hardsigmoid")
def _hardsigmoid(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    return L.pw("div", L.pw("minimum", L.pw("maximum", L.pw("add", x, 3.0), 0.0), 6.0), 6.0)


@handles("hardswish")
def _hardswish(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    return L.pw("div", L.pw("mul", x, L.pw("minimum", L.pw("maximum", L.pw("add", x, 3.0), 0.0), 6.0)), 6.0)


@handles("softplus")
def _softplus(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    beta, threshold = a.get("beta", 1.0), a.get("threshold", 20.0)
    bx = L.pw("mul", x, beta) if beta != 1 else x
    soft = L.pw("softplus", bx)
    if beta != 1:
        soft = L.pw("div", soft, beta)
    return L.pw("where", L.pw("gt", bx, threshold), x, soft, dtype=x.dtype)


@handles("log_sigmoid_forward", "log_sigmoid")
def _log_sigmoid(L: Lowerer, a: dict, target: Any) -> Any:
    x = a["self"]
    out = L.pw("neg", L.pw("softplus", L.pw("neg", x)))
    if target.overloadpacket.__name__ == "log_sigmoid_forward":
        return (out, L.full((0,), 0.0, x.dtype))
    return out


@handles("softshrink", "hardshrink")
def _shrink(L: Lowerer, a: dict, target: Any) -> Value:
    x, lam = a["self"], a.get("lambd", 0.5)
    big = L.pw("gt", L.pw("abs", x), lam)
    if target.overloadpacket.__name__ == "hardshrink":
        return L.pw("where", big, x, 0.0, dtype=x.dtype)
    shrunk = L.pw("sub", x, L.pw("mul", L.pw("sign", x), lam))
    return L.pw("where", big, shrunk, 0.0, dtype=x.dtype)


@handles("threshold")
def _threshold(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    return L.pw("where", L.pw("gt", x, a["threshold"]), x, a["value"], dtype=x.dtype)


@handles("round")
def _round(L: Lowerer, a: dict, target: Any) -> Value:
    if a.get("decimals", 0):
        raise LoweringError("round with decimals is not supported")
    return L.pw("round", a["self"])


@handles("sgn")
def _sgn(L: Lowerer, a: dict, target: Any) -> Value:
    return L.pw("sign", a["self"])


@handles("bitwise_not")
def _bitwise_not(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    if x.dtype != torch.bool:
        raise LoweringError("bitwise_not on integers is not supported")
    return L.pw("logical_not", x)


@handles("lerp")
def _lerp(L: Lowerer, a: dict, target: Any) -> Value:
    x, end, w = a["self"], a["end"], a["weight"]
    return L.pw("add", x, L.pw("mul", w, L.pw("sub", end, x)))


@handles("addcmul", "addcdiv")
def _addc(L: Lowerer, a: dict, target: Any) -> Value:
    op = "mul" if target.overloadpacket.__name__.startswith("addcmul") else "div"
    t = L.pw(op, a["tensor1"], a["tensor2"])
    v = a.get("value", 1)
    if v != 1:
        t = L.pw("mul", t, v)
    return L.pw("add", a["self"], t)


@handles("nan_to_num")
def _nan_to_num(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    info = torch.finfo(x.dtype) if x.dtype.is_floating_point else None
    if info is None:
        return x
    nan = a.get("nan") or 0.0
    posinf = a.get("posinf")
    neginf = a.get("neginf")
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    y = L.pw("where", L.pw("isnan", x), nan, x, dtype=x.dtype)
    y = L.pw("where", L.pw("eq", x, math.inf), posinf, y, dtype=x.dtype)
    return L.pw("where", L.pw("eq", x, -math.inf), neginf, y, dtype=x.dtype)


@handles("to", "_to_copy", "type_as", "_to_dtype")
def _to(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    dtype = L.meta_dtype()
    return L.cast(x, dtype) if isinstance(x, Value) else L.full((), x, dtype)


@handles(*_IDENTITY_OPS)
def _identity(L: Lowerer, a: dict, target: Any) -> Any:
    if target.overloadpacket.__name__ == "_assert_tensor_metadata":
        return None
    return a["self"]


@handles("copy")
def _copy(L: Lowerer, a: dict, target: Any) -> Value:
    dst, src = a["self"], a["src"]
    if isinstance(dst, Value) and dst.kind == "view":
        raise LoweringError("in-place copy into a view of another tensor")
    v = L.cast(src, dst.dtype) if isinstance(src, Value) else L.full(dst.shape, src, dst.dtype)
    return L.expand(v, dst.shape) if v.shape != dst.shape else v


@handles("fill", "zero")
def _fill(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    value = 0 if target.overloadpacket.__name__.startswith("zero") else a["value"]
    return L.full(x.shape, L._scalar_of(value), x.dtype)


@handles("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "native_dropout")
def _dropout(L: Lowerer, a: dict, target: Any) -> Any:
    x = a["input"] if "input" in a else a["self"]
    p, train = a.get("p", 0.5), a.get("train", True)
    if p != 0 and train:
        raise LoweringError("dropout with p > 0 in training mode is random; not supported")
    if target.overloadpacket.__name__ == "native_dropout":
        return (x, L.full(x.shape, True, torch.bool))
    return x


# ---- constants -------------------------------------------------------------------------------------


@handles("scalar_tensor")
def _scalar_tensor(L: Lowerer, a: dict, target: Any) -> Value:
    return L.full((), a["s"], L.meta_dtype())


@handles("full", "zeros", "ones", "empty", "new_full", "new_zeros", "new_ones", "new_empty", "empty_strided")
def _full(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__
    value = {"zeros": 0, "ones": 1, "new_zeros": 0, "new_ones": 1}.get(name, a.get("fill_value", 0))
    return L.full(L.meta_shape(), L._scalar_of(value), L.meta_dtype())


@handles("full_like", "zeros_like", "ones_like", "empty_like")
def _full_like(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__
    value = {"zeros_like": 0, "ones_like": 1, "empty_like": 0}.get(name, a.get("fill_value", 0))
    x = a["self"]
    return L.full(x.shape, L._scalar_of(value), L.meta_dtype())


@handles("arange")
def _arange(L: Lowerer, a: dict, target: Any) -> Value:
    start, step = a.get("start", 0), a.get("step", 1)
    if step != 1 or start != 0:
        raise LoweringError("arange with a start or step is not supported")
    shape = L.meta_shape()
    return L.g.add("pw", "iota", (), shape, L.meta_dtype(), {"dim": 0})


# ---- reductions ------------------------------------------------------------------------------------


@handles("sum", "mean", "amax", "amin", "prod", "any", "all", "nansum")
def _reduce(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__
    op = {"amax": "max", "amin": "min", "nansum": "sum"}.get(name, name)
    x = a["self"]
    dims = _dims_arg(a)
    keepdim = bool(a.get("keepdim", False))
    out_dtype = L.meta_dtype()
    if x.dtype != out_dtype and op in ("sum", "mean", "prod") and out_dtype.is_floating_point:
        x = L.cast(x, out_dtype)
    if name == "nansum":
        x = L.pw("where", L.pw("isnan", x), 0.0, x, dtype=x.dtype)
    return L.reduce(op, x, dims, keepdim, out_dtype)


@handles("max", "min")
def _max(L: Lowerer, a: dict, target: Any) -> Any:
    name = target.overloadpacket.__name__
    overload = target._overloadname
    x = a["self"]
    if "other" in a and overload in ("other", "binary"):
        return L.pw("maximum" if name == "max" else "minimum", x, a["other"])
    if "dim" in a and overload in ("dim",):
        keep = bool(a.get("keepdim", False))
        vals = L.reduce(name, x, [a["dim"]], keep)
        idx = L.reduce("arg" + name, x, [a["dim"]], keep)
        return (vals, idx)
    return L.reduce(name, x, None, False)


@handles("argmax", "argmin")
def _argmax(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__
    x = a["self"]
    dim = a.get("dim")
    keep = bool(a.get("keepdim", False))
    if dim is None:
        return L.reduce(name, x, None, False)
    return L.reduce(name, x, [dim], keep)


@handles("count_nonzero")
def _count_nonzero(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    return L.reduce("sum", L.cast(L.pw("ne", x, 0), torch.int64), _dims_arg(a), False, torch.int64)


def _var(L: Lowerer, x: Value, dims: Any, correction: float, keepdim: bool) -> tuple[Value, Value]:
    """(variance, mean); the mean is kept (keepdim) for the subtraction and squeezed for the result."""
    if not x.dtype.is_floating_point:
        x = L.cast(x, torch.float32)
    mean = L.reduce("mean", x, dims, True)
    d = L.pw("sub", x, mean)
    ss = L.reduce("sum", L.pw("mul", d, d), dims, True)
    n = L.reduce("numel", x, dims, True)
    denom = L.pw("maximum", L.pw("sub", n, float(correction)), 0.0) if correction else n
    var = L.pw("div", ss, denom)
    if not keepdim:
        var = L.squeeze(var, _norm_dims(dims, x.rank) or list(range(x.rank)))
        mean = L.squeeze(mean, _norm_dims(dims, x.rank) or list(range(x.rank)))
    return var, mean


def _correction(a: dict) -> float:
    if a.get("correction") is not None:
        return float(a["correction"])
    if "unbiased" in a and a["unbiased"] is not None:
        return 1.0 if a["unbiased"] else 0.0
    return 1.0


@handles("var", "std", "var_mean", "std_mean")
def _var_h(L: Lowerer, a: dict, target: Any) -> Any:
    name = target.overloadpacket.__name__
    var, mean = _var(L, a["self"], _dims_arg(a), _correction(a), bool(a.get("keepdim", False)))
    out = L.pw("sqrt", var) if name.startswith("std") else var
    return (out, mean) if name.endswith("_mean") else out


def _vector_norm(L: Lowerer, x: Value, ord_: Any, dims: Any, keepdim: bool) -> Value:
    ord_ = 2.0 if ord_ is None else float(ord_)
    if not x.dtype.is_floating_point:
        x = L.cast(x, torch.float32)
    ax = L.pw("abs", x)
    if ord_ == math.inf:
        return L.reduce("max", ax, dims, keepdim)
    if ord_ == -math.inf:
        return L.reduce("min", ax, dims, keepdim)
    if ord_ == 0:
        return L.reduce("sum", L.cast(L.pw("ne", x, 0.0), x.dtype), dims, keepdim)
    if ord_ == 1:
        return L.reduce("sum", ax, dims, keepdim)
    if ord_ == 2:
        return L.pw("sqrt", L.reduce("sum", L.pw("mul", x, x), dims, keepdim))
    return L.pw("pow", L.reduce("sum", L.pw("pow", ax, ord_), dims, keepdim), 1.0 / ord_)


@handles("linalg_vector_norm")
def _linalg_vector_norm(L: Lowerer, a: dict, target: Any) -> Value:
    return _vector_norm(L, a["self"], a.get("ord", 2), _dims_arg(a), bool(a.get("keepdim", False)))


@handles("norm")
def _norm(L: Lowerer, a: dict, target: Any) -> Value:
    p = a.get("p", 2)
    if isinstance(p, str):
        if p != "fro":
            raise LoweringError(f"norm with p={p!r} is not supported")
        p = 2
    return _vector_norm(L, a["self"], p, _dims_arg(a), bool(a.get("keepdim", False)))


@handles("frobenius_norm")
def _frobenius_norm(L: Lowerer, a: dict, target: Any) -> Value:
    return _vector_norm(L, a["self"], 2, _dims_arg(a), bool(a.get("keepdim", False)))


@handles("logsumexp")
def _logsumexp(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    if not x.dtype.is_floating_point:
        x = L.cast(x, torch.float32)
    dims = _dims_arg(a)
    keepdim = bool(a.get("keepdim", False))
    m = L.reduce("max", x, dims, True)
    # torch masks infinite maxima to 0 so an all -inf row gives -inf rather than NaN.
    m0 = L.pw("where", L.pw("eq", L.pw("abs", m), math.inf), 0.0, m, dtype=m.dtype)
    s = L.reduce("sum", L.pw("exp", L.pw("sub", x, m0)), dims, True)
    out = L.pw("add", L.pw("log", s), m0)
    if not keepdim:
        out = L.squeeze(out, _norm_dims(dims, x.rank) or list(range(x.rank)))
    return out


def _softmax(L: Lowerer, x: Value, dim: int, log: bool, dtype: torch.dtype) -> Value:
    if x.dtype != torch.float32 and dtype == torch.float32:
        x = L.cast(x, torch.float32)
    if x.rank == 0:
        return L.full((), 0.0 if log else 1.0, dtype)
    m = L.reduce("max", x, [dim], True)
    z = L.pw("sub", x, m)
    e = L.pw("exp", z)
    s = L.reduce("sum", e, [dim], True)
    out = L.pw("sub", z, L.pw("log", s)) if log else L.pw("div", e, s)
    return L.cast(out, dtype)


@handles("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax")
def _softmax_h(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__
    return _softmax(L, a["self"], a["dim"], "log" in name, L.meta_dtype())


# ---- normalization ---------------------------------------------------------------------------------


def _normalize(L: Lowerer, x: Value, dims: list[int], eps: float) -> tuple[Value, Value, Value]:
    """((x - mean) * rstd, mean, rstd) over `dims`, mean and rstd kept as size-1 dims."""
    xf = L.cast(x, torch.float32) if x.dtype != torch.float32 else x
    mean = L.reduce("mean", xf, dims, True)
    d = L.pw("sub", xf, mean)
    var = L.reduce("mean", L.pw("mul", d, d), dims, True)
    rstd = L.pw("rsqrt", L.pw("add", var, eps))
    return L.pw("mul", d, rstd), mean, rstd


@handles("layer_norm", "native_layer_norm")
def _layer_norm(L: Lowerer, a: dict, target: Any) -> Any:
    x = a["input"]
    k = len(a["normalized_shape"])
    dims = list(range(x.rank - k, x.rank))
    y, mean, rstd = _normalize(L, x, dims, a.get("eps", 1e-5))
    if a.get("weight") is not None:
        y = L.pw("mul", y, a["weight"])
    if a.get("bias") is not None:
        y = L.pw("add", y, a["bias"])
    y = L.cast(y, x.dtype)
    if target.overloadpacket.__name__ == "native_layer_norm":
        return (y, mean, rstd)
    return y


@handles("rms_norm", "_fused_rms_norm")
def _rms_norm(L: Lowerer, a: dict, target: Any) -> Any:
    x = a["input"]
    k = len(a["normalized_shape"])
    dims = list(range(x.rank - k, x.rank))
    eps = a.get("eps")
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    xf = L.cast(x, torch.float32) if x.dtype != torch.float32 else x
    ms = L.reduce("mean", L.pw("mul", xf, xf), dims, True)
    rstd = L.pw("rsqrt", L.pw("add", ms, eps))
    y = L.pw("mul", xf, rstd)
    if a.get("weight") is not None:
        y = L.pw("mul", y, a["weight"])
    y = L.cast(y, x.dtype)
    if target.overloadpacket.__name__ == "_fused_rms_norm":
        return (y, rstd)
    return y


@handles("group_norm", "native_group_norm")
def _group_norm(L: Lowerer, a: dict, target: Any) -> Any:
    x = a["input"]
    g_raw = a["group"] if "group" in a else a["num_groups"]
    groups = g_raw.expr if isinstance(g_raw, SymScalar) else sympy.Integer(int(g_raw))
    n, c = x.shape[0], x.shape[1]
    rest = _prod(x.shape[2:])
    per = sympy.floor(c / groups)
    one = sympy.Integer(1)
    xs = L.reshape(x, (n, groups, per, rest))
    y, mean, rstd = _normalize(L, xs, [2, 3], a.get("eps", 1e-5))
    w, b = a.get("weight"), a.get("bias")
    if w is not None:
        y = L.pw("mul", y, L.reshape(w, (one, groups, per, one)))
    if b is not None:
        y = L.pw("add", y, L.reshape(b, (one, groups, per, one)))
    y = L.reshape(L.cast(y, x.dtype), x.shape)
    if target.overloadpacket.__name__ == "native_group_norm":
        return (y, L.reshape(mean, (n, groups)), L.reshape(rstd, (n, groups)))
    return y


def _running_module(rm: Any, rv: Any) -> str | None:
    """The module path ("bn", "block.norm") whose running_mean and running_var these parameters are."""
    if not (isinstance(rm, Value) and isinstance(rv, Value) and rm.kind == "param" and rv.kind == "param"):
        return None
    a, b = str(rm.attrs.get("name", "")), str(rv.attrs.get("name", ""))
    if not (a.endswith(".running_mean") and b.endswith(".running_var")):
        return None
    path = a.removesuffix(".running_mean")
    return path if path == b.removesuffix(".running_var") and path else None


def _channel_view(L: Lowerer, p: Value, rank: int) -> Value:
    return L.reshape(p, (sympy.Integer(1), p.shape[0]) + (sympy.Integer(1),) * (rank - 2))


@handles("batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "native_batch_norm",
         "_batch_norm_with_update", "_native_batch_norm_legit_functional", "instance_norm")  # fmt: skip
def _batch_norm(L: Lowerer, a: dict, target: Any) -> Any:
    name = target.overloadpacket.__name__
    x = a["input"]
    w, b = a.get("weight"), a.get("bias")
    rm, rv = a.get("running_mean"), a.get("running_var")
    eps = a.get("eps", 1e-5)
    if name == "instance_norm":
        use_batch = a.get("use_input_stats", True)
        dims = list(range(2, x.rank))
    else:
        use_batch = bool(a.get("training", True)) or name == "_batch_norm_with_update" or rm is None
        if name == "_native_batch_norm_legit_no_training":
            use_batch = False
        dims = [0] + list(range(2, x.rank))
    module = _running_module(rm, rv) if use_batch and name != "instance_norm" else None
    if module is not None:
        # A BatchNorm module with running statistics follows its own mode at run time, as PyTorch's does:
        # batch statistics in train mode (and the running ones updated from them after the kernels,
        # emit_module), the running statistics in eval mode. `flag` is float(self.<module>.training).
        assert rm is not None and rv is not None
        _, mean_b, rstd_b = _normalize(L, x, dims, eps)
        flag_sym = sympy.Symbol(f"kw_training_{module.replace('.', '_')}")
        L.g.attr_sources[flag_sym] = f"float(self.{module}.training)"
        flag = SymScalar(flag_sym, True)
        mean_r = L.cast(_channel_view(L, rm, x.rank), torch.float32)
        rstd_r = L.pw("rsqrt", L.pw("add", L.cast(_channel_view(L, rv, x.rank), torch.float32), eps))
        mean = L.pw("add", mean_r, L.pw("mul", L.pw("sub", mean_b, mean_r), flag))
        rstd = L.pw("add", rstd_r, L.pw("mul", L.pw("sub", rstd_b, rstd_r), flag))
        xf = L.cast(x, torch.float32) if x.dtype != torch.float32 else x
        y = L.pw("mul", L.pw("sub", xf, mean), rstd)
        count = sympy.Integer(1)
        for d in dims:
            count = count * x.shape[d]
        L.g.side_outputs += [mean_b, rstd_b]
        L.g.bn_updates.append({"module": module, "mean": mean_b, "rstd": rstd_b, "count": count})
    elif use_batch:
        # No running statistics to keep (functional batch norm without them): the forward's output only.
        y, mean, rstd = _normalize(L, x, dims, eps)
    else:
        assert rm is not None and rv is not None
        mean = _channel_view(L, rm, x.rank)
        rstd = L.pw("rsqrt", L.pw("add", _channel_view(L, rv, x.rank), eps))
        y = L.pw("mul", L.pw("sub", x, mean), rstd)
    if w is not None:
        y = L.pw("mul", y, _channel_view(L, w, x.rank))
    if b is not None:
        y = L.pw("add", y, _channel_view(L, b, x.rank))
    y = L.cast(y, x.dtype)
    if name in ("batch_norm", "instance_norm"):
        return y
    empty = L.full((sympy.Integer(0),), 0.0, torch.float32)
    if name == "_batch_norm_with_update":
        return (y, empty, empty, L.full((sympy.Integer(0),), 0, torch.uint8))
    if name == "_native_batch_norm_legit_functional":
        return (y, empty, empty, rm, rv)
    return (y, empty, empty)


# ---- losses ----------------------------------------------------------------------------------------


def _loss_inputs(L: Lowerer, a: dict) -> tuple[Value, Value]:
    x, y = a["self"], a["target"]
    if not x.dtype.is_floating_point:
        x = L.cast(x, torch.float32)
    return x, y


@handles("mse_loss")
def _mse(L: Lowerer, a: dict, target: Any) -> Value:
    x, y = _loss_inputs(L, a)
    d = L.pw("sub", x, y)
    return L.apply_reduction(L.pw("mul", d, d), a.get("reduction", 1))


@handles("l1_loss")
def _l1(L: Lowerer, a: dict, target: Any) -> Value:
    x, y = _loss_inputs(L, a)
    return L.apply_reduction(L.pw("abs", L.pw("sub", x, y)), a.get("reduction", 1))


@handles("smooth_l1_loss", "huber_loss")
def _smooth_l1(L: Lowerer, a: dict, target: Any) -> Value:
    x, y = _loss_inputs(L, a)
    d = L.pw("abs", L.pw("sub", x, y))
    if target.overloadpacket.__name__ == "huber_loss":
        delta = a.get("delta", 1.0)
        loss = L.pw("where", L.pw("lt", d, delta), L.pw("mul", L.pw("mul", d, d), 0.5),
                    L.pw("mul", L.pw("sub", d, 0.5 * delta), delta), dtype=x.dtype)  # fmt: skip
    else:
        beta = a.get("beta", 1.0)
        if not isinstance(beta, SymScalar) and float(beta) == 0:
            loss = d
        else:
            loss = L.pw("where", L.pw("lt", d, beta), L.pw("div", L.pw("mul", L.pw("mul", d, d), 0.5), beta),
                        L.pw("sub", d, 0.5 * beta), dtype=x.dtype)  # fmt: skip
    return L.apply_reduction(loss, a.get("reduction", 1))


def _pick(L: Lowerer, x: Value, t: Value, class_dim: int) -> Value:
    """x[..., t, ...] along `class_dim` (keepdim), as a sum of where(column == t): stays in the row kernel."""
    shape = [sympy.Integer(1)] * x.rank
    shape[class_dim] = x.shape[class_dim]
    iota = L.g.add("pw", "iota", (), tuple(shape), torch.int64, {"dim": class_dim})
    tk = L.unsqueeze(t, class_dim) if t.rank == x.rank - 1 else t
    hit = L.pw("eq", iota, tk)
    return L.reduce("sum", L.pw("where", hit, x, 0.0, dtype=x.dtype), [class_dim], True)


def _nll(L: Lowerer, logp: Value, t: Value, weight: Value | None, reduction: int, ignore_index: int) -> Value:
    class_dim = 1 if logp.rank >= 2 else 0
    picked = _pick(L, logp, t, class_dim)
    tk = L.unsqueeze(t, class_dim) if t.rank == logp.rank - 1 else t
    valid = L.pw("ne", tk, ignore_index)
    w: Any = 1.0
    if weight is not None:
        wshape = [sympy.Integer(1)] * logp.rank
        wshape[class_dim] = weight.shape[0]
        w = _pick(L, L.reshape(weight, tuple(wshape)), t, class_dim)
    wv = L.pw("where", valid, w, 0.0, dtype=logp.dtype)
    loss = L.pw("neg", L.pw("mul", picked, wv))  # one value per row, class dim kept as size 1
    if reduction == _REDUCTION_NONE:
        return L.squeeze(loss, [class_dim])
    # Both sums run over the same per-row values, so they share one kernel.
    total = L.reduce("sum", loss, None, False)
    if reduction == _REDUCTION_SUM:
        return total
    return L.pw("div", total, L.reduce("sum", wv, None, False))


@handles("nll_loss", "nll_loss_nd", "nll_loss_forward", "nll_loss2d", "nll_loss2d_forward")
def _nll_h(L: Lowerer, a: dict, target: Any) -> Any:
    out = _nll(L, a["self"], a["target"], a.get("weight"), a.get("reduction", 1), a.get("ignore_index", -100))
    if target.overloadpacket.__name__.endswith("_forward"):
        return (out, L.full((), 0.0, torch.float32))
    return out


@handles("cross_entropy_loss")
def _cross_entropy(L: Lowerer, a: dict, target: Any) -> Value:
    x, t = a["self"], a["target"]
    if a.get("label_smoothing", 0.0):
        raise LoweringError("cross_entropy with label_smoothing is not supported")
    class_dim = 1 if x.rank >= 2 else 0
    logp = _softmax(L, x, class_dim, True, torch.float32 if not x.dtype.is_floating_point else x.dtype)
    if t.dtype.is_floating_point:
        loss = L.pw("neg", L.reduce("sum", L.pw("mul", logp, t), [class_dim], False))
        return L.apply_reduction(loss, a.get("reduction", 1))
    return _nll(L, logp, t, a.get("weight"), a.get("reduction", 1), a.get("ignore_index", -100))


@handles("kl_div")
def _kl_div(L: Lowerer, a: dict, target: Any) -> Value:
    x, t = a["self"], a["target"]
    if a.get("log_target", False):
        loss = L.pw("mul", L.pw("exp", t), L.pw("sub", t, x))
    else:
        loss = L.pw("sub", L.pw("xlogy", t, t), L.pw("mul", t, x))
    return L.apply_reduction(loss, a.get("reduction", 1))


@handles("binary_cross_entropy")
def _bce(L: Lowerer, a: dict, target: Any) -> Value:
    x, y = a["self"], a["target"]
    logx = L.pw("maximum", L.pw("log", x), -100.0)
    log1mx = L.pw("maximum", L.pw("log", L.pw("sub", 1.0, x)), -100.0)
    loss = L.pw("neg", L.pw("add", L.pw("mul", y, logx), L.pw("mul", L.pw("sub", 1.0, y), log1mx)))
    if a.get("weight") is not None:
        loss = L.pw("mul", loss, a["weight"])
    return L.apply_reduction(loss, a.get("reduction", 1))


@handles("binary_cross_entropy_with_logits")
def _bce_logits(L: Lowerer, a: dict, target: Any) -> Value:
    x, y = a["self"], a["target"]
    sp = L.pw("softplus", L.pw("neg", x))  # log(1 + exp(-x)), computed stably
    pw_ = a.get("pos_weight")
    if pw_ is not None:
        lw = L.pw("add", L.pw("mul", L.pw("sub", pw_, 1.0), y), 1.0)
        loss = L.pw("add", L.pw("mul", L.pw("sub", 1.0, y), x), L.pw("mul", lw, sp))
    else:
        loss = L.pw("add", L.pw("mul", L.pw("sub", 1.0, y), x), sp)
    if a.get("weight") is not None:
        loss = L.pw("mul", loss, a["weight"])
    return L.apply_reduction(loss, a.get("reduction", 1))


@handles("hinge_embedding_loss")
def _hinge_embedding(L: Lowerer, a: dict, target: Any) -> Value:
    x, y = a["self"], a["target"]
    margin = a.get("margin", 1.0)
    m = L.pw("where", L.pw("ne", y, 1), L.pw("maximum", L.pw("sub", margin, x), 0.0), 0.0, dtype=x.dtype)
    s = L.pw("where", L.pw("ne", y, -1), x, 0.0, dtype=x.dtype)
    return L.apply_reduction(L.pw("add", m, s), a.get("reduction", 1))


@handles("soft_margin_loss")
def _soft_margin(L: Lowerer, a: dict, target: Any) -> Value:
    x, y = a["self"], a["target"]
    return L.apply_reduction(L.pw("softplus", L.pw("neg", L.pw("mul", y, x))), a.get("reduction", 1))


@handles("margin_ranking_loss")
def _margin_ranking(L: Lowerer, a: dict, target: Any) -> Value:
    x1, x2, y = a["input1"], a["input2"], a["target"]
    loss = L.pw(
        "maximum", L.pw("add", L.pw("neg", L.pw("mul", y, L.pw("sub", x1, x2))), a.get("margin", 0.0)), 0.0
    )
    return L.apply_reduction(loss, a.get("reduction", 1))


@handles("cosine_similarity")
def _cosine_similarity(L: Lowerer, a: dict, target: Any) -> Value:
    x1, x2 = a["x1"], a["x2"]
    dim = a.get("dim", 1)
    eps = a.get("eps", 1e-8)
    shape = broadcast_shapes(x1.shape, x2.shape)
    if x1.shape != shape:
        x1 = L.expand(x1, shape)
    if x2.shape != shape:
        x2 = L.expand(x2, shape)
    n1 = L.pw("maximum", L.pw("sqrt", L.reduce("sum", L.pw("mul", x1, x1), [dim], True)), eps)
    n2 = L.pw("maximum", L.pw("sqrt", L.reduce("sum", L.pw("mul", x2, x2), [dim], True)), eps)
    return L.reduce("sum", L.pw("mul", L.pw("div", x1, n1), L.pw("div", x2, n2)), [dim], False)


def _pairwise_distance(L: Lowerer, x1: Value, x2: Value, p: float, eps: float, keepdim: bool) -> Value:
    d = L.pw("add", L.pw("sub", x1, x2), eps)
    rank = max(x1.rank, x2.rank)
    return _vector_norm(L, d, p, [rank - 1], keepdim)


@handles("pairwise_distance")
def _pairwise_distance_h(L: Lowerer, a: dict, target: Any) -> Value:
    return _pairwise_distance(
        L, a["x1"], a["x2"], a.get("p", 2.0), a.get("eps", 1e-6), a.get("keepdim", False)
    )


@handles("triplet_margin_loss")
def _triplet(L: Lowerer, a: dict, target: Any) -> Value:
    anc, pos, neg = a["anchor"], a["positive"], a["negative"]
    p, eps, margin = a.get("p", 2.0), a.get("eps", 1e-6), a.get("margin", 1.0)
    d_ap = _pairwise_distance(L, anc, pos, p, eps, False)
    d_an = _pairwise_distance(L, anc, neg, p, eps, False)
    if a.get("swap", False):
        d_an = L.pw("minimum", d_an, _pairwise_distance(L, pos, neg, p, eps, False))
    loss = L.pw("maximum", L.pw("sub", L.pw("add", d_ap, margin), d_an), 0.0)
    return L.apply_reduction(loss, a.get("reduction", 1))


# ---- scans -----------------------------------------------------------------------------------------


@handles("cumsum", "cumprod")
def _cumsum(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    out_dtype = L.meta_dtype()
    if x.dtype != out_dtype:
        x = L.cast(x, out_dtype)
    return L.scan(target.overloadpacket.__name__.rstrip("_"), x, a["dim"], out_dtype)


# ---- matmul ----------------------------------------------------------------------------------------


@handles("mm", "bmm")
def _mm(L: Lowerer, a: dict, target: Any) -> Value:
    return L.matmul2(a["self"], a["mat2"])


@handles("matmul")
def _matmul(L: Lowerer, a: dict, target: Any) -> Value:
    return L.matmul(a["self"], a["other"])


@handles("mv")
def _mv(L: Lowerer, a: dict, target: Any) -> Value:
    return L.matmul(a["self"], a["vec"])


@handles("dot", "vdot", "inner")
def _dot(L: Lowerer, a: dict, target: Any) -> Value:
    return L.matmul(a["self"], a["tensor"] if "tensor" in a else a["other"])


@handles("linear")
def _linear(L: Lowerer, a: dict, target: Any) -> Value:
    x, w, b = a["input"], a["weight"], a.get("bias")
    wt = L.transpose(w, 0, 1) if w.rank == 2 else w
    out = L.matmul(x, wt)
    if b is not None:
        out = L.pw("add", out, b)
    return out


@handles("addmm", "baddbmm", "addmv")
def _addmm(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__
    m1 = a["mat1"] if "mat1" in a else (a["batch1"] if "batch1" in a else a["mat"])
    m2 = a["mat2"] if "mat2" in a else (a["batch2"] if "batch2" in a else a["vec"])
    prod = L.matmul(m1, m2) if name != "addmv" else L.matmul(m1, m2)
    alpha, beta = a.get("alpha", 1), a.get("beta", 1)
    if alpha != 1:
        prod = L.pw("mul", prod, alpha)
    if beta == 0:
        return prod
    bias = a["self"] if beta == 1 else L.pw("mul", a["self"], beta)
    return L.pw("add", prod, bias)


# ---- views -----------------------------------------------------------------------------------------


@handles("view", "_unsafe_view", "reshape", "_reshape_alias")
def _view(L: Lowerer, a: dict, target: Any) -> Value:
    size = a.get("size", a.get("shape"))
    if isinstance(size, list | tuple) and len(size) == len(L.meta_shape()):
        # The traced arguments keep a -1 where the source wrote one: resolved against the source's sizes.
        return L.reshape(a["self"], [s if s == -1 else s for s in size])
    return L.reshape(a["self"], L.meta_shape())


@handles("view_as", "reshape_as", "flatten", "unflatten")
def _view_meta(L: Lowerer, a: dict, target: Any) -> Value:
    return L.reshape(a["self"], L.meta_shape())


@handles("broadcast_tensors")
def _broadcast_tensors(L: Lowerer, a: dict, target: Any) -> tuple[Value, ...]:
    ts = [L._as_value(t) for t in a["tensors"]]
    shape = broadcast_shapes(*(t.shape for t in ts))
    return tuple(L.expand(t, shape) for t in ts)


@handles("unsqueeze")
def _unsqueeze(L: Lowerer, a: dict, target: Any) -> Value:
    return L.unsqueeze(a["self"], a["dim"])


@handles("squeeze")
def _squeeze(L: Lowerer, a: dict, target: Any) -> Value:
    return L.squeeze(a["self"], a.get("dim", a.get("dims")))


@handles("permute")
def _permute(L: Lowerer, a: dict, target: Any) -> Value:
    return L.permute(a["self"], a["dims"])


@handles("transpose", "swapaxes", "swapdims")
def _transpose(L: Lowerer, a: dict, target: Any) -> Value:
    d0 = int(a.get("dim0", a.get("axis0", 0)))
    d1 = int(a.get("dim1", a.get("axis1", 1)))
    return L.transpose(a["self"], d0, d1)


@handles("t", "numpy_T", "mT")
def _t(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    if target.overloadpacket.__name__ == "numpy_T":
        return L.permute(x, list(reversed(range(x.rank))))
    return L.transpose(x, -2, -1) if x.rank >= 2 else x


@handles("movedim")
def _movedim(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    src = _norm_dims(a["source"], x.rank) if not isinstance(a["source"], int) else [a["source"] % x.rank]
    dst = (
        _norm_dims(a["destination"], x.rank)
        if not isinstance(a["destination"], int)
        else [a["destination"] % x.rank]
    )
    order = [d for d in range(x.rank) if d not in src]
    for s, d in sorted(zip(dst, src, strict=True)):
        order.insert(s, d)
    return L.permute(x, order)


@handles("expand", "expand_as", "broadcast_to")
def _expand(L: Lowerer, a: dict, target: Any) -> Value:
    return L.expand(a["self"], L.meta_shape())


@handles("slice")
def _slice(L: Lowerer, a: dict, target: Any) -> Value:
    return L.slice(a["self"], a.get("dim", 0), a.get("start"), a.get("end"), a.get("step", 1))


@handles("narrow")
def _narrow(L: Lowerer, a: dict, target: Any) -> Value:
    start = _to_sym(a["start"])
    return L.slice(a["self"], a["dim"], start, start + _to_sym(a["length"]), 1)


@handles("select")
def _select(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    idx = _to_sym(a["index"])
    dim = _norm_dims([a["dim"]], x.rank)[0]
    if idx.is_number and int(idx) < 0:
        idx = x.shape[dim] + idx
    return L.select(x, dim, idx)


@handles("split", "split_with_sizes", "chunk", "unbind", "tensor_split")
def _split(L: Lowerer, a: dict, target: Any) -> tuple[Value, ...]:
    assert L.node is not None
    name = target.overloadpacket.__name__
    x = a["self"]
    dim = _norm_dims([a.get("dim", 0)], x.rank)[0]
    vals = L.node.meta["val"]
    out = []
    start: sympy.Expr = sympy.Integer(0)
    for t in vals:
        if name == "unbind":
            out.append(L.select(x, dim, start))
            start = start + 1
            continue
        size = _to_sym(t.shape[dim])
        out.append(L.slice(x, dim, start, start + size, 1))
        start = start + size
    return tuple(out)


@handles("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _conv(L: Lowerer, a: dict, target: Any) -> Value:
    """A convolution kept as a torch (cuDNN) call, its bias added in Triton.

    PyTorch adds a cuDNN convolution's bias in a separate kernel that reads and writes the whole
    output once more; as a broadcast add it joins the Triton kernel that follows instead."""
    node = L.node
    assert node is not None
    bias = a.get("bias")
    followed = any(u.op != "output" for u in node.users)  # a result returned as is keeps its bias
    if not isinstance(bias, Value) or bias.rank != 1 or not followed:
        return L.opaque(target, node)
    out = L.opaque(target, node, without="bias")
    shape: list[Any] = [1] * out.rank
    shape[1] = -1  # the channel count is a constructor argument: never baked in
    return L.pw("add", out, L.reshape(bias, shape))


@handles("einsum")
def _einsum(L: Lowerer, a: dict, target: Any) -> Value:
    """Two-operand einsum as permutes and reshapes around one (batched) matmul."""
    eq = str(a["equation"]).replace(" ", "")
    ops = list(a["tensors"])
    if "->" not in eq or "." in eq:
        return L.opaque(target, L.node)  # type: ignore[arg-type]
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    if len(terms) != len(ops) or any(
        len(t) != len(set(t)) or len(t) != o.rank for t, o in zip(terms, ops, strict=True)
    ):
        return L.opaque(target, L.node)  # type: ignore[arg-type]
    if len(ops) == 1:
        (t,), (x,) = terms, ops
        summed = [i for i, c in enumerate(t) if c not in out]
        if summed:
            x = L.reduce("sum", x, summed, False)
            t = "".join(c for c in t if c in out)
        return L.permute(x, [t.index(c) for c in out])
    if len(ops) != 2:
        return L.opaque(target, L.node)  # type: ignore[arg-type]
    (ta, tb), (xa, xb) = terms, ops
    # Indices in one operand only and not in the output are summed away first.
    for side in (0, 1):
        t, x = (ta, xa) if side == 0 else (tb, xb)
        other = tb if side == 0 else ta
        lone = [i for i, ch in enumerate(t) if ch not in out and ch not in other]
        if lone:
            x = L.reduce("sum", x, lone, False)
            t = "".join(ch for ch in t if ch in out or ch in other)
        if side == 0:
            ta, xa = t, x
        else:
            tb, xb = t, x
    batch = [ch for ch in ta if ch in tb and ch in out]
    contract = [ch for ch in ta if ch in tb and ch not in out]
    free_a = [ch for ch in ta if ch not in tb]
    free_b = [ch for ch in tb if ch not in ta]
    size = {ch: xa.shape[i] for i, ch in enumerate(ta)}
    size.update({ch: xb.shape[i] for i, ch in enumerate(tb)})

    def prod(chars: list[str]) -> sympy.Expr:
        return _prod(tuple(size[ch] for ch in chars))

    pa = L.permute(xa, [ta.index(ch) for ch in batch + free_a + contract])
    pb = L.permute(xb, [tb.index(ch) for ch in batch + contract + free_b])
    ma = L.reshape(pa, tuple(size[ch] for ch in batch) + (prod(free_a), prod(contract)))
    mb = L.reshape(pb, tuple(size[ch] for ch in batch) + (prod(contract), prod(free_b)))
    mm = L.matmul2(ma, mb)
    res = L.reshape(mm, tuple(size[ch] for ch in batch + free_a + free_b))
    order = batch + free_a + free_b
    return L.permute(res, [order.index(ch) for ch in out])
