"""Lowering a traced forward (pre-dispatch aten ops, symbolic sizes) into the writer's IR (ir.py).

Each aten op has a handler that builds IR values through `Lowerer`'s helpers. This module holds the
`Lowerer` and the `@handles` registry; the handlers live by kind in lowering_pointwise.py (elementwise
ops, constants), lowering_rows.py (reductions, norms, losses, scans) and lowering_views.py (matmuls,
views, convolutions). High-level ops are decomposed the way a person would write them in Triton:
softmax is a max, an exp and a sum over a row; layer norm a mean and a variance; cross entropy a
log-softmax and a pick of the target column (a sum of `where(column == target, ...)`, which stays in the
same row kernel). Ops the writer does not write (convolutions, pooling, concatenation, ...) become
`opaque` values, kept as torch calls.

In-place ops (`x.add_(y)`) are read as their functional form: the tracer already routes later uses to the
in-place op's result. An in-place write into a view would change another tensor behind the graph's back,
so it is refused (`LoweringError`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx as fx

from kernelwright.providers.offline.frontend.ir import (
    Graph,
    Shape,
    SymScalar,
    Value,
    broadcast_shapes,
    is_one,
    promote,
)
from kernelwright.providers.offline.frontend.shapes import (
    ViewOps,
    norm_dims,
    shape_prod,
    to_sym,
)
from kernelwright.providers.offline.operators import ATEN_BINARY, ATEN_UNARY, BOOLEAN

aten = torch.ops.aten


class LoweringError(ValueError):
    """The forward uses something the writer cannot express; the message is one line."""


class HandlerTable(dict[str, Callable[..., Any]]):
    """One module's lowering handlers by aten op name; plugins.LOWERINGS lists the modules' tables."""

    def handles(self, *names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: `fn` lowers the aten ops `names` (each once in this table)."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            for n in names:
                if n in self:
                    raise ValueError(
                        f"aten op {n!r} has two lowering handlers: {self[n].__name__} and {fn.__name__}"
                    )
                self[n] = fn
            return fn

        return deco


REDUCTION_NONE, _REDUCTION_MEAN, REDUCTION_SUM = 0, 1, 2


def _touches_complex(node: fx.Node) -> bool:
    """Whether the op reads or makes a complex tensor (from the traced values in the nodes' meta)."""
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    flat = [v for x in vals for v in (x if isinstance(x, list | tuple) else [x])]
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in flat)


HALF = (torch.float16, torch.bfloat16)


@dataclass
class OtherTrace:
    """What a trace of the task at other sizes saw, to tell sizes from numbers (analysis.py)."""

    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Each op node's output shape there, by the name of the node at the same place in this trace."""
    placeholders: list[tuple[int, ...] | None] = field(default_factory=list)
    """Each placeholder's shape there, in order (None for a non-tensor)."""
    values: dict[sympy.Symbol, Any] = field(default_factory=dict)
    """Symbols' values there: the placeholders' size symbols (filled by the Lowerer) and the module
    attributes bound in both traces (analysis.bind_hyperparameters)."""
    attributes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """The models' numbers by Python path ("attn.head_dim"): (in this trace's model, in the other's); a
    view's size the trace fixed is written as the attribute with its number in both (attribute_sizes.py)."""


class Lowerer(ViewOps):
    """Walks an fx graph of aten ops and builds the IR graph."""

    def __init__(self, gm: fx.GraphModule, var_to_val: dict[sympy.Symbol, int],
                 other: OtherTrace | None = None, modules: dict[str, str] | None = None) -> None:  # fmt: skip
        self.gm = gm
        # The op nodes whose hyper-parameters the program reads at run time, by node name: a module's call
        # (its path on the model, analysis.module_calls) or a functional call with named arguments ("").
        self.modules = modules or {}
        self.g = Graph(var_to_val)
        self.env: dict[fx.Node, Any] = {}
        self.node: fx.Node | None = None
        self.other = other or OtherTrace()
        self.other_shapes = self.other.shapes
        self.notes: list[str] = []

    # ---- entry -------------------------------------------------------------------------------------
    def run(self, placeholders: list[tuple[str, str]]) -> Graph:
        """`placeholders`: (kind, name) per fx placeholder, kind "param" (qualified name) or "input"."""
        ph = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(ph) != len(placeholders):
            raise LoweringError(f"traced {len(ph)} inputs, expected {len(placeholders)}")
        other_ph = self.other.placeholders if len(self.other.placeholders) == len(ph) else [None] * len(ph)
        for node, (kind, name), there in zip(ph, placeholders, other_ph, strict=True):
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                shape = tuple(to_sym(d) for d in val.shape)
                v = self.g.add(kind, name, (), shape, val.dtype, {"name": name})
                (self.g.params if kind == "param" else self.g.inputs).append(v)
                for i, d in enumerate(shape):
                    if isinstance(d, sympy.Symbol) and d not in self.g.sym_sources:
                        self.g.sym_sources[d] = (v, i)
                    if isinstance(d, sympy.Symbol) and there is not None and len(there) == len(shape):
                        self.other.values.setdefault(d, sympy.Integer(there[i]))
                self.env[node] = v
            else:
                # A non-tensor forward argument: traced as a constant.
                self.env[node] = (
                    val if not isinstance(val, torch.SymInt | torch.SymFloat) else SymScalar(to_sym(val))
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
            e = to_sym(val)
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
                return type(val)(to_sym(v) if isinstance(v, torch.SymInt) else v for v in val)
            return self._sym_value(node)
        inplace = packet.endswith("_") and not packet.endswith("__")
        name = packet[:-1] if inplace else packet
        args = self._bind(target, node)
        if inplace and name not in ("copy",):
            dst = args.get("self")
            if isinstance(dst, Value) and dst.kind == "view":
                raise LoweringError(f"in-place {packet} writes into a view of another tensor")
        before = len(self.g.values)
        handler = _handlers().get(name)
        if _touches_complex(node):
            # Triton has no complex type: an op on complex tensors stays a torch call (and a task that is
            # nothing else is one this writer cannot express).
            out = self.opaque(target, node)
        elif handler is None:
            if name in ATEN_UNARY:
                out = self.pw(ATEN_UNARY[name], args["self"])
            elif name in ATEN_BINARY:
                out = self.pw(ATEN_BINARY[name], args["self"], args["other"])
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
            want = tuple(self.g.hint(to_sym(d)) for d in val.shape)
            got = self.g.hints(out.shape)
            if want != got:
                raise LoweringError(f"internal: {node.target} lowered to shape {got}, traced {want}")

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

    def opmath(self, x: Any) -> Any:
        """`x` in fp32 where it is a half-precision value, else as it is. torch runs many half ops (softmax,
        variance, norms, hardswish, elu, lerp, ...) in fp32 inside and rounds once: their steps must not
        round to the half dtype one by one; the caller casts the result back to the half dtype."""
        return self.cast(x, torch.float32) if isinstance(x, Value) and x.dtype in HALF else x

    def reduce(self, op: str, x: Value, dims: Any, keepdim: bool, dtype: torch.dtype | None = None) -> Value:
        x = self._as_value(x)
        rank = x.rank
        dl = norm_dims(dims, rank)
        if rank == 0:
            dl = []
        if not dl and op in ("argmax", "argmin") and rank > 0:
            # argmax over all elements of an N-d tensor: flatten first (a contiguous view).
            flat = self.reshape(x, (shape_prod(x.shape),))
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
        dim = norm_dims([dim], x.rank)[0] if x.rank else 0
        if dtype is None:
            dtype = x.dtype if x.dtype.is_floating_point else torch.int64
        return self.g.add("scan", op, (x,), x.shape, dtype, {"dim": dim})

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
            shape = tuple(to_sym(d) for d in val.shape)
            attrs: dict[str, Any] = {"target": target, "kwargs": kwargs}
            if self.modules.get(node.name):
                attrs["module"] = self.modules[node.name]
            out = self.g.add("opaque", str(target), args, shape, val.dtype, attrs)
            self._read_result_sizes(out)
            return out
        if isinstance(val, list | tuple) and all(isinstance(t, torch.Tensor) for t in val):
            base = self.g.add("opaque", str(target), args, (), torch.float32,
                              {"target": target, "kwargs": kwargs, "multi": [(tuple(to_sym(d) for d in t.shape), t.dtype) for t in val]})  # fmt: skip
            return tuple(self._item(base, i) for i in range(len(val)))
        raise LoweringError(f"unsupported op {target} (result {type(val).__name__})")

    def _read_result_sizes(self, v: Value) -> None:
        """Sizes of a torch call's result that its traced expression gets wrong at other sizes are read
        from the result itself at run time.

        A call's result sizes come from its shape function, in which constructor arguments are numbers
        (a pooling window of 16 makes `n // 16`; a padding of kernel_size // 2 makes `h + 3 - k`). Where
        the trace at other sizes shows the expression does not give the size there, the dim gets a symbol
        of its own whose source is the result (`t7.shape[2]`), and the views after it follow that."""
        node = self.node
        other = self.other_shapes.get(node.name) if node is not None else None
        # A functional call whose arguments the program computes from the model's attributes has every
        # size read from its result: its traced expression holds only for the traced attributes. (A
        # module's call keeps its expression where the trace at other sizes agrees with it.)
        read = node is not None and self.modules.get(node.name) == ""
        if (other is None or len(other) != v.rank) and not read:
            return
        shape = list(v.shape)
        for d, e in enumerate(v.shape):
            if e.is_number:
                continue  # a size the trace fixed: the views after it infer it (`_size_dependent_dims`)
            there = e.xreplace(self.other.values)
            if not read and other is not None and there.is_number and int(there) == other[d]:
                continue
            sym = sympy.Symbol(f"r{v.id}_{d}", integer=True, positive=True)
            self.g.var_to_val[sym] = sympy.Integer(self.g.hint(e))
            self.g.sym_sources[sym] = (v, d)
            self.g.result_sizes.add(sym)
            if other is not None and len(other) == v.rank:
                self.other.values[sym] = sympy.Integer(other[d])
            shape[d] = sym
        v.shape = tuple(shape)

    def _item(self, base: Value, idx: int) -> Value:
        shape, dtype = base.attrs["multi"][idx]
        return self.g.add("view", "item", (base,), shape, dtype, {"index": idx})

    def apply_reduction(self, v: Value, reduction: int) -> Value:
        if reduction == REDUCTION_NONE:
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
    if op in BOOLEAN:
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


def dims_arg(a: dict, key: str = "dim") -> Any:
    d = a.get(key)
    if d is None or (isinstance(d, list | tuple) and len(d) == 0):
        return None
    return d


def _handlers() -> dict[str, Callable[..., Any]]:
    # the handler modules import this one, so the table they make up is looked up when a forward is lowered
    from kernelwright.providers.offline.plugins import lowering_handlers

    return lowering_handlers()
