"""Lowering handlers for elementwise aten ops and constants (add, where, clamp, activations, full, arange).

Registered into its module's `HANDLERS` with `@handles`; plugins.LOWERINGS lists the table."""

from __future__ import annotations

import math
from typing import Any

import torch

from kernelwright.providers.offline.frontend.ir import (
    Value,
)
from kernelwright.providers.offline.frontend.lowering import (
    HALF,
    HandlerTable,
    Lowerer,
    LoweringError,
)
from kernelwright.providers.offline.operators import ATEN_IDENTITY

HANDLERS = HandlerTable()
handles = HANDLERS.handles

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
    xf = L.opmath(x)
    neg = L.pw("mul", L.pw("expm1", L.pw("mul", xf, in_scale)), alpha * scale)  # SymScalars multiply too
    return L.cast(L.pw("where", L.pw("gt", xf, 0.0), L.pw("mul", xf, scale), neg, dtype=xf.dtype), x.dtype)


@handles("hardsigmoid")
def _hardsigmoid(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    xf = L.opmath(x)
    return L.cast(L.pw("div", L.pw("minimum", L.pw("maximum", L.pw("add", xf, 3.0), 0.0), 6.0), 6.0), x.dtype)


@handles("hardswish")
def _hardswish(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    xf = L.opmath(x)
    gate = L.pw("minimum", L.pw("maximum", L.pw("add", xf, 3.0), 0.0), 6.0)
    return L.cast(L.pw("div", L.pw("mul", xf, gate), 6.0), x.dtype)


@handles("softplus")
def _softplus(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    xf = L.opmath(x)
    beta, threshold = a.get("beta", 1.0), a.get("threshold", 20.0)
    bx = L.pw("mul", xf, beta) if beta != 1 else xf
    soft = L.pw("softplus", bx)
    if beta != 1:
        soft = L.pw("div", soft, beta)
    return L.cast(L.pw("where", L.pw("gt", bx, threshold), xf, soft, dtype=xf.dtype), x.dtype)


@handles("log_sigmoid_forward", "log_sigmoid")
def _log_sigmoid(L: Lowerer, a: dict, target: Any) -> Any:
    x = a["self"]
    out = L.cast(L.pw("neg", L.pw("softplus", L.pw("neg", L.opmath(x)))), x.dtype)
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
    if not (isinstance(x, Value) and x.dtype in HALF):
        return L.pw("add", x, L.pw("mul", w, L.pw("sub", end, x)))
    # one op in torch: computed in fp32, rounded once to the half dtype
    xf, ef, wf = L.opmath(x), L.cast(end, torch.float32), L.cast(w, torch.float32)
    return L.cast(L.pw("add", xf, L.pw("mul", wf, L.pw("sub", ef, xf))), x.dtype)


@handles("addcmul", "addcdiv")
def _addc(L: Lowerer, a: dict, target: Any) -> Value:
    op = "mul" if target.overloadpacket.__name__.startswith("addcmul") else "div"
    x, t1, t2 = a["self"], a["tensor1"], a["tensor2"]
    half = isinstance(x, Value) and x.dtype in HALF
    if half:  # one op in torch: computed in fp32, rounded once
        x, t1, t2 = L.opmath(x), L.cast(t1, torch.float32), L.cast(t2, torch.float32)
    t = L.pw(op, t1, t2)
    v = a.get("value", 1)
    if v != 1:
        t = L.pw("mul", t, v)
    out = L.pw("add", x, t)
    return L.cast(out, a["self"].dtype) if half else out


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


@handles(*sorted(ATEN_IDENTITY))
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
