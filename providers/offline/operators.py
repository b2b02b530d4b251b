"""The offline writer's one table of operators: every pointwise op it knows, by the names each reader sees.

An `Operator` is one op of the writer's IR, named as `emit.pw_expr` writes it, with the names it is
recognised by:
- `aten`: aten ops the generic writer's lowering (frontend/lowering.py) turns into it directly, without
  a handler of their own;
- `calls`: torch functions and tensor methods the conv family's fx reader (families/conv/conv_calls.py)
  turns into it, and `module`, the nn module class it reads as it;
- `generic`: whether the generic writer's kernel kinds accept it (`EMITTABLE`); the ops the generic
  lowering decomposes (hardswish, elu, ...) are written as themselves only by the conv family;
- `params`: the constant parameters that come after the operand (softplus's beta and threshold, ...).

The readers take the views below (ATEN_UNARY, CALL_BINARY, NN_ACTIVATIONS, EMITTABLE, ...), never a list of
their own. Besides the pointwise ops: the ops that are copies (identities), the reductions the conv family
reads, and which aten ops make a row kernel of which family (the scheduler's family names).

To add an operator: one `Operator` here (with the names it is read by), its Triton form in
`emit.pw_expr`, and, where it needs more than a name, a lowering handler (frontend/lowering_*.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelwright.tasks.op_families import ATEN_FAMILY


@dataclass(frozen=True)
class Operator:
    """One op of the writer's IR and the names it is read by (see the module docstring)."""

    name: str
    arity: int
    aten: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    module: str | None = None
    generic: bool = True
    params: tuple[str, ...] = ()
    boolean: bool = False
    """Its result is a bool tensor (comparisons, logical ops, isnan/isinf/isfinite)."""


def _op(
    name: str,
    arity: int,
    *,
    aten: str | bool = "",
    calls: str | bool = "",
    module: str | None = None,
    generic: bool = True,
    params: tuple[str, ...] = (),
    boolean: bool = False,
) -> Operator:
    """`aten=True` / `calls=True`: read by its own name; a string: those names, space-separated."""

    def spelled(names: str | bool) -> tuple[str, ...]:
        return (name,) if names is True else tuple(str(names).split()) if names else ()

    return Operator(name, arity, spelled(aten), spelled(calls), module, generic, params, boolean)


OPERATORS: tuple[Operator, ...] = (
    # ---- unary: math ----
    _op("neg", 1, aten=True, calls="neg negative neg_"),
    _op("abs", 1, aten=True, calls="abs abs_"),
    _op("exp", 1, aten=True, calls="exp exp_"),
    _op("exp2", 1, aten=True),
    _op("expm1", 1, aten=True),
    _op("log", 1, aten=True, calls="log log_"),
    _op("log2", 1, aten=True),
    _op("log10", 1, aten=True),
    _op("log1p", 1, aten=True),
    _op("sqrt", 1, aten=True, calls="sqrt sqrt_"),
    _op("rsqrt", 1, aten=True, calls=True),
    _op("reciprocal", 1, aten=True, calls=True),
    _op("square", 1, aten=True, calls=True),
    _op("sin", 1, aten=True, calls=True),
    _op("cos", 1, aten=True, calls=True),
    _op("tan", 1, aten=True),
    _op("sinh", 1, aten=True),
    _op("cosh", 1, aten=True),
    _op("asinh", 1, aten=True),
    _op("acosh", 1, aten=True),
    _op("atanh", 1, aten=True),
    _op("atan", 1, aten=True, generic=False),
    _op("asin", 1, aten=True, generic=False),
    _op("acos", 1, aten=True, generic=False),
    _op("erf", 1, aten=True, calls=True),
    _op("erfc", 1, aten=True),
    _op("floor", 1, aten=True, calls=True),
    _op("ceil", 1, aten=True, calls=True),
    _op("round", 1),
    _op("trunc", 1, aten=True),
    _op("frac", 1, aten=True),
    _op("sign", 1, aten=True),
    _op("logical_not", 1, aten=True, boolean=True),
    _op("isnan", 1, aten=True, boolean=True),
    _op("isinf", 1, aten=True, boolean=True),
    _op("isfinite", 1, aten=True, boolean=True),
    _op("identity", 1),
    _op("cast", 1),
    # ---- unary: activations ----
    _op("relu", 1, aten=True, calls="relu relu_", module="ReLU"),
    _op("sigmoid", 1, aten=True, calls="sigmoid sigmoid_", module="Sigmoid"),
    _op("tanh", 1, aten=True, calls="tanh tanh_", module="Tanh"),
    _op("silu", 1, aten=True, calls=True, module="SiLU"),
    _op("mish", 1, aten=True, calls=True, module="Mish"),
    _op("gelu", 1),
    _op("gelu_tanh", 1),
    _op("softplus", 1, params=("beta", "threshold")),
    _op("relu6", 1, calls=True, module="ReLU6", generic=False),
    _op("hardswish", 1, calls=True, module="Hardswish", generic=False),
    _op("hardsigmoid", 1, calls=True, module="Hardsigmoid", generic=False),
    _op("selu", 1, calls=True, module="SELU", generic=False),
    _op("logsigmoid", 1, calls=True, module="LogSigmoid", generic=False),
    _op("softsign", 1, calls=True, module="Softsign", generic=False),
    _op("tanhshrink", 1, calls=True, module="Tanhshrink", generic=False),
    _op("hardtanh", 1, generic=False, params=("min_val", "max_val")),
    _op("leaky_relu", 1, generic=False, params=("negative_slope",)),
    _op("elu", 1, generic=False, params=("alpha",)),
    _op("celu", 1, generic=False, params=("alpha",)),
    _op("clamp", 1, generic=False, params=("min", "max")),
    _op("clamp_min", 1, generic=False, params=("min",)),
    _op("clamp_max", 1, generic=False, params=("max",)),
    # ---- binary ----
    _op("add", 2, calls="add add_ iadd"),
    _op("sub", 2, calls="sub sub_ subtract isub"),
    _op("mul", 2, aten="mul multiply", calls="mul mul_ multiply imul"),
    _op("div", 2, aten="true_divide", calls="div div_ divide true_divide itruediv"),
    _op("floordiv", 2),
    _op("truncdiv", 2),
    _op("remainder", 2, aten=True),
    _op("fmod", 2, aten=True),
    _op("pow", 2, calls="pow pow_"),
    _op("maximum", 2, aten="maximum fmax", calls="maximum fmax"),
    _op("minimum", 2, aten="minimum fmin", calls="minimum fmin"),
    _op("eq", 2, aten=True, calls=True, boolean=True),
    _op("ne", 2, aten="ne not_equal", calls=True, boolean=True),
    _op("lt", 2, aten="lt less", calls="lt less", boolean=True),
    _op("le", 2, aten="le less_equal", calls=True, boolean=True),
    _op("gt", 2, aten="gt greater", calls="gt greater", boolean=True),
    _op("ge", 2, aten="ge greater_equal", calls=True, boolean=True),
    _op("logical_and", 2, aten="logical_and bitwise_and", boolean=True),
    _op("logical_or", 2, aten="logical_or bitwise_or", boolean=True),
    _op("logical_xor", 2, aten="logical_xor bitwise_xor", boolean=True),
    _op("xlogy", 2, aten=True),
    _op("hypot", 2, aten=True),
    _op("logaddexp", 2, aten=True),
    _op("atan2", 2, aten=True, generic=False),
    _op("copysign", 2, aten=True, generic=False),
    # ---- other ----
    _op("where", 3),
    _op("full", 0),
    _op("iota", 0),
)

BY_NAME: dict[str, Operator] = {op.name: op for op in OPERATORS}


def _names(arity: int, field: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for op in OPERATORS:
        if op.arity != arity:
            continue
        for spelled in getattr(op, field):
            if spelled in out:
                raise ValueError(f"{field} name {spelled!r} is read as both {out[spelled]} and {op.name}")
            out[spelled] = op.name
    return out


# The generic writer's lowering: aten op name -> IR op, for the ops it needs no handler for.
ATEN_UNARY: dict[str, str] = _names(1, "aten")
ATEN_BINARY: dict[str, str] = _names(2, "aten")
# The ops whose result is a bool tensor.
BOOLEAN: frozenset[str] = frozenset(op.name for op in OPERATORS if op.boolean)
# The ops the generic writer's kernel kinds (rows, matmul, pointwise) accept.
EMITTABLE: frozenset[str] = frozenset(op.name for op in OPERATORS if op.generic)

# The conv family's fx reader: torch function or tensor method name -> IR op, and nn module class -> op.
CALL_UNARY: dict[str, str] = _names(1, "calls")
CALL_BINARY: dict[str, str] = _names(2, "calls")
NN_ACTIVATIONS: dict[str, str] = {op.module: op.name for op in OPERATORS if op.module}

# Copies: aten ops the lowering reads as the value itself, and the torch calls the conv reader does.
ATEN_IDENTITY: frozenset[str] = frozenset(
    ("clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh", "_assert_tensor_metadata")
)
CALL_IDENTITY: frozenset[str] = frozenset(("contiguous", "clone", "detach", "identity", "float"))

# Reductions the conv reader reads as calls: torch name -> the reduction (sum, mean, max, min).
CALL_REDUCTIONS: dict[str, str] = {
    "sum": "sum", "mean": "mean", "amax": "max", "amin": "min", "max": "max", "min": "min",
}  # fmt: skip

# The families of row kernels (schedule.py names a row kernel's design family after them, first match in
# this order), and the aten ops that make a kernel one of the others (any other reduction is "reduction"):
# a view of the one table of op families, tasks/op_families.py, which task signatures read too.
ROW_FAMILIES = ("scan", "norm", "softmax", "loss", "reduction")
ROW_FAMILY_OF: dict[str, str] = {name: f for name, f in ATEN_FAMILY.items() if f in ROW_FAMILIES[:-1]}
