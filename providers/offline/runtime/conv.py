"""What every conv program's launcher calls (conv_host), and the tiled channels-last copy of LAYOUT=nhwc
(nhwc_copy), which for an implicit GEMM also pads each group's input channels with zeros to a multiple of 16
(the packed weight's copy is padded to match, _kw_padc)."""

# ruff: noqa: B905
# mypy: check-untyped-defs
import torch
import triton
import triton.language as tl

from kernelwright.providers.offline.runtime.batchnorm import _kw_bn_eval_kernel
from kernelwright.providers.offline.runtime.launch import _kw_launch


def _kw_fit_block(n: int, cap: int, lo: int, over: int) -> int:
    # The power-of-two block, from cap (at most n's power of two) down to lo, that covers n with the least
    # work: each block costs its width, padding included, plus `over` (the reload of the other operand and the
    # loop step every block pays); the wider block on a tie. A multiple of cap keeps cap; 80 output channels
    # under a 64-wide cap take 32 (3 blocks, 96 wide, not 2 blocks, 128 wide) with over=16.
    n = int(n)
    b = max(lo, min(cap, 1 << max(0, (n - 1).bit_length())))
    best, best_cost = b, None
    while b >= lo:
        cost = -(-n // b) * (b + over)
        if best_cost is None or cost < best_cost:
            best, best_cost = b, cost
        b //= 2
    return best


# the writer's name for it (programs carry it as _kw_fit_block, pasted with inspect.getsource)
fit_block = _kw_fit_block

# the program texts of this module, each between its marker lines (runtime.program_text)
PROGRAM_TEXTS = ("conv_host", "nhwc_copy")

# fmt: off
# program text: conv_host

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


def _kw_least_padded_w(h, w, bm, widths, rows_cap):
    # Of `widths` (widest first), the tile width whose tiles, bm // width rows each (at most rows_cap), cover an
    # h x w plane with the fewest padded pixels; the widest of those.
    best_area, best_w = None, widths[0]
    for bw in widths:
        bh = max(1, min(bm // bw, rows_cap))
        area = -(-h // bh) * bh * (-(-w // bw) * bw)
        if best_area is None or area < best_area:
            best_area, best_w = area, bw
    return best_w


def _kw_box_w(h, w, bm):
    # X_TMA tiles: the width (a power of two up to bm) of the boxes of bm pixels that cover an h x w output
    # plane with the fewest padded pixels, the widest of those (96 columns: boxes 32 wide, not 128)
    return _kw_least_padded_w(h, w, bm, [1 << k for k in range(int(bm).bit_length() - 1, -1, -1)], bm)


def _kw_plane_w(h, w, bm, cap):
    # A plane tile's width: from the narrowest power of two that covers a row (at most cap) down to a quarter
    # of it (not below 32 columns, for whole-line loads), the one whose tiles, bm // width rows each (at most
    # h's power of two), cover the h x w plane with the fewest padded pixels; the widest of those. 140-wide
    # planes take 64 columns at bm=2048 (128 padded each row to 256); 83-, 112- and 512-wide keep 128.
    top = min(cap, _kw_npow2(w))
    lo = min(top, max(32, top // 4))
    return _kw_least_padded_w(h, w, bm, [top >> k for k in range(top.bit_length()) if top >> k >= lo], _kw_npow2(h))


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
# end of program text: conv_host
# program text: nhwc_copy

@triton.jit
def _kw_nhwc_kernel(x_ptr, y_ptr, C, P, sxn, sxc, CG, CP, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    # one [BLOCK_C, BLOCK_P] tile of sample n: read along the pixels, written along the channels. The copy's
    # C channels are groups of CP, the first CG of each the input's (its channels g * CG + c) and the rest
    # zeros; CP == CG: a plain copy
    pid_p = tl.program_id(0)
    pid_c = tl.program_id(1)
    n = tl.program_id(2).to(tl.int64)
    rp = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    rc = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    g = rc // CP
    c = rc - g * CP
    mask = (rc < C)[:, None] & (rp < P)[None, :]
    ci = (g * CG + c).to(tl.int64)
    v = tl.load(x_ptr + n * sxn + ci[:, None] * sxc + rp[None, :], mask=mask & (c < CG)[:, None], other=0.0)
    tl.store(y_ptr + n * P * C + rp.to(tl.int64)[None, :] * C + rc[:, None], v, mask=mask)


def _kw_nhwc(x5, groups=1, cp=0):
    # (N, C, D, H, W) -> the same values stored channels-last (N, D, H, W, C), as an (N, C, D, H, W) view.
    # cp > C // groups: each group's channels followed by zeros up to cp (a view of groups * cp channels),
    # so that an implicit GEMM's K steps over the channels start 16 elements apart
    N, C, D, H, W = x5.shape
    cg = C // groups
    cp = max(int(cp), cg)
    CY = groups * cp
    P = D * H * W
    cl = x5.permute(0, 2, 3, 4, 1)
    if cp == cg and cl.is_contiguous():
        return x5
    packed = W == 1 or x5.stride(4) == 1
    packed = packed and (H == 1 or x5.stride(3) == W) and (D == 1 or x5.stride(2) == H * W)
    if not packed or N > 65535 or P * CY == 0:
        if cp == cg:
            return cl.contiguous().permute(0, 4, 1, 2, 3)
        y = x5.new_zeros((N, D, H, W, groups, cp))
        y[..., :cg] = cl.unflatten(4, (groups, cg))
        return y.view(N, D, H, W, CY).permute(0, 4, 1, 2, 3)
    y = torch.empty((N, D, H, W, CY), device=x5.device, dtype=x5.dtype)
    BLOCK_C = min(64, _kw_npow2(CY))
    grid = (-(-P // 64), -(-CY // BLOCK_C), N)
    _kw_launch(
        _kw_nhwc_kernel, grid, x5, y, CY, P, x5.stride(0), x5.stride(1), cg, cp, BLOCK_C=BLOCK_C, BLOCK_P=64,
        num_warps=4,
    )
    return y.permute(0, 4, 1, 2, 3)


def _kw_padc(t, n):
    # t as a contiguous tensor whose last dim (the input channels of a tap-major packed weight) is
    # zero-padded to n: the padded channels of the input copy (_kw_nhwc) meet zero weights
    if t.shape[-1] == n:
        return t.contiguous()
    y = t.new_zeros((*t.shape[:-1], n))
    y[..., : t.shape[-1]] = t
    return y
# end of program text: nhwc_copy
