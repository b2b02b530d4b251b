"""Source text every conv program carries: the kernel that reads a BatchNorm's running statistics, the
kernel that combines a normalisation's statistics partials, and the host helpers its launcher calls; with
LAYOUT=nhwc, also the tiled transpose that copies the input to channels-last (NHWC_COPY). A persistent
stage's grid is sized by emit.NUM_SMS, the helper the other writers' programs use.

The math helpers the pointwise ops call (_kw_tanh, _kw_softplus, ...) are emit.HELPERS, the ones every
offline writer uses, and come in only where a program's ops call them.
"""

from __future__ import annotations

BN_EVAL_KERNEL = """
@triton.jit
def _kw_bn_eval_kernel(rm_ptr, rv_ptr, mean_ptr, rstd_ptr, C, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < C
    rm = tl.load(rm_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rv = tl.load(rv_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    tl.store(mean_ptr + offs, rm, mask=mask)
    tl.store(rstd_ptr + offs, 1.0 / tl.sqrt(rv + eps), mask=mask)
"""

NORM_STATS_KERNEL = """
@triton.jit
def _kw_norm_stats(
    part_ptr, mean_ptr, rstd_ptr, T, C, CG, G, NS, eps, rm_ptr, rv_ptr, nbt_ptr, momentum, corr,
    PER_SAMPLE: tl.constexpr, UPDATE: tl.constexpr, HAS_NBT: tl.constexpr, BLOCK_T: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    # Combines per-tile (count, sum, centred sum of squares) partials into mean and 1/std for one
    # (sample, group) (PER_SAMPLE) or one channel over every sample (batch norm), with Chan's formula.
    # UPDATE (a train-mode BatchNorm with a momentum, one channel per program): also moves the channel's
    # running mean and unbiased variance (variance x corr) toward the batch's, and program 0 counts the
    # batch in num_batches_tracked (HAS_NBT), in this launch rather than one of their own.
    pid = tl.program_id(0)
    if PER_SAMPLE:
        n_lo = pid // G
        g = pid - n_lo * G
        n_cnt = 1
    else:
        n_lo = pid * 0
        g = pid
        n_cnt = NS
    rt = tl.arange(0, BLOCK_T)
    rc = tl.arange(0, BLOCK_C)
    acc_n = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32)
    acc_s = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32)
    # rows (sample, tile) are consecutive in part: one flat loop over the samples' tiles
    r_lo = n_lo.to(tl.int64) * T
    for r0 in range(0, n_cnt * T, BLOCK_T):
        for c0 in range(0, CG, BLOCK_C):
            tt = r0 + rt
            cc = g * CG + c0 + rc
            msk = (tt < n_cnt * T)[:, None] & ((c0 + rc) < CG)[None, :]
            base = part_ptr + ((r_lo + tt[:, None]) * 3) * C + cc[None, :]
            acc_n += tl.load(base, mask=msk, other=0.0)
            acc_s += tl.load(base + C, mask=msk, other=0.0)
    cnt = tl.sum(tl.sum(acc_n, axis=1), axis=0)
    mean = tl.sum(tl.sum(acc_s, axis=1), axis=0) / cnt
    acc_m = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32)
    for r0 in range(0, n_cnt * T, BLOCK_T):
        for c0 in range(0, CG, BLOCK_C):
            tt = r0 + rt
            cc = g * CG + c0 + rc
            msk = (tt < n_cnt * T)[:, None] & ((c0 + rc) < CG)[None, :]
            base = part_ptr + ((r_lo + tt[:, None]) * 3) * C + cc[None, :]
            pn = tl.load(base, mask=msk, other=0.0)
            ps = tl.load(base + C, mask=msk, other=0.0)
            pm = tl.load(base + 2 * C, mask=msk, other=0.0)
            dm = ps / tl.maximum(pn, 1.0) - mean
            acc_m += tl.where(pn > 0.0, pm + pn * dm * dm, 0.0)
    var = tl.sum(tl.sum(acc_m, axis=1), axis=0) / cnt
    tl.store(mean_ptr + pid, mean)
    tl.store(rstd_ptr + pid, 1.0 / tl.sqrt(var + eps))
    if UPDATE:
        if HAS_NBT:
            if pid == 0:
                tl.store(nbt_ptr, tl.load(nbt_ptr) + 1)
        rm = tl.load(rm_ptr + pid).to(tl.float32)
        rv = tl.load(rv_ptr + pid).to(tl.float32)
        tl.store(rm_ptr + pid, (rm * (1.0 - momentum) + momentum * mean).to(rm_ptr.dtype.element_ty))
        tl.store(rv_ptr + pid, (rv * (1.0 - momentum) + momentum * var * corr).to(rv_ptr.dtype.element_ty))
"""

# LAYOUT=nhwc: the input copied to channels-last by a tiled transpose. torch's permute + contiguous copy
# moved 128 MiB (bf16, 64 x 64 x 128 x 128) in 0.295 ms on an H200, 0.9 TB/s, as long as the convolution
# kernel after it took; a [C, P] -> [P, C] tile copy reads and writes whole lines.
NHWC_COPY = """
@triton.jit
def _kw_nhwc_kernel(x_ptr, y_ptr, C, P, sxn, sxc, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    # one [BLOCK_C, BLOCK_P] tile of sample n: read along the pixels, written along the channels
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    rp = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    rc = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rc < C)[:, None] & (rp < P)[None, :]
    v = tl.load(x_ptr + n * sxn + rc.to(tl.int64)[:, None] * sxc + rp[None, :], mask=mask)
    tl.store(y_ptr + n * P * C + rp.to(tl.int64)[None, :] * C + rc[:, None], v, mask=mask)


def _kw_nhwc(x5):
    # (N, C, D, H, W) -> the same values stored channels-last (N, D, H, W, C), as an (N, C, D, H, W) view
    N, C, D, H, W = x5.shape
    P = D * H * W
    cl = x5.permute(0, 2, 3, 4, 1)
    if cl.is_contiguous():
        return x5
    packed = W == 1 or x5.stride(4) == 1
    packed = packed and (H == 1 or x5.stride(3) == W) and (D == 1 or x5.stride(2) == H * W)
    if not packed or N > 65535 or P * C == 0:
        return cl.contiguous().permute(0, 4, 1, 2, 3)
    y = torch.empty((N, D, H, W, C), device=x5.device, dtype=x5.dtype)
    BLOCK_C = min(64, _kw_npow2(C))
    grid = (-(-P // 64), -(-C // BLOCK_C), N)
    _kw_launch(
        _kw_nhwc_kernel, grid, x5, y, C, P, x5.stride(0), x5.stride(1), BLOCK_C=BLOCK_C, BLOCK_P=64, num_warps=4
    )
    return y.permute(0, 4, 1, 2, 3)
"""

HOST_HELPERS = """
def _kw_bn_eval_stats(bn, C):
    # eval mode: the running statistics normalise
    mean = torch.empty((1, C), device=bn.running_mean.device, dtype=torch.float32)
    rstd = torch.empty((1, C), device=bn.running_mean.device, dtype=torch.float32)
    _kw_launch(
        _kw_bn_eval_kernel, (1,), bn.running_mean, bn.running_var, mean, rstd, C, float(bn.eps),
        BLOCK=_kw_npow2(C),
    )
    return mean, rstd


def _kw_tup(v, n):
    if isinstance(v, int):
        return (int(v),) * n
    v = tuple(int(i) for i in v)
    return v * n if len(v) == 1 else v


def _kw_pad3(v, n, fill):
    return (fill,) * (3 - n) + tuple(v)


def _kw_npow2(v):
    return 1 << max(0, (int(v) - 1).bit_length())


def _kw_box_w(h, w, bm):
    # X_TMA tiles: the width (a power of two up to bm) of the boxes of bm pixels that cover an h x w output
    # plane with the fewest padded pixels, the widest of those (96 columns: boxes 32 wide, not 128)
    best_area, best_w, bw = None, 1, 1
    while bw <= bm:
        bh = bm // bw
        area = -(-h // bh) * bh * (-(-w // bw) * bw)
        if best_area is None or area <= best_area:
            best_area, best_w = area, bw
        bw *= 2
    return best_w


def _kw_as5d(t, nd):
    # (N, C, *spatial) -> (N, C, D, H, W) as a view
    for _ in range(3 - nd):
        t = t.unsqueeze(2)
    return t


def _kw_cached(owner, key, w, make):
    # Packed weights are reused while the parameter is unchanged (same storage, same version).
    cache = owner.__dict__.setdefault("_kw_cache", {})
    tag = (w.data_ptr(), w._version, w.dtype, w.device, tuple(w.shape))
    hit = cache.get(key)
    if hit is None or hit[0] != tag:
        hit = (tag, make(w))
        cache[key] = hit
    return hit[1]


def _kw_ostrides(t, align, n, c):
    # Strides of an operand on the logical (N, C, D, H, W) grid; 0 where it is broadcast.
    if t.dim() != len(align):
        raise ValueError(f"operand of shape {list(t.shape)} has {t.dim()} dims, expected {len(align)}")
    st = [0, 0, 0, 0, 0]
    for j, a in enumerate(align):
        if a is not None and t.shape[j] != 1:
            if (a, t.shape[j]) in ((0, n), (1, c)) or a > 1:
                st[a] = t.stride(j)
            else:
                raise ValueError(f"operand of shape {list(t.shape)} does not broadcast to batch {n}, channels {c}")
    return st


def _kw_pool_params(parts, nd):
    # (kernel, stride, padding, dilation) per logical spatial dim; several non-overlapping pools in a
    # row compose into one window of the product size.
    k, s, p, d = [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 1]
    for i, (kk, ss, pp, dd) in enumerate(parts):
        kk, ss = _kw_pad3(_kw_tup(kk, nd), nd, 1), _kw_pad3(_kw_tup(ss, nd), nd, 1)
        pp, dd = _kw_pad3(_kw_tup(pp, nd), nd, 0), _kw_pad3(_kw_tup(dd, nd), nd, 1)
        if i and (kk != ss or any(pp) or any(x != 1 for x in dd) or k != s or any(p) or any(x != 1 for x in d)):
            raise ValueError("only non-overlapping pools without padding compose")
        if i == 0:
            k, s, p, d = list(kk), list(ss), list(pp), list(dd)
        else:
            k = [a * b for a, b in zip(k, kk)]
            s = [a * b for a, b in zip(s, ss)]
    return k, s, p, d


def _kw_pool_out(size, k, s, p, d):
    return [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(3)]
"""
