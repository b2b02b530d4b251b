"""Lowering handlers for the ops that become row kernels: reductions, norms, losses and scans.

High-level ops are decomposed the way a person would write them in Triton (softmax is a max, an exp and
a sum over a row; cross entropy a log-softmax and a pick of the target column). Registered into
its module's `HANDLERS` with `@handles`; plugins.LOWERINGS lists the table."""

from __future__ import annotations

import math
from typing import Any

import sympy
import torch

from kernelwright.providers.offline.frontend.ir import (
    SymScalar,
    Value,
    broadcast_shapes,
)
from kernelwright.providers.offline.frontend.lowering import (
    HALF,
    REDUCTION_NONE,
    REDUCTION_SUM,
    HandlerTable,
    Lowerer,
    LoweringError,
    dims_arg,
)
from kernelwright.providers.offline.frontend.shapes import norm_dims, shape_prod

HANDLERS = HandlerTable()
handles = HANDLERS.handles

# ---- reductions ------------------------------------------------------------------------------------


@handles("sum", "mean", "amax", "amin", "prod", "any", "all", "nansum")
def _reduce(L: Lowerer, a: dict, target: Any) -> Value:
    name = target.overloadpacket.__name__
    op = {"amax": "max", "amin": "min", "nansum": "sum"}.get(name, name)
    x = a["self"]
    dims = dims_arg(a)
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
    return L.reduce("sum", L.cast(L.pw("ne", x, 0), torch.int64), dims_arg(a), False, torch.int64)


def _var(L: Lowerer, x: Value, dims: Any, correction: float, keepdim: bool) -> tuple[Value, Value]:
    """(variance, mean); the mean is kept (keepdim) for the subtraction and squeezed for the result.
    Half-precision input is computed in fp32 (as torch does; the caller rounds the results once)."""
    if not x.dtype.is_floating_point or x.dtype in HALF:
        x = L.cast(x, torch.float32)
    mean = L.reduce("mean", x, dims, True)
    d = L.pw("sub", x, mean)
    ss = L.reduce("sum", L.pw("mul", d, d), dims, True)
    n = L.reduce("numel", x, dims, True)
    denom = L.pw("maximum", L.pw("sub", n, float(correction)), 0.0) if correction else n
    var = L.pw("div", ss, denom)
    if not keepdim:
        var = L.squeeze(var, norm_dims(dims, x.rank) or list(range(x.rank)))
        mean = L.squeeze(mean, norm_dims(dims, x.rank) or list(range(x.rank)))
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
    x = a["self"]
    var, mean = _var(L, x, dims_arg(a), _correction(a), bool(a.get("keepdim", False)))
    out = L.pw("sqrt", var) if name.startswith("std") else var
    if x.dtype in HALF:
        out, mean = L.cast(out, x.dtype), L.cast(mean, x.dtype)
    return (out, mean) if name.endswith("_mean") else out


def _vector_norm(L: Lowerer, x: Value, ord_: Any, dims: Any, keepdim: bool) -> Value:
    if x.dtype in HALF:  # torch computes a half-precision norm in fp32 and rounds it once
        return L.cast(_vector_norm(L, L.cast(x, torch.float32), ord_, dims, keepdim), x.dtype)
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
    return _vector_norm(L, a["self"], a.get("ord", 2), dims_arg(a), bool(a.get("keepdim", False)))


@handles("norm")
def _norm(L: Lowerer, a: dict, target: Any) -> Value:
    p = a.get("p", 2)
    if isinstance(p, str):
        if p != "fro":
            raise LoweringError(f"norm with p={p!r} is not supported")
        p = 2
    return _vector_norm(L, a["self"], p, dims_arg(a), bool(a.get("keepdim", False)))


@handles("frobenius_norm")
def _frobenius_norm(L: Lowerer, a: dict, target: Any) -> Value:
    return _vector_norm(L, a["self"], 2, dims_arg(a), bool(a.get("keepdim", False)))


@handles("logsumexp")
def _logsumexp(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    if not x.dtype.is_floating_point:
        x = L.cast(x, torch.float32)
    dims = dims_arg(a)
    keepdim = bool(a.get("keepdim", False))
    m = L.reduce("max", x, dims, True)
    # torch masks infinite maxima to 0 so an all -inf row gives -inf rather than NaN.
    m0 = L.pw("where", L.pw("eq", L.pw("abs", m), math.inf), 0.0, m, dtype=m.dtype)
    s = L.reduce("sum", L.pw("exp", L.pw("sub", x, m0)), dims, True)
    out = L.pw("add", L.pw("log", s), m0)
    if not keepdim:
        out = L.squeeze(out, norm_dims(dims, x.rank) or list(range(x.rank)))
    return out


def _softmax(L: Lowerer, x: Value, dim: int, log: bool, dtype: torch.dtype) -> Value:
    # torch's softmax computes a half-precision row in fp32 and rounds once, at the end; rounding x - max
    # to fp16 before the exp (as op-by-op fp16 would) put a generated fp16 task 16 ulps off (x - max ~ -16
    # has an fp16 ulp of 1/64, which the exp turns into 0.8% of the output)
    if x.dtype != torch.float32 and (dtype == torch.float32 or x.dtype in HALF):
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
    rest = shape_prod(x.shape[2:])
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
    if reduction == REDUCTION_NONE:
        return L.squeeze(loss, [class_dim])
    # Both sums run over the same per-row values, so they share one kernel.
    total = L.reduce("sum", loss, None, False)
    if reduction == REDUCTION_SUM:
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
