"""The offline writer's intermediate form of a task's forward: a small graph of canonical ops.

A task is traced into aten ops (analysis.py) and lowered into `Value`s of a few kinds:

- `input` / `param`: tensors the forward receives (its arguments, the module's parameters and buffers);
- `pw`: one pointwise op (unary, binary with broadcasting, where, casts, constants) on tensors and scalars;
- `reduce`: sum / mean / max / min / argmax / argmin / prod / numel over some dims, with keepdim;
- `scan`: cumsum / cumprod along one dim;
- `matmul`: a (batched) matrix product A[..., M, K] @ B[..., K, N] with broadcast batch dims;
- `view`: a view of another value (reshape, permute, expand, slice, select), done by torch in the glue;
- `opaque`: any other aten op, kept as a torch call (convolutions, pooling, ...); `item` picks one of
  its outputs.

Softmax, norms, losses, logsumexp and friends are decomposed into these (lowering.py), so one row-kernel
generator covers them all. Shapes are tuples of sympy expressions over the symbols of the forward's
input sizes: a generated program never bakes a size in; `Graph.hint` gives the size seen while tracing,
which only steers the choice of designs and block sizes.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

Shape = tuple[sympy.Expr, ...]

# The pointwise ops are those of operators.OPERATORS (the one table of operators).
REDUCE_OPS = {"sum", "mean", "max", "min", "argmax", "argmin", "prod", "numel", "any", "all"}
SCAN_OPS = {"cumsum", "cumprod"}
VIEW_OPS = {"reshape", "permute", "expand", "slice", "select"}


@dataclass(frozen=True)
class SymScalar:
    """A scalar computed in the forward at run time: from input sizes (a batch size to divide by) or
    from a constructor argument kept on the module (a scale factor, a slope, a group count).

    Arithmetic with numbers and other SymScalars gives SymScalars, so decompositions can scale them.
    """

    expr: sympy.Expr
    is_float: bool = False

    def _op(self, other: Any, fn: Any) -> SymScalar:
        if isinstance(other, SymScalar):
            return SymScalar(sympy.sympify(fn(self.expr, other.expr)), self.is_float or other.is_float)
        if isinstance(other, bool | int | float):
            return SymScalar(sympy.sympify(fn(self.expr, other)), self.is_float or isinstance(other, float))
        return NotImplemented

    def __add__(self, o: Any) -> SymScalar:
        return self._op(o, lambda a, b: a + b)

    def __radd__(self, o: Any) -> SymScalar:
        return self._op(o, lambda a, b: b + a)

    def __sub__(self, o: Any) -> SymScalar:
        return self._op(o, lambda a, b: a - b)

    def __rsub__(self, o: Any) -> SymScalar:
        return self._op(o, lambda a, b: b - a)

    def __mul__(self, o: Any) -> SymScalar:
        return self._op(o, lambda a, b: a * b)

    def __rmul__(self, o: Any) -> SymScalar:
        return self._op(o, lambda a, b: b * a)

    def __truediv__(self, o: Any) -> SymScalar:
        out = self._op(o, lambda a, b: a / b)
        return SymScalar(out.expr, True) if isinstance(out, SymScalar) else out

    def __rtruediv__(self, o: Any) -> SymScalar:
        out = self._op(o, lambda a, b: b / a)
        return SymScalar(out.expr, True) if isinstance(out, SymScalar) else out

    def __neg__(self) -> SymScalar:
        return SymScalar(-self.expr, self.is_float)


Scalar = bool | int | float | SymScalar


@dataclass(eq=False)
class Value:
    """One node of the graph. `args` holds Values and scalars; `attrs` the op's static parameters."""

    id: int
    kind: str
    op: str
    args: tuple[Any, ...]
    shape: Shape
    dtype: torch.dtype
    attrs: dict[str, Any] = field(default_factory=dict)
    origin: str = ""
    """The aten op this value came from (e.g. "softmax", "layer_norm"): names the family of a kernel."""

    def __repr__(self) -> str:
        return f"%{self.id}:{self.kind}.{self.op}{list(self.shape)}"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def tensor_args(self) -> list[Value]:
        """The values this one is computed from, nested ones included: a torch call's list argument
        (`cat([expand(p), x])`, einsum's operands) and keyword arguments hold values too, and a value
        only reached through one was pruned, never scheduled, and named but never defined."""
        out: list[Value] = []
        stack: list[Any] = [self.args, self.attrs.get("kwargs", {})]
        while stack:
            x = stack.pop()
            if isinstance(x, Value):
                out.append(x)
            elif isinstance(x, list | tuple):
                stack.extend(reversed(x))
            elif isinstance(x, dict):
                stack.extend(reversed(list(x.values())))
        return out


class Graph:
    """Values in topological order, with the forward's inputs, parameters and outputs."""

    def __init__(self, var_to_val: dict[sympy.Symbol, int]) -> None:
        self.values: list[Value] = []
        self.inputs: list[Value] = []
        self.params: list[Value] = []
        self.outputs: list[Value] = []
        self.output_kind = "single"  # "single" | "tuple" | "list"
        self.sym_sources: dict[sympy.Symbol, tuple[Value, int]] = {}
        self.attr_sources: dict[sympy.Symbol, str] = {}
        """Symbols that stand for module attributes (Python read on `self`), e.g. "self.scale"."""
        self.side_outputs: list[Value] = []
        """Values the forward computes for its own use after the kernels, not returned (batch statistics)."""
        self.bn_updates: list[dict[str, Any]] = []
        """BatchNorm modules whose running statistics the forward updates in train mode: {"module": path,
        "mean": Value, "rstd": Value, "count": sympy expr of the elements per channel}."""
        self.var_to_val = var_to_val
        self.result_sizes: set[sympy.Symbol] = set()
        """Symbols of sizes read from a torch call's result at run time (lowering's `_read_result_sizes`)."""
        self._ids = itertools.count()

    # ---- hints -------------------------------------------------------------------------------------
    def hint(self, e: Any) -> int:
        """The size an expression had while tracing."""
        if isinstance(e, int):
            return e
        e = sympy.sympify(e)
        if e.is_Integer:
            return int(e)
        v = e.xreplace(self.var_to_val)
        return int(v) if v.is_Integer or v == int(v) else int(float(v))

    def hints(self, shape: Shape) -> tuple[int, ...]:
        return tuple(self.hint(d) for d in shape)

    def numel_hint(self, shape: Shape) -> int:
        n = 1
        for d in self.hints(shape):
            n *= d
        return n

    # ---- construction ------------------------------------------------------------------------------
    def add(
        self,
        kind: str,
        op: str,
        args: tuple[Any, ...],
        shape: Shape,
        dtype: torch.dtype,
        attrs: dict[str, Any] | None = None,
        origin: str = "",
    ) -> Value:
        v = Value(next(self._ids), kind, op, tuple(args), tuple(sympy.sympify(d) for d in shape), dtype,
                  dict(attrs or {}), origin)  # fmt: skip
        self.values.append(v)
        return v

    def users(self) -> dict[int, list[Value]]:
        out: dict[int, list[Value]] = {v.id: [] for v in self.values}
        for v in self.values:
            for a in v.tensor_args:
                out[a.id].append(v)
        return out

    def prune(self) -> None:
        """Drop values nothing needs (the outputs are the roots)."""
        live: set[int] = set()
        stack = list(self.outputs) + list(self.side_outputs)
        while stack:
            v = stack.pop()
            if v.id in live:
                continue
            live.add(v.id)
            stack.extend(v.tensor_args)
        keep = {v.id for v in self.inputs + self.params}
        self.values = [v for v in self.values if v.id in live or v.id in keep]

    def dump(self) -> str:
        lines = []
        for v in self.values:
            args = ", ".join(repr(a) if isinstance(a, Value) else str(a) for a in v.args)
            extra = f" {v.attrs}" if v.attrs else ""
            lines.append(f"{v!r} = {v.op}({args}){extra} {str(v.dtype).removeprefix('torch.')}")
        lines.append(f"outputs: {self.outputs}")
        return "\n".join(lines)


# ---- shape helpers ---------------------------------------------------------------------------------


def is_flat_sum(expr: Any) -> bool:
    """Whether `expr` is already a flat sum of integers and integer multiples of symbols (a
    concatenation's size, `s1 + s5 + ... + 32`), the one form sympy.simplify leaves as it is."""
    if not isinstance(expr, sympy.Expr):
        return False
    terms = expr.args if isinstance(expr, sympy.Add) else (expr,)
    for t in terms:
        if isinstance(t, sympy.Integer | sympy.Symbol):
            continue
        if (
            isinstance(t, sympy.Mul)
            and len(t.args) == 2
            and isinstance(t.args[0], sympy.Integer)
            and isinstance(t.args[1], sympy.Symbol)
        ):
            continue
        return False
    return True


@functools.lru_cache(maxsize=8192)
def _simplified(expr: Any) -> Any:
    # sympy.simplify tries a dozen rewritings of a sum of 48 sizes before returning it unchanged.
    if is_flat_sum(expr):
        return expr
    return sympy.simplify(expr)


def simplified(expr: Any) -> Any:
    """`sympy.simplify(expr)`, remembered: the writer asks about the same sizes (s0, s1, ... in every
    trace) for every kernel and every region, and sympy's simplify is slow."""
    try:
        return _simplified(expr)
    except TypeError:  # an unhashable argument: nothing to remember it by
        return sympy.simplify(expr)


def sym_eq(a: sympy.Expr, b: sympy.Expr) -> bool:
    return bool(simplified(sympy.sympify(a) - sympy.sympify(b)) == 0)


def broadcast_shapes(*shapes: Shape) -> Shape:
    """Right-aligned broadcasting of symbolic shapes (a size-1 dim stretches to the other)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[sympy.Expr] = []
    for i in range(rank):
        dim: sympy.Expr = sympy.Integer(1)
        for s in shapes:
            j = i - (rank - len(s))
            if j < 0:
                continue
            d = sympy.sympify(s[j])
            if d == 1:
                continue
            if dim == 1:
                dim = d
        out.append(dim)
    return tuple(out)


def aligned(shape: Shape, rank: int) -> Shape:
    """`shape` right-aligned to `rank` dims (leading size-1 dims added)."""
    return (sympy.Integer(1),) * (rank - len(shape)) + tuple(shape)


def is_one(d: sympy.Expr) -> bool:
    return sympy.sympify(d) == 1


def dtype_is_float(dt: torch.dtype) -> bool:
    return dt.is_floating_point


def promote(*dtypes: torch.dtype) -> torch.dtype:
    out = dtypes[0]
    for d in dtypes[1:]:
        out = torch.promote_types(out, d)
    return out
