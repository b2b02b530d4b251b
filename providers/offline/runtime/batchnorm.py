"""Normalisation kernels: BatchNorm's train-mode running-statistics update (bn_running, both writers), and
conv programs' BatchNorm eval kernel and statistics combine (bn_eval, norm_stats)."""

# mypy: check-untyped-defs
import triton
import triton.language as tl

from kernelwright.providers.offline.runtime.launch import _kw_launch

# the program texts of this module, each between its marker lines (runtime.program_text)
PROGRAM_TEXTS = ("bn_running", "bn_eval", "norm_stats")

# fmt: off
# program text: bn_running

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
# end of program text: bn_running
# program text: bn_eval

@triton.jit
def _kw_bn_eval_kernel(rm_ptr, rv_ptr, mean_ptr, rstd_ptr, C, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < C
    rm = tl.load(rm_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rv = tl.load(rv_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    tl.store(mean_ptr + offs, rm, mask=mask)
    tl.store(rstd_ptr + offs, 1.0 / tl.sqrt(rv + eps), mask=mask)
# end of program text: bn_eval
# program text: norm_stats

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
# end of program text: norm_stats
