"""The pooling writer's kernels and host side: the averaging step, the rows and flat kernels and _kw_pool."""

# mypy: check-untyped-defs
import torch
import triton
import triton.language as tl

from kernelwright.providers.offline.runtime.launch import _kw_launch


def _kw_rows_tile(oh: int, ow: int, block: int, block_h: int, num_warps: int) -> tuple[int, int, int]:
    """What a `rows` program launches for an OH x OW output plane: BLOCK no wider than the row (a power of
    two, at least 32), BLOCK_H no taller than the plane, at most one warp per 64 outputs (two per thread).
    The program's launcher calls this; the writer calls it to tell configs that launch alike apart."""
    block = min(block, max(32, 1 << (ow - 1).bit_length()))
    block_h = min(block_h, 1 << (oh - 1).bit_length())
    return block, block_h, max(1, min(num_warps, block * block_h // 64))


# the writer's name for it (programs carry it as _kw_rows_tile, pasted with inspect.getsource)
rows_tile = _kw_rows_tile

# the program texts of this module, each between its marker lines (runtime.program_text)
PROGRAM_TEXTS = ("average", "rows_kernel", "flat_kernel", "host")

# fmt: off
# program text: average

@triton.jit
def _kw_pool_average(
    acc, d0, h0, w0, D, H, W, DIVISOR,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
):
    """Window sums to averages as PyTorch divides them: by divisor_override, else by the window clipped to
    the padded input, then (without count_include_pad) to the input itself. The windows' first indices d0,
    h0, w0 broadcast against acc (both kernels call this)."""
    if HAS_DIVISOR:
        out = acc / DIVISOR
    else:
        d1 = tl.minimum(d0 + KD, D + PD)
        h1 = tl.minimum(h0 + KH, H + PH)
        w1 = tl.minimum(w0 + KW, W + PW)
        if COUNT_PAD:
            dn, hn, wn = d1 - d0, h1 - h0, w1 - w0
        else:
            dn = tl.minimum(d1, D) - tl.maximum(d0, 0)
            hn = tl.minimum(h1, H) - tl.maximum(h0, 0)
            wn = tl.minimum(w1, W) - tl.maximum(w0, 0)
        count = dn.to(tl.int32) * hn.to(tl.int32) * wn.to(tl.int32)
        out = acc / count.to(acc.dtype)
    return out
# end of program text: average
# program text: rows_kernel

@triton.jit
def _kw_pool_rows_kernel(
    x_ptr, y_ptr,
    D, H, W, OD, OH, OW, DIVISOR, OH_BLOCKS, W_BLOCKS,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    IS_MAX: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
    F64: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK: tl.constexpr,
):
    """A [BLOCK_H, BLOCK] tile of one (batch, od) output plane per program: BLOCK_H output rows, BLOCK
    outputs of each. The plane's indices and its 64-bit base offsets are scalars; offsets inside one input
    or output plane are 32-bit (the launcher checks they fit). Programs run along a row first."""
    pid = tl.program_id(0).to(tl.int64)
    col = (pid % W_BLOCKS).to(tl.int32)
    rest = pid // W_BLOCKS
    oh = (rest % OH_BLOCKS).to(tl.int32) * BLOCK_H + tl.arange(0, BLOCK_H)
    rest = rest // OH_BLOCKS
    od = rest % OD
    n = rest // OD
    ow = col * BLOCK + tl.arange(0, BLOCK)
    live = (oh < OH)[:, None] & (ow < OW)[None, :]
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    acc_type = tl.float64 if F64 else tl.float32
    if IS_MAX:
        acc = tl.full([BLOCK_H, BLOCK], float("-inf"), acc_type)
    else:
        acc = tl.zeros([BLOCK_H, BLOCK], acc_type)
    for kd in tl.static_range(KD):
        di = d0 + kd * DD
        d_ok = (di >= 0) & (di < D)
        src = x_ptr + (n * D + di) * H * W  # the input plane, a scalar 64-bit offset
        for kh in tl.static_range(KH):
            hi = h0 + kh * DH
            row_ok = live & (d_ok & (hi >= 0) & (hi < H))[:, None]
            row = src + (hi * W)[:, None]
            for kw in tl.static_range(KW):
                wi = w0 + kw * DW
                ok = row_ok & ((wi >= 0) & (wi < W))[None, :]
                if IS_MAX:
                    v = tl.load(row + wi[None, :], mask=ok, other=float("-inf")).to(acc_type)
                    acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)  # NaN wins, as in PyTorch
                else:
                    acc += tl.load(row + wi[None, :], mask=ok, other=0.0).to(acc_type)
    if not IS_MAX:
        acc = _kw_pool_average(
            acc, d0, h0[:, None], w0[None, :], D, H, W, DIVISOR, KD, KH, KW, PD, PH, PW, COUNT_PAD, HAS_DIVISOR
        )
    out = y_ptr + (n * OD + od) * OH * OW + (oh * OW)[:, None] + ow[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=live)
# end of program text: rows_kernel
# program text: flat_kernel

@triton.jit
def _kw_pool_kernel(
    x_ptr, y_ptr, total,
    D, H, W, OD, OH, OW, DIVISOR,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    IS_MAX: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
    WIDE: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr,
):
    """BLOCK outputs of a (batch, OD, OH, OW) pooling per program; the window walked at compile time."""
    if WIDE:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = offs < total
    ow = offs % OW
    rest = offs // OW
    oh = rest % OH
    rest = rest // OH
    od = rest % OD
    n = rest // OD
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    base = n * D * H * W
    acc_type = tl.float64 if F64 else tl.float32
    if IS_MAX:
        acc = tl.full([BLOCK], float("-inf"), acc_type)
    else:
        acc = tl.zeros([BLOCK], acc_type)
    for kd in tl.static_range(KD):
        di = d0 + kd * DD
        d_ok = (di >= 0) & (di < D)
        for kh in tl.static_range(KH):
            hi = h0 + kh * DH
            dh_ok = d_ok & (hi >= 0) & (hi < H)
            row = (di * H + hi) * W
            for kw in tl.static_range(KW):
                wi = w0 + kw * DW
                ok = live & dh_ok & (wi >= 0) & (wi < W)
                if IS_MAX:
                    v = tl.load(x_ptr + base + row + wi, mask=ok, other=float("-inf")).to(acc_type)
                    # NaN wins, as in PyTorch: (v > acc) is false for NaN, (v != v) is not
                    acc = tl.where((v > acc) | (v != v), v, acc)
                else:
                    v = tl.load(x_ptr + base + row + wi, mask=ok, other=0.0).to(acc_type)
                    acc += v
    if not IS_MAX:
        acc = _kw_pool_average(acc, d0, h0, w0, D, H, W, DIVISOR, KD, KH, KW, PD, PH, PW, COUNT_PAD, HAS_DIVISOR)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=live)
# end of program text: flat_kernel
# program text: host

def _kw_tuple(value, nd):
    if isinstance(value, int):
        return [value] * nd
    value = [int(v) for v in value]
    return value * nd if len(value) == 1 else value


def _kw_out_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling output size for one dim."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _kw_pool(x, pool, nd, is_max, design, block, num_warps, block_h=1):
    if getattr(pool, "return_indices", False):
        raise NotImplementedError("max pooling that returns indices")
    kernel = _kw_tuple(pool.kernel_size, nd)
    stride = _kw_tuple(pool.stride if pool.stride is not None else pool.kernel_size, nd)
    padding = _kw_tuple(pool.padding, nd)
    dilation = _kw_tuple(getattr(pool, "dilation", 1), nd)
    ceil_mode = bool(pool.ceil_mode)
    if x.dim() not in (nd + 1, nd + 2):
        raise ValueError(f"expected a {nd + 1}-D or {nd + 2}-D input, got {tuple(x.shape)}")
    lead = x.shape[: x.dim() - nd]
    spatial = list(x.shape[x.dim() - nd:])
    out_spatial = [
        _kw_out_size(spatial[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode) for i in range(nd)
    ]
    pad = 3 - nd  # 1-D and 2-D pooling as 3-D pooling with size-1 dims in front
    size3, out3 = [1] * pad + spatial, [1] * pad + out_spatial
    k3, s3 = [1] * pad + kernel, [1] * pad + stride
    p3, d3 = [0] * pad + padding, [1] * pad + dilation
    x = x.contiguous()
    y = torch.empty((*lead, *out_spatial), device=x.device, dtype=x.dtype)
    total = y.numel()
    if total == 0:
        return y
    divisor = getattr(pool, "divisor_override", None)
    count_pad = bool(getattr(pool, "count_include_pad", True))
    consts = dict(IS_MAX=is_max, COUNT_PAD=count_pad, HAS_DIVISOR=bool(divisor), F64=x.dtype == torch.float64)
    if design == "rows":
        od_, oh_, ow_ = out3
        tile_w, tile_h, warps = _kw_rows_tile(oh_, ow_, block, block_h, num_warps)
        w_blocks, oh_blocks = -(-ow_ // tile_w), -(-oh_ // tile_h)
        programs = total // (oh_ * ow_) * oh_blocks * w_blocks
        # 32-bit offsets inside one input or output plane, one grid axis
        if max(size3[1] * size3[2], oh_ * ow_) < 2**31 and programs <= 2**31 - 1:
            _kw_launch(
                _kw_pool_rows_kernel, (programs,),
                x, y, *size3, *out3, int(divisor or 1), oh_blocks, w_blocks, *k3, *s3, *p3, *d3,
                BLOCK_H=tile_h, BLOCK=tile_w, num_warps=warps, **consts,
            )
            return y
    grid = (-(-total // block),)  # ceil division in ints: triton.cdiv is a jit function
    _kw_launch(
        _kw_pool_kernel, grid, x, y, total, *size3, *out3, int(divisor or 1), *k3, *s3, *p3, *d3,
        WIDE=max(x.numel(), total) >= 2**31 - 1, BLOCK=block, num_warps=num_warps, **consts,
    )
    return y
# end of program text: host
