"""Lowering handlers for matmuls (mm, linear, einsum), views (reshape, permute, slice, split) and the
convolutions kept as torch calls.

Registered into its module's `HANDLERS` with `@handles`; plugins.LOWERINGS lists the table."""

from __future__ import annotations

from typing import Any

import sympy

from kernelwright.providers.offline.frontend.ir import (
    Value,
    broadcast_shapes,
)
from kernelwright.providers.offline.frontend.lowering import HandlerTable, Lowerer
from kernelwright.providers.offline.frontend.shapes import norm_dims, shape_prod, to_sym

HANDLERS = HandlerTable()
handles = HANDLERS.handles

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
    src = norm_dims(a["source"], x.rank) if not isinstance(a["source"], int) else [a["source"] % x.rank]
    dst = (
        norm_dims(a["destination"], x.rank)
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
    start = to_sym(a["start"])
    return L.slice(a["self"], a["dim"], start, start + to_sym(a["length"]), 1)


@handles("select")
def _select(L: Lowerer, a: dict, target: Any) -> Value:
    x = a["self"]
    idx = to_sym(a["index"])
    dim = norm_dims([a["dim"]], x.rank)[0]
    if idx.is_number and int(idx) < 0:
        idx = x.shape[dim] + idx
    return L.select(x, dim, idx)


@handles("split", "split_with_sizes", "chunk", "unbind", "tensor_split")
def _split(L: Lowerer, a: dict, target: Any) -> tuple[Value, ...]:
    assert L.node is not None
    name = target.overloadpacket.__name__
    x = a["self"]
    dim = norm_dims([a.get("dim", 0)], x.rank)[0]
    vals = L.node.meta["val"]
    out = []
    start: sympy.Expr = sympy.Integer(0)
    for t in vals:
        if name == "unbind":
            out.append(L.select(x, dim, start))
            start = start + 1
            continue
        size = to_sym(t.shape[dim])
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
        return shape_prod(tuple(size[ch] for ch in chars))

    pa = L.permute(xa, [ta.index(ch) for ch in batch + free_a + contract])
    pb = L.permute(xb, [tb.index(ch) for ch in batch + contract + free_b])
    ma = L.reshape(pa, tuple(size[ch] for ch in batch) + (prod(free_a), prod(contract)))
    mb = L.reshape(pb, tuple(size[ch] for ch in batch) + (prod(contract), prod(free_b)))
    mm = L.matmul2(ma, mb)
    res = L.reshape(mm, tuple(size[ch] for ch in batch + free_a + free_b))
    order = batch + free_a + free_b
    return L.permute(res, [order.index(ch) for ch in out])
