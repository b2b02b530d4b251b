"""Pieces every kernel generator shares: a code writer, Triton expressions for pointwise ops, the small
@triton.jit math helpers a generated module may need, runtime helpers for its launchers, and printing
symbolic sizes as Python.

Everything computes in fp32 registers (ints stay ints, bools are int1); loads of fp16/bf16 are widened
and stores narrow to the output's dtype. Helpers use only `tl` primitives, so a generated module runs
the same code on a GPU and under the Triton interpreter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kernelwright.providers.offline.frontend.ir import SymScalar
from kernelwright.providers.offline.runtime import program_text

# ---- a code writer ---------------------------------------------------------------------------------


class Code:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.level + line) if line else "")

    def indent(self) -> _Indent:
        return _Indent(self)

    def jit_def(self, name: str, params: list[str]) -> None:
        """The header of a @triton.jit kernel, one parameter a line; the body follows indented."""
        self("@triton.jit")
        self(f"def {name}(")
        with self.indent():
            for p in params:
                self(p + ",")
        self("):")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def block(self, text: str) -> None:
        """A finished piece of program text (a runtime module's source, a section another Code wrote) as it
        is, at the top level: how the conv and pooling writers put their programs together."""
        assert self.level == 0, "a block of program text goes at the module's top level"
        self.lines.append(text)

    def program(self) -> str:
        """The whole module's text, ending in exactly one newline."""
        return "\n".join(self.lines).rstrip() + "\n"


class _Indent:
    def __init__(self, code: Code) -> None:
        self.code = code

    def __enter__(self) -> None:
        self.code.level += 1

    def __exit__(self, *exc: object) -> None:
        self.code.level -= 1


# ---- dtypes ----------------------------------------------------------------------------------------

TL_DTYPE = {
    torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64", torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16",
    torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.bool: "tl.int1",
}  # fmt: skip


def sizes_product(groups: list[list[int]]) -> str:
    """A launcher's expression for the product of `shape`'s sizes at the dims of `groups` (known when the
    program is written): `shape[0] * shape[2]`, or `1` for none. Written out, not a `_prod` over a
    generator: a launcher's arithmetic is paid on every call."""
    parts = [f"shape[{d}]" for dims in groups for d in dims]
    return " * ".join(parts) if parts else "1"


def cat_of(dtype: torch.dtype) -> str:
    """'f' (computed as fp32), 'i' (integer) or 'b' (int1)."""
    if dtype == torch.bool:
        return "b"
    return "f" if dtype.is_floating_point else "i"


@dataclass
class Operand:
    text: str
    cat: str  # "f" | "i" | "b"


def literal(x: Any) -> Operand:
    if isinstance(x, bool):
        return Operand("True" if x else "False", "b")
    if isinstance(x, int):
        return Operand(str(x), "i")
    x = float(x)
    if math.isinf(x):
        return Operand('float("inf")' if x > 0 else '-float("inf")', "f")
    if math.isnan(x):
        return Operand('float("nan")', "f")
    return Operand(repr(x), "f")


def as_float(o: Operand) -> str:
    if o.cat == "f":
        return o.text
    if o.text in ("True", "False") or o.text.lstrip("-").isdigit():
        return repr(float(int(o.text == "True") if o.text in ("True", "False") else int(o.text)))
    return f"{o.text}.to(tl.float32)"


def as_bool(o: Operand) -> str:
    if o.cat == "b":
        return o.text
    return f"({o.text} != 0)"


# ---- math helpers (emitted on demand) --------------------------------------------------------------

# The @triton.jit math helpers (runtime/jit_math.py), the launch helpers (runtime/launch.py) and Hopper's
# Gluon GEMM (runtime/ws_gemm.py), by the name a program calls; each text starts and ends with a newline.
_MATH = ("_kw_tanh", "_kw_log1p", "_kw_expm1", "_kw_softplus", "_kw_pow", "_kw_round", "_kw_trunc", "_kw_mul")
HELPERS: dict[str, str] = {
    **{name: program_text("jit_math", name) for name in (*_MATH, "_kw_gelu", "_kw_welford_combine")},
    **{
        name: program_text("launch", name)
        for name in (
            "_kw_tma",
            "_kw_tma_box",
            "_kw_launch",
            "_kw_wrap",
            "_kw_kept",
            "_kw_align",
            "_kw_kmajor",
        )
    },
    "_kw_ws_gemm": program_text("ws_gemm", "_kw_ws_gemm"),
}
HELPER_DEPS = {"_kw_softplus": ["_kw_log1p"], "_kw_align": ["_kw_kept"], "_kw_kmajor": ["_kw_kept"]}


@dataclass
class ExprContext:
    helpers: set[str] = field(default_factory=set)

    def use(self, name: str) -> str:
        self.helpers.add(name)
        for dep in HELPER_DEPS.get(name, []):
            self.helpers.add(dep)
        return name


def _pow_const(x: str, e: float, ctx: ExprContext) -> str | None:
    table = {1.0: x, 2.0: f"({x} * {x})", 3.0: f"({x} * {x} * {x})", 4.0: f"(({x} * {x}) * ({x} * {x}))",
             0.5: f"tl.sqrt({x})", -0.5: f"tl.rsqrt({x})", -1.0: f"(1.0 / {x})", -2.0: f"(1.0 / ({x} * {x}))",
             0.0: "1.0"}  # fmt: skip
    return table.get(float(e))


def pw_expr(op: str, args: list[Operand], out: torch.dtype, attrs: dict, ctx: ExprContext) -> Operand:
    """The Triton expression of one pointwise op on already-emitted operands.

    The one table of pointwise forms: the row writers and the conv writer (conv_epilogue) both use it.
    An op's constant parameters (slopes, bounds, softplus's beta and threshold) come as trailing
    operands."""
    oc = cat_of(out)
    if op == "cast":
        src = args[0]
        if oc == "b":
            return Operand(as_bool(src), "b")
        if oc == "f":
            return Operand(as_float(src), "f")
        if src.cat == "f":
            # torch truncates toward zero when casting floats to integers
            return Operand(f"{ctx.use('_kw_trunc')}({src.text}).to({TL_DTYPE[out]})", "i")
        return Operand(f"{src.text}.to({TL_DTYPE[out]})", "i")
    if op == "identity":
        return args[0]
    if op == "where":
        cond, on_true, on_false = args
        if oc == "f":
            return Operand(f"tl.where({as_bool(cond)}, {as_float(on_true)}, {as_float(on_false)})", "f")
        return Operand(f"tl.where({as_bool(cond)}, {on_true.text}, {on_false.text})", oc)
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
        lhs, rhs = args
        if lhs.cat == "b" and rhs.cat == "b":
            return Operand(f"({lhs.text} {sym} {rhs.text})", "b")
        if "f" in (lhs.cat, rhs.cat):
            return Operand(f"({as_float(lhs)} {sym} {as_float(rhs)})", "b")
        return Operand(f"({lhs.text} {sym} {rhs.text})", "b")
    if op in ("logical_and", "logical_or", "logical_xor"):
        sym = {"logical_and": "&", "logical_or": "|", "logical_xor": "^"}[op]
        return Operand(f"({as_bool(args[0])} {sym} {as_bool(args[1])})", "b")
    if op == "logical_not":
        return Operand(f"({as_bool(args[0])} == 0)", "b")
    if op in ("isnan", "isinf", "isfinite"):
        x = as_float(args[0])
        t = {"isnan": f"({x} != {x})", "isinf": f'(tl.abs({x}) == float("inf"))',
             "isfinite": f'(tl.abs({x}) < float("inf"))'}[op]  # fmt: skip
        return Operand(t, "b")

    if oc != "f":
        return _int_expr(op, args, oc, ctx)

    f = [as_float(a) for a in args]
    x = f[0] if f else ""
    simple = {
        "neg": f"(-{x})", "abs": f"tl.abs({x})", "exp": f"tl.exp({x})", "exp2": f"tl.exp2({x})",
        "log": f"tl.log({x})", "log2": f"tl.log2({x})", "log10": f"(tl.log({x}) * 0.4342944819032518)",
        "sqrt": f"tl.sqrt({x})", "rsqrt": f"tl.rsqrt({x})", "reciprocal": f"(1.0 / {x})",
        "sin": f"tl.sin({x})", "cos": f"tl.cos({x})", "tan": f"(tl.sin({x}) / tl.cos({x}))",
        "sigmoid": f"tl.sigmoid({x})", "relu": f"tl.maximum({x}, 0.0)", "silu": f"({x} * tl.sigmoid({x}))",
        "erf": f"tl.erf({x})", "erfc": f"(1.0 - tl.erf({x}))", "floor": f"tl.floor({x})",
        "ceil": f"tl.ceil({x})", "square": f"({x} * {x})",
        "sign": f"tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, 0.0))",
        "sinh": f"(0.5 * (tl.exp({x}) - tl.exp(-{x})))", "cosh": f"(0.5 * (tl.exp({x}) + tl.exp(-{x})))",
        "asinh": f"tl.where({x} < 0, -tl.log(-{x} + tl.sqrt({x} * {x} + 1.0)), tl.log({x} + tl.sqrt({x} * {x} + 1.0)))",
        "acosh": f"tl.log({x} + tl.sqrt({x} * {x} - 1.0))",
        "atanh": f"(0.5 * tl.log((1.0 + {x}) / (1.0 - {x})))",
    }  # fmt: skip
    if op in simple:
        return Operand(simple[op], "f")
    # activations the conv writer reads from nn modules; constants (slopes, bounds) come as args[1:]
    k0, k1 = (f[1:] + ["", ""])[:2]
    activation = {
        "relu6": f"tl.minimum(tl.maximum({x}, 0.0), 6.0)",
        "hardswish": f"({x} * tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0)",
        "hardsigmoid": f"tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)",
        "hardtanh": f"tl.minimum(tl.maximum({x}, {k0}), {k1})", "clamp": f"tl.minimum(tl.maximum({x}, {k0}), {k1})",
        "clamp_min": f"tl.maximum({x}, {k0})", "clamp_max": f"tl.minimum({x}, {k0})",
        "leaky_relu": f"tl.where({x} >= 0.0, {x}, {x} * {k0})",
        "elu": f"tl.where({x} > 0.0, {x}, {k0} * (tl.exp({x}) - 1.0))",
        "celu": f"tl.where({x} > 0.0, {x}, {k0} * (tl.exp({x} / {k0}) - 1.0))",
        "selu": f"(1.0507009873554805 * tl.where({x} > 0.0, {x}, 1.6732632423543772 * (tl.exp({x}) - 1.0)))",
        "softsign": f"({x} / (1.0 + tl.abs({x})))",
    }  # fmt: skip
    if op in activation:
        return Operand(activation[op], "f")
    if op == "softplus" and len(args) == 3:  # torch's beta and threshold: linear above the threshold
        return Operand(f"tl.where({x} * {k0} > {k1}, {x}, {ctx.use('_kw_softplus')}({x} * {k0}) / {k0})", "f")
    if op == "logsigmoid":
        return Operand(f"(-{ctx.use('_kw_softplus')}(-{x}))", "f")
    if op == "tanhshrink":
        return Operand(f"({x} - {ctx.use('_kw_tanh')}({x}))", "f")
    if op == "tanh":
        return Operand(f"{ctx.use('_kw_tanh')}({x})", "f")
    if op == "gelu":
        return Operand(f"{ctx.use('_kw_gelu')}({x})", "f")
    if op == "log1p":
        return Operand(f"{ctx.use('_kw_log1p')}({x})", "f")
    if op == "expm1":
        return Operand(f"{ctx.use('_kw_expm1')}({x})", "f")
    if op == "softplus":
        return Operand(f"{ctx.use('_kw_softplus')}({x})", "f")
    if op == "mish":
        return Operand(f"({x} * {ctx.use('_kw_tanh')}({ctx.use('_kw_softplus')}({x})))", "f")
    if op == "gelu_tanh":
        inner = f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})"
        return Operand(f"(0.5 * {x} * (1.0 + {ctx.use('_kw_tanh')}({inner})))", "f")
    if op == "round":
        return Operand(f"{ctx.use('_kw_round')}({x})", "f")
    if op == "trunc":
        return Operand(f"{ctx.use('_kw_trunc')}({x})", "f")
    if op == "frac":
        return Operand(f"({x} - {ctx.use('_kw_trunc')}({x}))", "f")
    a, b = (f + [""])[:2]
    binary = {
        "add": f"({a} + {b})", "sub": f"({a} - {b})", "mul": f"({a} * {b})", "div": f"({a} / {b})",
        "maximum": f"tl.maximum({a}, {b})", "minimum": f"tl.minimum({a}, {b})",
        "floordiv": f"tl.floor({a} / {b})", "remainder": f"({a} - tl.floor({a} / {b}) * {b})",
        "hypot": f"tl.sqrt({a} * {a} + {b} * {b})",
        "xlogy": f"tl.where({a} == 0.0, 0.0, {a} * tl.log({b}))",
    }  # fmt: skip
    if op in binary:
        return Operand(binary[op], "f")
    if op == "truncdiv":
        return Operand(f"{ctx.use('_kw_trunc')}({a} / {b})", "f")
    if op == "fmod":
        return Operand(f"({a} - {ctx.use('_kw_trunc')}({a} / {b}) * {b})", "f")
    if op == "logaddexp":
        m = f"tl.maximum({a}, {b})"
        return Operand(f"({m} + {ctx.use('_kw_log1p')}(tl.exp(-tl.abs({a} - {b}))))", "f")
    if op == "pow":
        if args[1].cat != "f" or _is_number(args[1].text):
            if _is_number(args[1].text):
                c = _pow_const(a, float(args[1].text.strip("()")), ctx)
                if c is not None:
                    return Operand(c, "f")
        return Operand(f"{ctx.use('_kw_pow')}({a}, {b})", "f")
    raise ValueError(f"no Triton form for pointwise op {op}")


def _is_number(text: str) -> bool:
    try:
        float(text.strip("()"))
        return True
    except ValueError:
        return False


def _int_expr(op: str, args: list[Operand], oc: str, ctx: ExprContext) -> Operand:
    t = [a.text if a.cat != "b" else f"{a.text}.to(tl.int64)" for a in args]
    x = t[0]
    b = t[1] if len(t) > 1 else ""
    table = {
        "neg": f"(-{x})", "abs": f"tl.abs({x})", "relu": f"tl.maximum({x}, 0)", "add": f"({x} + {b})",
        "sub": f"({x} - {b})", "mul": f"({x} * {b})", "maximum": f"tl.maximum({x}, {b})",
        "minimum": f"tl.minimum({x}, {b})", "square": f"({x} * {x})",
        "floordiv": f"tl.where(({x} % {b} != 0) & (({x} < 0) != ({b} < 0)), {x} // {b} - 1, {x} // {b})",
        "remainder": f"((({x} % {b}) + {b}) % {b})", "fmod": f"({x} % {b})", "truncdiv": f"({x} // {b})",
        "sign": f"tl.where({x} > 0, 1, tl.where({x} < 0, -1, 0))",
    }  # fmt: skip
    if op in table:
        return Operand(table[op], oc)
    if op == "pow" and _is_number(b) and float(b) in (1.0, 2.0, 3.0):
        return Operand({1.0: x, 2.0: f"({x} * {x})", 3.0: f"({x} * {x} * {x})"}[float(b)], oc)
    raise ValueError(f"no integer Triton form for pointwise op {op}")


# ---- runtime helpers (Python, in the generated module: runtime/host.py) ---------------------------

# A persistent kernel's grid: the GPU's streaming multiprocessors (4 on the CPU, Triton's interpreter), once per
# device. In RUNTIME, and in conv programs with a persistent stage (conv_codegen).
NUM_SMS = program_text("host", "num_sms")

RUNTIME = program_text("host", "host") + NUM_SMS
"""The host helpers every generic-writer program carries, in its order."""


# ---- symbolic sizes as Python ----------------------------------------------------------------------


def py_expr(e: Any, symmap: dict[sympy.Symbol, str], true_div: bool = False) -> str:
    """A sympy size expression as Python source over the forward's tensors (and `self`).

    Sizes divide with `//`; float scalars (`true_div`) with `/`.
    """
    if isinstance(e, SymScalar):
        s = py_expr(e.expr, symmap, e.is_float)
        return f"float({s})" if e.is_float else s
    if isinstance(e, bool | int | float):
        return repr(e)
    e = sympy.sympify(e)
    if e.is_Integer:
        return str(int(e))
    if e.is_Rational:
        return repr(float(e))
    if e.is_Float:
        return repr(float(e))
    if e.is_Symbol:
        if e not in symmap:
            raise ValueError(f"size symbol {e} has no source tensor")
        return symmap[e]
    name = type(e).__name__
    if isinstance(e, sympy.Add):
        parts = [py_expr(a, symmap, true_div) for a in e.args]
        return "(" + " + ".join(parts) + ")"
    if isinstance(e, sympy.Mul):
        num, den = [], []
        for a in e.args:
            if isinstance(a, sympy.Pow) and a.exp.is_Integer and int(a.exp) < 0:
                den.append(py_expr(a.base ** (-a.exp), symmap, true_div))
            elif a.is_Rational and not a.is_Integer:
                if true_div:
                    num.append(repr(float(a)))
                    continue
                if a.p != 1:
                    num.append(str(a.p))
                den.append(str(a.q))
            else:
                num.append(py_expr(a, symmap, true_div))
        text = " * ".join(num) if num else "1"
        if den:
            text = f"({text}) {'/' if true_div else '//'} ({' * '.join(den)})"
        return f"({text})"
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return f"({py_expr(e.base, symmap, true_div)} ** {int(e.exp)})"
    if isinstance(e, sympy.Pow):
        return f"({py_expr(e.base, symmap, True)} ** {py_expr(e.exp, symmap, True)})"
    if isinstance(e, sympy.floor):
        inner = e.args[0]
        text = py_expr(inner, symmap)
        return text if "//" in text else f"int({text})"
    if name in ("FloorDiv", "IntTrueDiv", "CleanDiv"):
        return f"({py_expr(e.args[0], symmap)} // {py_expr(e.args[1], symmap)})"
    if name in ("Mod", "PythonMod"):
        return f"({py_expr(e.args[0], symmap)} % {py_expr(e.args[1], symmap)})"
    if name in ("Max",):
        return "max(" + ", ".join(py_expr(a, symmap) for a in e.args) + ")"
    if name in ("Min",):
        return "min(" + ", ".join(py_expr(a, symmap) for a in e.args) + ")"
    if name in ("ToFloat", "FloatTrueDiv"):
        if name == "ToFloat":
            return f"float({py_expr(e.args[0], symmap)})"
        return f"({py_expr(e.args[0], symmap)} / {py_expr(e.args[1], symmap)})"
    raise ValueError(f"cannot print size expression {e} ({name})")


BN_RUNNING = program_text("batchnorm", "bn_running")
"""BatchNorm's running-statistics update in train mode, one Triton launch: shared by the generic and the
convolution writers."""
