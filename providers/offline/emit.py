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

from kernelwright.providers.offline.emit_gluon import WS_GEMM_HELPER
from kernelwright.providers.offline.ir import SymScalar

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

HELPERS: dict[str, str] = {
    "_kw_tanh": """
@triton.jit
def _kw_tanh(x):
    # tanh from one exp; a short series near zero keeps the relative error small there
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    t = (1.0 - e) / (1.0 + e)
    x2 = x * x
    small = x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * -0.05396825396825397)))
    return tl.where(ax < 0.0625, small, tl.where(x < 0, -t, t))
""",
    "_kw_log1p": """
@triton.jit
def _kw_log1p(x):
    # log(1 + x) * x / ((1 + x) - 1) cancels the rounding of 1 + x (Goldberg)
    u = 1.0 + x
    d = u - 1.0
    return tl.where(d == 0.0, x, tl.log(u) * (x / tl.where(d == 0.0, 1.0, d)))
""",
    "_kw_expm1": """
@triton.jit
def _kw_expm1(x):
    # (exp(x) - 1) * x / log(exp(x)) cancels the rounding of exp(x) (Kahan)
    u = tl.exp(x)
    d = u - 1.0
    lu = tl.log(u)
    r = tl.where(lu == 0.0, x, d * (x / tl.where(lu == 0.0, 1.0, lu)))
    return tl.where(x > 20.0, d, tl.where(x < -30.0, -1.0, r))
""",
    "_kw_softplus": """
@triton.jit
def _kw_softplus(x):
    # log(1 + exp(x)) without overflow
    return tl.maximum(x, 0.0) + _kw_log1p(tl.exp(-tl.abs(x)))
""",
    "_kw_pow": """
@triton.jit
def _kw_pow(x, y):
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    yi = tl.floor(y)
    # a negative base: an integer exponent keeps the sign of odd powers, any other gives NaN (selects,
    # not `&`, so a scalar exponent meets a block base; the interpreter cannot `&` the two)
    odd = (yi - 2.0 * tl.floor(yi * 0.5)) != 0.0
    neg = tl.where(yi == y, tl.where(odd, -r, r), float("nan"))
    r = tl.where(x < 0, neg, r)
    r = tl.where(x == 0, tl.where(y > 0, 0.0, float("inf")), r)
    return tl.where(y == 0, 1.0, r)
""",
    "_kw_round": """
@triton.jit
def _kw_round(x):
    # round half to even, as torch.round
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(tie & odd, r - 1.0, r)
""",
    "_kw_trunc": """
@triton.jit
def _kw_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
""",
    "_kw_mul": """
@triton.jit
def _kw_mul(a, b):
    return a * b
""",
    "_kw_gelu": """
@triton.jit
def _kw_gelu(x):
    # x * Phi(x) with Phi(-a) = 2^p(a), a = |x|: p is a degree-8 weighted minimax fit of log2 Phi(-a) on
    # [0, 6] (benchmarks/probes/gelu_fit.py). About as accurate in fp32 as 0.5 * x * (1 + erf(x / sqrt 2)) and
    # half its instructions: one polynomial and one exp2, where libdevice's erf selects between two.
    a = tl.minimum(tl.abs(x), 6.0)
    p = -2.8349072636046913e-06 * a + 3.9377628127112985e-05
    p = p * a - 0.00018617995374370366
    p = p * a - 0.00013693701475858688
    p = p * a + 0.007063420955091715
    p = p * a - 0.052496179938316345
    p = p * a - 0.4592081904411316
    p = p * a - 1.1511051654815674
    p = p * a - 1.0
    e = tl.exp2(p)
    return x * tl.where(x >= 0, 1.0 - e, e)
""",
    "_kw_welford_combine": """
@triton.jit
def _kw_welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    # Chan et al.: merge two (mean, sum of squared deviations, count) summaries.
    n = n_a + n_b
    frac = tl.where(n == 0.0, 0.0, n_b / tl.where(n == 0.0, 1.0, n))
    delta = mean_b - mean_a
    return mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac, n
""",
    "_kw_tma": '''
import os

try:  # Hopper's tensor-memory-accelerator loads, through descriptors built on the host (Triton >= 3.4)
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
except ImportError:
    _TensorDescriptor = None

_TMA_DEVICES = {}


def _kw_tma_device(t):
    """Whether descriptors can read t: Triton has them, t's device has TMA and t's base is 16-byte aligned."""
    if _TensorDescriptor is None:
        return False
    dev = t.device
    ok = _TMA_DEVICES.get(dev)
    if ok is None:
        # the CPU runs Triton's interpreter, which reads descriptors too; meta tensors are an offline
        # compile's capture, whose target says (KERNELWRIGHT_CAPTURE_TMA); ROCm GPUs report CUDA-like
        # capabilities, but Hopper's TMA is NVIDIA's
        nvidia = dev.type == "cuda" and torch.version.hip is None
        ok = (
            dev.type == "cpu"
            or (dev.type == "meta" and os.environ.get("KERNELWRIGHT_CAPTURE_TMA") == "1")
            or (nvidia and torch.cuda.get_device_capability(dev)[0] >= 9)
        )
        _TMA_DEVICES[dev] = ok
    return ok and t.data_ptr() % 16 == 0


def _kw_tma(t, rows, cols, s_row, s_col, b_row, b_col, batch=0, s_batch=0):
    """(descriptor, transposed) that reads t's [rows, cols] matrix (element strides s_row, s_col) in
    [b_row, b_col] tiles, or None where TMA cannot: no descriptor support, a GPU before sm_90, neither
    stride 1, or a base or stride not 16-byte aligned (then the pointer kernel runs). transposed: the
    descriptor walks the stored transpose ([cols, rows] in [b_col, b_row] tiles), and the kernel
    transposes each tile back. batch > 0: a 3-D descriptor over `batch` such matrices s_batch apart,
    read in [1, ...] boxes.
    """
    if not _kw_tma_device(t):
        return None
    size = t.element_size()
    if batch and (s_batch <= 0 or (s_batch * size) % 16):
        return None
    lead = ([batch], [s_batch], [1]) if batch else ([], [], [])
    if s_col == 1 and s_row > 0 and (s_row * size) % 16 == 0:
        shape, strides, box, transposed = [rows, cols], [s_row, 1], [b_row, b_col], False
    elif s_row == 1 and s_col > 0 and (s_col * size) % 16 == 0:
        shape, strides, box, transposed = [cols, rows], [s_col, 1], [b_col, b_row], True
    else:
        return None
    return _TensorDescriptor(t, lead[0] + shape, lead[1] + strides, lead[2] + box), transposed
''',
    # a conv program's input boxes (X_TMA); needs _kw_tma's _kw_tma_device
    "_kw_tma_box": '''
def _kw_tma_box(x5, box_h, box_w, box_c):
    """A descriptor over a channels-last 5-D input [N, C, D, H, W] read as [N, D, H, W, C] in
    [1, 1, box_h, box_w, box_c] boxes, or None where TMA cannot (see _kw_tma_device; the channels' stride
    1 and the other strides 16-byte aligned)."""
    sn, sc, sd, sh, sw = x5.stride()
    if sc != 1 or not _kw_tma_device(x5) or any((s * x5.element_size()) % 16 for s in (sn, sd, sh, sw)):
        return None
    n, c, d, h, w = x5.shape
    return _TensorDescriptor(x5, [n, d, h, w, c], [sn, sd, sh, sw, 1], [1, 1, box_h, box_w, box_c])
''',
    # every kernel launch of every program: Triton's JIT binds and specializes each argument again on every
    # launch, tens of microseconds of host work a launch with the many arguments a fused conv stage takes;
    # this launches the compiled kernel the JIT returned for the same arguments' kinds (README: "Launchers")
    "_kw_launch": '''
import os

from triton.runtime.jit import JITFunction as _KwJIT

_KW_COMPILED = {}
# KERNELWRIGHT_DIRECT_LAUNCH=0: every launch through Triton's JIT
_KW_DIRECT = os.environ.get("KERNELWRIGHT_DIRECT_LAUNCH", "1") != "0"


def _kw_arg_key(a):
    """What Triton specializes a launch argument on, for an argument that is not an int (an int is its own
    key): a tensor's dtype, device and 16-byte alignment; a descriptor's dtype, block and alignment; a
    float, bool or string tagged with its type (True, 1 and 1.0 are equal keys in a dict otherwise)."""
    if isinstance(a, torch.Tensor):
        return (a.dtype, a.get_device(), a.data_ptr() % 16 == 0)
    if a is None:
        return None
    if hasattr(a, "block_shape") and hasattr(a, "base"):  # a host tensor descriptor
        return ("desc", a.base.dtype, a.base.get_device(), a.base.data_ptr() % 16 == 0, tuple(a.block_shape),
                getattr(a, "padding", None))
    return (type(a).__name__, a)


def _kw_launch(kernel, grid, *args, **meta):
    """kernel[grid](*args, **meta). After a GPU launch through Triton's JIT, the compiled kernel it returned
    is kept under a key that holds every int argument's value and every other argument's kind (finer than
    Triton's own specialization, which sees an int only as 1, a multiple of 16 or neither), and a launch
    with an equal key on the same device runs that compiled kernel at once, with the kernel's later
    parameters (block sizes, defaults) appended as the JIT appends them. The interpreter (whose launch
    returns no compiled kernel), an autotuned kernel and a first launch go through the JIT."""
    key = None
    if _KW_DIRECT:
        key = (kernel, tuple([a if type(a) is int else _kw_arg_key(a) for a in args]), tuple(meta.items()))
        try:
            hit = _KW_COMPILED.get(key)
        except TypeError:  # an unhashable argument: the JIT's launch every time
            key = hit = None
        if hit is not None and hit[0] == torch.cuda.current_device() and not callable(grid):
            hit[1][(*grid, 1, 1)[:3]](*args, *hit[2])
            return
    compiled = kernel[grid](*args, **meta)
    if key is None or not isinstance(kernel, _KwJIT) or not hasattr(compiled, "packed_metadata"):
        return  # the interpreter's launch, an autotuner's (its configs' arguments are not in meta), ...
    if len(_KW_COMPILED) >= 4096:  # arguments that change every call (a float computed per call): start over
        _KW_COMPILED.clear()
    later = kernel.params[len(args):]
    if all(p.name in meta or p.has_default for p in later):
        tail = [meta[p.name] if p.name in meta else p.default for p in later]
        _KW_COMPILED[key] = (torch.cuda.current_device(), compiled, tail)
''',
    "_kw_wrap": '''
def _kw_wrap(n, t):
    """Where tile columns of `t` (last dim n, unit stride) may wrap: n rounded up to 16 where t's storage
    holds every row that far (an _kw_align copy's padding; reading past n there is safe, those outputs
    are masked), else n."""
    up = -(-n // 16) * 16
    if up == n or t.stride(-1) != 1:
        return n
    last = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape[:-1], t.stride()[:-1])) + up - 1
    return up if last < t.untyped_storage().nbytes() // t.element_size() else n
''',
    "_kw_align": '''
def _kw_align(t):
    """t, or a copy whose matrix rows start a multiple of 16 elements apart (a padded buffer viewed back
    to t's shape).

    Triton vectorizes a tile load only where it can prove the rows aligned, and it knows an integer
    argument (a stride) only as divisible by 16 or not: a row stride of 5921 or 5924 fp32 elements keeps
    every tile load scalar. One copy costs far less than that in a large product. A matrix stored
    column-major is aligned the same way along its columns.
    """
    if t.dim() < 2:
        return t
    size = t.element_size()
    if t.stride(-1) != 1 and t.stride(-2) == 1 and t.shape[-2] > 1:
        m = t.mT
        u = _kw_align(m)
        return t if u is m else u.mT
    if t.stride(-1) != 1 or t.shape[-1] == 1 or t.dim() > 2 and t.stride(-3) == 0:
        return t
    if t.stride(-2) % 16 == 0 and t.data_ptr() % 16 == 0:
        return t
    cols = -(-t.shape[-1] // 16) * 16
    buf = torch.empty(*t.shape[:-1], cols, dtype=t.dtype, device=t.device)
    out = buf[..., : t.shape[-1]]
    out.copy_(t)
    return out
''',
}
HELPERS["_kw_ws_gemm"] = WS_GEMM_HELPER
HELPER_DEPS = {"_kw_softplus": ["_kw_log1p"]}

EMITTABLE = {
    "neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "tanh", "sigmoid", "relu", "silu", "mish", "erf", "erfc", "floor", "ceil", "round",
    "trunc", "sign", "logical_not", "isnan", "isinf", "isfinite", "sinh", "cosh", "asinh", "acosh", "atanh",
    "gelu", "gelu_tanh", "softplus", "square", "frac", "identity", "add", "sub", "mul", "div", "floordiv",
    "truncdiv", "remainder", "fmod", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "xlogy", "hypot", "logaddexp", "where", "cast", "full",
    "iota",
}  # fmt: skip


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


# ---- runtime helpers (Python, in the generated module) ---------------------------------------------

# A persistent kernel's grid: the GPU's streaming multiprocessors (4 on the CPU, Triton's interpreter), once per
# device. In RUNTIME, and in conv programs with a persistent stage (conv_codegen).
NUM_SMS = """
_SM_COUNTS = {}


def _num_sms(device):
    if device.type != "cuda":
        return 4
    if device.index not in _SM_COUNTS:
        _SM_COUNTS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNTS[device.index]
"""

RUNTIME = (
    '''
# Host helpers of the launchers. A forward's host work is paid on every call and, for a kernel of tens of
# microseconds, is what a timer measures: they stay plain int and tuple arithmetic (triton.cdiv and
# triton.next_power_of_2 are jit functions, several microseconds a call from Python, and
# torch.broadcast_shapes goes through torch's reference implementation), and the stride walk below is
# done once per input shape and layout.


def _cdiv(a, b):
    return -(-a // b)


def _np2(n):
    """triton.next_power_of_2 for a host int (0 for n <= 0, as it)."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def _bshapes(*shapes):
    """torch.broadcast_shapes for shapes of ints, as a tuple."""
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, n - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise RuntimeError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
                out[i] = d
    return tuple(out)


def _walk_strides(t, shape, groups):
    for copy in (False, True):
        st = (t.contiguous() if copy else t).expand(shape).stride()
        out = []
        for g in groups:
            stride, step = 0, None
            for d in reversed(g):
                if shape[d] == 1:
                    continue
                if step is None:
                    stride = st[d]
                elif st[d] != step:
                    break
                step = st[d] * shape[d]
            else:
                out.append(stride)
                continue
            break
        else:
            return copy, out
    raise AssertionError("a contiguous tensor always walks with one stride per group")


_STRIDE_WALKS = {}


def _group_strides(t, shape, groups):
    """(tensor, element strides of it broadcast to `shape`, one per group of dims walked as one).

    A group is a run of dims; it can be walked with one stride when each dim's stride is the next one's
    stride times its size. A view that breaks this (a rare permuted layout) is copied to contiguous
    first, and the copy is what the kernel must read: always use the returned tensor. The walk is
    remembered per (shape, strides, target shape, groups).
    """
    key = (t.shape, t.stride(), tuple(shape), str(groups))
    walk = _STRIDE_WALKS.get(key)
    if walk is None:
        if len(_STRIDE_WALKS) > 4096:
            _STRIDE_WALKS.clear()
        walk = _STRIDE_WALKS[key] = _walk_strides(t, shape, groups)
    copy, out = walk
    return (t.contiguous() if copy else t), list(out)


def _prod(values):
    p = 1
    for v in values:
        p *= v
    return p

'''
    + NUM_SMS
)


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


BN_RUNNING = """
@triton.jit
def _kw_bn_update_kernel(rm_ptr, rv_ptr, nbt_ptr, mean_ptr, rstd_ptr, C, momentum, eps, corr,
                         CUMULATIVE: tl.constexpr, HAS_NBT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < C
    m = momentum
    if HAS_NBT:
        n = tl.load(nbt_ptr) + 1
        tl.store(nbt_ptr, n)
        if CUMULATIVE:
            m = 1.0 / n.to(tl.float32)
    mean = tl.load(mean_ptr + offs, mask=mask, other=0.0)
    rstd = tl.load(rstd_ptr + offs, mask=mask, other=1.0)
    var = (1.0 / (rstd * rstd) - eps) * corr
    rm = tl.load(rm_ptr + offs, mask=mask, other=0.0)
    rv = tl.load(rv_ptr + offs, mask=mask, other=0.0)
    tl.store(rm_ptr + offs, (rm * (1.0 - m) + m * mean).to(rm_ptr.dtype.element_ty), mask=mask)
    tl.store(rv_ptr + offs, (rv * (1.0 - m) + m * var).to(rv_ptr.dtype.element_ty), mask=mask)


def _kw_bn_running(bn, mean, rstd, count):
    # BatchNorm's train-mode update of its running statistics (and batch count), from the batch
    # statistics the kernels computed; the variance is kept unbiased, as BatchNorm keeps it
    nbt = bn.num_batches_tracked
    C = bn.running_mean.numel()
    _kw_launch(
        _kw_bn_update_kernel, (1,), bn.running_mean, bn.running_var, nbt if nbt is not None else mean,
        mean.contiguous(), rstd.contiguous(), C, float(bn.momentum or 0.0), float(bn.eps),
        float(count) / max(float(count) - 1.0, 1.0), CUMULATIVE=bn.momentum is None, HAS_NBT=nbt is not None,
        BLOCK=1 << max(C - 1, 0).bit_length(),  # the next power of two, in ints (not triton's jit function)
    )
"""
"""BatchNorm's running-statistics update in train mode, one Triton launch: shared by the generic and the
convolution writers."""
