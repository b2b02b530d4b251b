"""Writing a ConvPlan as a Triton program: the convolution as an implicit GEMM with the epilogue fused.

The program is split into stages wherever the work needs the whole tensor before it can go on:
- stage 0 computes the convolution tile by tile ([BLOCK_M output pixels] x [BLOCK_N output channels]),
  applies the pointwise/channel-reduction epilogue in registers, pools windows by recomputing the
  window's pixels inside the same kernel, and ends with a sink;
- a normalisation ends a stage with a "stats" sink (the value is stored and each tile writes its
  count, sum and centred sum of squares per channel), a small kernel combines those partials (Chan's
  parallel formula, numerically stable) into mean and 1/std, and the next stage normalises while
  loading;
- a normalisation whose value reaches the output only through affine per-channel work and a sum or
  mean over every spatial dim (plan.fold, conv_ir.NormFold) stores nothing: the stage before it
  writes only its statistics partials and a one-program-per-sample kernel computes the reduction
  from them (each channel's mean of the normalised value is rstd * (sum / count - mean));
- a reduction over spatial dims ends a stage with atomics into a zero/-inf initialised buffer (a tile
  first reduces its own rows when it lies within one sample);
- everything else (pointwise ops, reductions and softmax over channels, a second pooling) stays in
  registers. Reductions over channels need every channel in one tile (BLOCK_N >= channels): a grouped
  convolution writes its output first and a load stage does the rest.

Convolution designs (all shape-generic: every size and stride is a run-time argument):
- implicit_gemm: K loop over (kernel tap, input-channel block); a transposed convolution is split by
  output phase (o mod stride), so each program visits only the taps that reach its pixels.
- implicit_gemm_flatk: K is (input channel, tap) flattened, for few input channels per group; a
  transposed convolution gathers input positions with the stride-divisibility check per element.
- direct_depthwise: no tensor cores; one input channel per output channel, fp32 FMAs over the taps.
The input layout inside the kernel is a config knob: nchw reads the input as it is, nhwc copies it
to channels-last first so a tile's channel slice is contiguous. With RECOMPUTE, a normalisation right
after the convolution's stage gets a statistics-only first pass and a second pass that recomputes the
convolution (less memory traffic when the convolution is cheap). Weights are repacked once per
parameter version to [groups, OC_G, K] with K (taps x input channels, in the kernel's order) contiguous,
so the B tile of tl.dot is K-major like the A tile of an nhwc input: Hopper's TF32 tensor-core MMAs
(DOT=tf32x3 / tf32) read both operands K-major from shared memory.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelwright.providers.offline.conv_ir import SPATIAL, ConvConfig, ConvPlan, Op
from kernelwright.providers.offline.emit import BN_RUNNING, HELPERS, Code
from kernelwright.providers.protocol import KernelHeader

DESIGNS = ("implicit_gemm", "implicit_gemm_flatk", "direct_depthwise")


class ConvEmitError(ValueError):
    """The plan cannot be written with this design (a one-line reason)."""


# ---------------------------------------------------------------------------------------------------
# stage partition


@dataclass
class _Stage:
    index: int
    source: str  # "conv" | "load"
    src_op: int  # the op whose value the source provides
    src_cred: bool = False  # the loaded buffer has one channel
    norm: Op | None = None  # normalisation applied in this stage (statistics from stage in_buf)
    norm_at_load: bool = True  # applied to the loaded value (else it is an op after the replayed ones)
    pre: list[Op] = field(default_factory=list)
    pool: Op | None = None
    post: list[Op] = field(default_factory=list)
    value: int = -1  # the op whose value leaves the stage
    sink: str = "store"  # "store" | "stats" (store + statistics) | "stats_only" | "sreduce"
    sreduce: Op | None = None
    next_norm: Op | None = None  # for a stats sink: the norm that follows
    final: bool = False
    in_buf: int = -1  # index of the stage whose buffer is loaded
    fold: bool = False  # the norm + affine work + full spatial reduction, from the statistics' partials

    @property
    def ops(self) -> list[Op]:
        return self.pre + self.post

    @property
    def needs_cfull(self) -> bool:
        return any(op.kind == "creduce" for op in self.ops)


def partition(plan: ConvPlan, *, split_after_conv: bool = False) -> list[_Stage]:
    """The plan's ops as stages (see the module docstring)."""
    stages: list[_Stage] = []
    cur = _Stage(index=0, source="conv", src_op=0)
    if split_after_conv:
        cur.value, cur.sink = 0, "store"
        stages.append(cur)
        cur = _Stage(index=1, source="load", src_op=0, in_buf=0)

    def close(value: int, sink: str) -> None:
        cur.value, cur.sink = value, sink
        stages.append(cur)

    for op in plan.ops[1:]:
        if op.kind == "pool":
            if cur.pool is None:
                cur.pool = op
                continue
            close(op.args[0], "store")
            cur = _Stage(index=len(stages), source="load", src_op=op.args[0], in_buf=len(stages) - 1, pool=op)
        elif op.kind == "norm":
            close(op.args[0], "stats")
            stages[-1].next_norm = op
            cur = _Stage(index=len(stages), source="load", src_op=op.id, norm=op, in_buf=len(stages) - 1)
        elif op.kind == "sreduce":
            close(op.args[0], "sreduce")
            stages[-1].sreduce = op
            cur = _Stage(
                index=len(stages), source="load", src_op=op.id, src_cred=op.cred, in_buf=len(stages) - 1
            )
        elif cur.pool is not None:
            cur.post.append(op)
        else:
            cur.pre.append(op)
    cur.value = plan.output
    cur.sink = "store"
    cur.final = True
    stages.append(cur)
    # A stage's loaded buffer has one channel when the value it stored was reduced over channels.
    for st in stages[1:]:
        if st.source == "load" and st.sreduce is None:
            prev = stages[st.in_buf]
            st.src_cred = plan.ops[prev.value].cred if prev.value > 0 else False
    return stages


# ---------------------------------------------------------------------------------------------------
# kernel source helpers


def _bshape(a: str, b: str) -> str:
    rows = a in "cf" or b in "cf"
    cols = a in "rf" or b in "rf"
    return "f" if rows and cols else ("c" if rows else ("r" if cols else "s"))


_UNARY_TEMPLATES = {
    "relu": "tl.maximum({a}, 0.0)",
    "relu6": "tl.minimum(tl.maximum({a}, 0.0), 6.0)",
    "sigmoid": "1.0 / (1.0 + tl.exp(-{a}))",
    "tanh": "_kw_tanh({a})",
    "gelu": "_kw_gelu({a})",
    "gelu_tanh": "0.5 * {a} * (1.0 + _kw_tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})))",
    "silu": "{a} / (1.0 + tl.exp(-{a}))",
    "mish": "{a} * _kw_tanh(_kw_softplus({a}, 1.0, 20.0))",
    "hardswish": "{a} * tl.minimum(tl.maximum({a} + 3.0, 0.0), 6.0) / 6.0",
    "hardsigmoid": "tl.minimum(tl.maximum({a} / 6.0 + 0.5, 0.0), 1.0)",
    "hardtanh": "tl.minimum(tl.maximum({a}, {k0}), {k1})",
    "leaky_relu": "tl.where({a} >= 0.0, {a}, {a} * {k0})",
    "elu": "tl.where({a} > 0.0, {a}, {k0} * (tl.exp({a}) - 1.0))",
    "celu": "tl.where({a} > 0.0, {a}, {k0} * (tl.exp({a} / {k0}) - 1.0))",
    "selu": "1.0507009873554805 * tl.where({a} > 0.0, {a}, 1.6732632423543772 * (tl.exp({a}) - 1.0))",
    "softplus": "_kw_softplus({a}, {k0}, {k1})",
    "logsigmoid": "-_kw_softplus(-{a}, 1.0, 20.0)",
    "softsign": "{a} / (1.0 + tl.abs({a}))",
    "tanhshrink": "{a} - _kw_tanh({a})",
    "exp": "tl.exp({a})",
    "log": "tl.log({a})",
    "abs": "tl.abs({a})",
    "neg": "-{a}",
    "sqrt": "tl.sqrt({a})",
    "rsqrt": "1.0 / tl.sqrt({a})",
    "reciprocal": "1.0 / {a}",
    "square": "{a} * {a}",
    "erf": "tl.erf({a})",
    "sin": "tl.sin({a})",
    "cos": "tl.cos({a})",
    "floor": "tl.floor({a})",
    "ceil": "tl.ceil({a})",
    "clamp": "tl.minimum(tl.maximum({a}, {k0}), {k1})",
    "clamp_min": "tl.maximum({a}, {k0})",
    "clamp_max": "tl.minimum({a}, {k0})",
}
_BINARY_TEMPLATES = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "maximum": "tl.maximum({a}, {b})",
    "minimum": "tl.minimum({a}, {b})",
    "pow": "_kw_pow({a}, {b})",
    "gt": "{a} > {b}",
    "lt": "{a} < {b}",
    "ge": "{a} >= {b}",
    "le": "{a} <= {b}",
    "eq": "{a} == {b}",
    "ne": "{a} != {b}",
}
_COMPARISONS = ("gt", "lt", "ge", "le", "eq", "ne")

_JIT_HELPERS = """
@triton.jit
def _kw_bn_eval_kernel(rm_ptr, rv_ptr, mean_ptr, rstd_ptr, C, eps, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < C
    rm = tl.load(rm_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    rv = tl.load(rv_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    tl.store(mean_ptr + offs, rm, mask=mask)
    tl.store(rstd_ptr + offs, 1.0 / tl.sqrt(rv + eps), mask=mask)


@triton.jit
def _kw_tanh(x):
    # tanh from exp: |x| large saturates to +-1 without overflow
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0.0, r, -r)


@triton.jit
def _kw_softplus(x, beta, threshold):
    # torch's softplus: linear above the threshold, log(1 + exp(beta x)) / beta below
    bx = x * beta
    return tl.where(bx > threshold, x, tl.log(1.0 + tl.exp(tl.minimum(bx, threshold))) / beta)


@triton.jit
def _kw_pow(a, e):
    # a ** e for real e: integer exponents keep the sign of negative bases, others give NaN there
    mag = tl.exp2(e * tl.log2(tl.abs(a)))
    ei = tl.floor(e)
    odd = (ei - 2.0 * tl.floor(ei * 0.5)) == 1.0
    neg = tl.where(ei == e, tl.where(odd, -mag, mag), float("nan"))
    res = tl.where(a < 0.0, neg, mag)
    zero = tl.where(e == 0.0, 1.0, tl.where(e > 0.0, 0.0, float("inf")))
    return tl.where(a == 0.0, zero, res)
""" + HELPERS["_kw_gelu"]

_NORM_STATS_KERNEL = """
@triton.jit
def _kw_norm_stats(
    part_ptr, mean_ptr, rstd_ptr, T, C, CG, G, NS, eps,
    PER_SAMPLE: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # Combines per-tile (count, sum, centred sum of squares) partials into mean and 1/std for one
    # (sample, group) (PER_SAMPLE) or one channel over every sample (batch norm), with Chan's formula.
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
"""

_HOST_HELPERS = """
def _kw_bn_eval_stats(bn, C):
    # eval mode: the running statistics normalise
    mean = torch.empty((1, C), device=bn.running_mean.device, dtype=torch.float32)
    rstd = torch.empty((1, C), device=bn.running_mean.device, dtype=torch.float32)
    _kw_bn_eval_kernel[(1,)](bn.running_mean, bn.running_var, mean, rstd, C, float(bn.eps), BLOCK=_kw_npow2(C))
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


# ---------------------------------------------------------------------------------------------------
# the emitter


@dataclass
class _Coords:
    """Names of the coordinate vectors where a value is computed."""

    d: str
    h: str
    w: str
    ok: str
    flat: str | None  # flat contiguous spatial index, when it equals d*H*W + h*W + w of the buffer


class _Emitter:
    def __init__(self, plan: ConvPlan, design: str, cfg: ConvConfig, precision: str) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.design = design
        self.cfg = cfg
        self.precision = precision
        s = plan.spec
        if design not in DESIGNS:
            raise ConvEmitError(f"unknown conv design {design!r}; known: {', '.join(DESIGNS)}")
        if design == "direct_depthwise" and s.in_per_group != 1:
            raise ConvEmitError("direct_depthwise needs one input channel per group")
        if precision == "strict" and cfg.DOT == "tf32":
            raise ConvEmitError("DOT=tf32 is not allowed under strict precision")
        self.gemm = design != "direct_depthwise"
        split = False
        if self.gemm and s.groups > 1:
            probe = partition(plan)
            split = probe[0].needs_cfull
        self.stages = partition(plan, split_after_conv=split)
        self._fold()
        if cfg.RECOMPUTE:
            self._recompute()
        last = self.stages[-1]
        if (
            len(self.stages) > 1
            and last.source == "load"
            and not last.ops
            and last.pool is None
            and self.stages[-2].sink == "sreduce"
            and s.dtype == "float32"
        ):
            # the reduction's fp32 buffer is already the output
            self.stages.pop()
            self.stages[-1].final = True
        if plan.ops[plan.output].kind == "binary" and plan.ops[plan.output].attrs.get("fn") in _COMPARISONS:
            raise ConvEmitError("a boolean output")
        self.out_dtype = {
            "float32": "torch.float32",
            "float16": "torch.float16",
            "bfloat16": "torch.bfloat16",
        }[s.dtype]
        # Stage 0 of a transposed implicit GEMM without pooling works per output phase.
        st0 = self.stages[0]
        self.phase = design == "implicit_gemm" and s.transposed and st0.pool is None
        self.bools: set[int] = set()  # ops whose value is boolean (comparisons)
        self._varies: dict[int, bool] = {}
        self._ps = False  # the stage being written tiles rows per sample
        self._shape = "(BLOCK_M, BLOCK_N)"  # the value tile of the stage being written

    def _fold(self) -> None:
        """plan.fold: the stage that normalises and reduces every spatial dim becomes a small kernel that
        works from the previous stage's statistics partials (see conv_ir.NormFold), and that stage
        stops storing its value."""
        fold = self.plan.fold
        if fold is None:
            return
        for st in self.stages:
            if st.norm is None or st.norm.id != fold.norm:
                continue
            if (
                st.source != "load"
                or not st.norm_at_load
                or st.pool is not None
                or st.sink != "sreduce"
                or st.sreduce is None
                or st.sreduce.id != fold.reduce
                or self.stages[st.in_buf].sink != "stats"
            ):
                return
            own = {op.id for op in st.ops} | {st.norm.id}
            for op in st.ops:
                # every value the kernel computes is one per (sample, channel): no whole-tensor operand
                # and nothing read from before the normalisation
                if any(a not in own for a in op.args) or (
                    op.kind == "operand" and self.plan.operands[op.operand or 0].kind == "full"
                ):
                    return
            self.stages[st.in_buf].sink = "stats_only"
            st.fold = True
            return

    def _recompute(self) -> None:
        """Stage 0 only gathers statistics; stage 1 recomputes the convolution and its ops, normalises
        and goes on, instead of reading stage 0's stored output."""
        if len(self.stages) < 2:
            return
        st0, st1 = self.stages[0], self.stages[1]
        if st0.source != "conv" or st0.sink != "stats" or st1.pool is not None or st1.norm is None:
            return
        merged_ops = st0.ops + st1.ops
        if self.gemm and self.spec.groups > 1 and any(op.kind == "creduce" for op in merged_ops):
            return
        st0.sink = "stats_only"
        st1.source, st1.src_op, st1.norm_at_load = "conv", 0, False
        own = st1.pre  # stage 1 has no pooling, so all of its own ops are in `pre`
        if st0.pool is None:
            st1.pre, st1.post = st0.pre + [st1.norm] + own, []
        else:
            st1.pre, st1.post = list(st0.pre), st0.post + [st1.norm] + own
        st1.pool = st0.pool

    # ------------------------------------------------------------------ kernel pieces
    def _dot_args(self) -> str:
        if self.spec.dtype != "float32":
            return ""
        return f', input_precision="{self.cfg.DOT}"'

    def _per_sample(self, st: _Stage) -> bool:
        if st.sink in ("stats", "stats_only"):
            return True
        if self._unrolled() and st.source == "conv" and st.sink == "store":
            # one sample per tile: the sample's base is a scalar, no division by the plane size per pixel
            return True
        if st.sink == "sreduce" and st.sreduce is not None:
            return self._all_spatial(st.sreduce.attrs["dims"])
        return False

    def _all_spatial(self, dims: list[int]) -> bool:
        return set(dims) >= set(SPATIAL[3 - self.spec.ndim :])

    def _fold_kernel(self, st: _Stage) -> str:
        """One program per sample: each channel's mean of the normalised value over all positions from
        the statistics partials (count, sum per tile), then the stage's affine work on it."""
        k = Code()
        args = ["part_ptr", "TT", "mean_ptr", "rstd_ptr", "smn", "CG", "N", "C", "out_ptr", "son", "soc"]
        operand_ids = sorted({op.operand for op in st.ops if op.kind == "operand" and op.operand is not None})
        for o in operand_ids:
            args += [f"o{o}_ptr"] + ([f"o{o}_sc"] if self.plan.operands[o].kind == "channel" else [])
        args += [name for name, _ in self._const_args(st)]
        args += ["BLOCK_T: tl.constexpr", "BLOCK_N: tl.constexpr"]
        k.jit_def(f"_kw_stage{st.index}", args)
        self._shape = "(1, BLOCK_N)"
        assert st.norm is not None
        with k.indent():
            k("n = tl.program_id(0)")
            k("n64 = n.to(tl.int64)")
            k("nr64 = n64")
            k("c = tl.arange(0, BLOCK_N)")
            k("col_ok = c < C")
            k("gi = c // CG")
            k("mu = tl.load(mean_ptr + n64 * smn + gi, mask=col_ok, other=0.0)")
            k("rs = tl.load(rstd_ptr + n64 * smn + gi, mask=col_ok, other=0.0)")
            k("rt = tl.arange(0, BLOCK_T)")
            k("acc_n = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)")
            k("acc_d = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)")
            k("for t0 in range(0, TT, BLOCK_T):")
            with k.indent():
                k("tt = t0 + rt")
                k("msk = (tt < TT)[:, None] & col_ok[None, :]")
                k("base = part_ptr + ((n64 * TT + tt[:, None]) * 3) * C + c[None, :]")
                k("pn = tl.load(base, mask=msk, other=0.0)")
                # each tile's sum less its count times the mean: small terms, no large sum cancelled
                k("acc_d += tl.load(base + C, mask=msk, other=0.0) - pn * mu[None, :]")
                k("acc_n += pn")
            k("cnt = tl.sum(acc_n, axis=0)")
            k("P = tl.max(cnt, axis=0)")
            k("# the (sample, channel) mean of the normalised value over every position")
            k(f"v{st.norm.id} = (tl.sum(acc_d, axis=0) / tl.maximum(cnt, 1.0) * rs)[None, :]")
            kinds: dict[int, str] = {st.norm.id: "f"}
            self._ops(k, st, st.pre, _Coords("", "", "", "", None), kinds)
            v = self._float(st.value, kinds)
            kind = kinds[st.value]
            scale = " * P" if st.sreduce is not None and st.sreduce.attrs["fn"] == "sum" else ""
            k(f"r = {self._full(st.value, kinds) if kind in ('s', 'r') else v}{scale}")
            if kind == "c":
                k("tl.store(out_ptr + n64 * son + tl.zeros((1, 1), dtype=tl.int64), r)")
            else:
                k("tl.store(out_ptr + n64 * son + (c * soc)[None, :], r, mask=col_ok[None, :])")
        self._shape = "(BLOCK_M, BLOCK_N)"
        return k.text()

    def _stage_kernel(self, st: _Stage) -> str:
        if st.fold:
            return self._fold_kernel(st)
        k = Code()
        args: list[str] = []
        conv = st.source == "conv"
        gemm = conv and self.gemm
        phase = conv and self.phase
        per_sample = self._per_sample(st)
        self._ps = per_sample
        if conv:
            args += ["x_ptr", "w_ptr", "sxn", "sxc", "sxd", "sxh", "sxw", "ID", "IH", "IW", "CIN_G", "OC_G",
                     "KD", "KH", "KW", "STD", "STH", "STW", "PADD", "PADH", "PADW", "DLD", "DLH", "DLW"]  # fmt: skip
            if self._unrolled():
                # kernel size and dilation are compile-time: the taps unroll and their offsets fold
                for name in ("KD", "KH", "KW", "DLD", "DLH", "DLW"):
                    args[args.index(name)] = f"{name}: tl.constexpr"
            if self.design == "implicit_gemm" and self.spec.transposed:
                args += ["STEPD", "STEPH", "STEPW"]
        else:
            args += ["in_ptr", "sin_n", "sin_c", "sin_d", "sin_h", "sin_w"]
        if st.norm is not None:
            args += ["mean_ptr", "rstd_ptr", "smn", "CG"]
        # XD/XH/XW: the grid of the source value (conv output or loaded buffer)
        args += ["N", "C", "CT", "XD", "XH", "XW", "SD", "SH", "SW"]
        if st.pool is not None:
            args += [
                "PKD",
                "PKH",
                "PKW",
                "PSD",
                "PSH",
                "PSW",
                "PPD",
                "PPH",
                "PPW",
                "PDD",
                "PDH",
                "PDW",
                "PDIV",
            ]
        if st.sink != "stats_only":
            args += ["out_ptr", "son", "soc", "sod", "soh", "sow"]
        if st.sink in ("stats", "stats_only"):
            args += ["part_ptr", "TT"]
        if st.sink == "sreduce":
            args += ["red_scale"]
        operand_ids = sorted({op.operand for op in st.ops if op.kind == "operand" and op.operand is not None})
        for o in operand_ids:
            kind = self.plan.operands[o].kind
            args += (
                [f"o{o}_ptr"]
                + ([f"o{o}_sc"] if kind == "channel" else [])
                + ([f"o{o}_sn", f"o{o}_sc", f"o{o}_sd", f"o{o}_sh", f"o{o}_sw"] if kind == "full" else [])
            )
        const_args = self._const_args(st)
        args += [name for name, _ in const_args]
        args += [
            "BLOCK_M: tl.constexpr",
            "BLOCK_N: tl.constexpr",
            "BLOCK_K: tl.constexpr",
            "GROUP_M: tl.constexpr",
        ]
        if self._pool_phase(st):
            args += ["POOL_PHASE: tl.constexpr"]
        if self._plane(st):
            args += ["BLOCK_H: tl.constexpr", "BLOCK_W: tl.constexpr"]
            if conv:  # padding folds into the taps' offsets: the centre tap's loads stay aligned
                for name in ("PADD", "PADH", "PADW"):
                    args[args.index(name)] = f"{name}: tl.constexpr"
        k.jit_def(f"_kw_stage{st.index}", args)
        if self._plane(st):
            with k.indent():
                self._plane_body(k, st)
            self._shape = "(BLOCK_M, BLOCK_N)"
            return k.text()
        with k.indent():
            self._prologue(k, st, gemm=gemm, phase=phase, per_sample=per_sample)
            if st.pool is None:
                coords = _Coords("sd_", "sh_", "sw_", "row_ok", None if phase else "p")
                kinds: dict[int, str] = {}
                self._source(k, st, coords, kinds, phase=phase)
                self._ops(k, st, st.pre, coords, kinds)
            else:
                kinds = {}
                self._pool(k, st, kinds, phase=phase)
                self._ops(k, st, st.post, _Coords("sd_", "sh_", "sw_", "row_ok", "p"), kinds)
            self._sink(k, st, kinds, per_sample=per_sample, phase=phase)
        return k.text()

    def _varies_c(self, op_id: int) -> bool:
        """Whether an op's value differs from channel to channel."""
        if op_id in self._varies:
            return self._varies[op_id]
        op = self.plan.ops[op_id]
        if op.kind == "conv":
            out = True
        elif op.kind == "operand":
            out = 1 in self.plan.operands[op.operand or 0].align
        elif op.kind in ("const", "creduce"):
            out = False
        else:
            out = any(self._varies_c(a) for a in op.args)
        self._varies[op_id] = out
        return out

    def _has_channels(self, st: _Stage) -> bool:
        """Whether a stage's tiles need to run over channels (else one value per pixel)."""
        if st.source == "conv" or not st.src_cred:
            return True
        return any(self._varies_c(op.id) for op in st.ops)

    def _pool_phase(self, st: _Stage) -> bool:
        return (
            st.source == "conv"
            and st.pool is not None
            and self.design == "implicit_gemm"
            and self.spec.transposed
        )

    def _const_args(self, st: _Stage) -> list[tuple[str, str]]:
        out = []
        for op in st.ops:
            for i, c in enumerate(op.consts):
                out.append((f"k{op.id}_{i}", c.expr))
        return out

    def _prologue(self, k: Code, st: _Stage, *, gemm: bool, phase: bool, per_sample: bool) -> None:
        k("pid = tl.program_id(0)")
        if gemm:
            k("pid_g = tl.program_id(1)")
        if phase:
            k("pid_r = tl.program_id(2)")
            k("GD = tl.cdiv(XD, STD)")
            k("GH = tl.cdiv(XH, STH)")
            k("GW = tl.cdiv(XW, STW)")
        else:
            k("GD = SD")
            k("GH = SH")
            k("GW = SW")
        k("GP = GD * GH * GW")
        if per_sample:
            k("TPS = tl.cdiv(GP, BLOCK_M)")
            k("num_m = N * TPS")
        else:
            k("num_m = tl.cdiv(N * GP, BLOCK_M)")
        k("num_n = tl.cdiv(CT, BLOCK_N)")
        k("width = GROUP_M * num_n")
        k("first_m = (pid // width) * GROUP_M")
        k("gsz = tl.minimum(num_m - first_m, GROUP_M)")
        k("pid_m = first_m + (pid % width) % gsz")
        k("pid_n = (pid % width) // gsz")
        if per_sample:
            k("n = pid_m // TPS")
            k("tt = pid_m - n * TPS")
            k("p = tt * BLOCK_M + tl.arange(0, BLOCK_M)")
            k("row_ok = p < GP")
            k("nr = n")  # n as used against [BM, BN] tiles
        else:
            k("m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
            k("row_ok = m < N * GP")
            k("n = m // GP")
            k("p = m - n * GP")
            k("nr = n[:, None]")
        k("n64 = n.to(tl.int64)")
        k("nr64 = nr.to(tl.int64)")
        k("qw = p % GW")
        k("qh = (p // GW) % GH")
        k("qd = p // (GW * GH)")
        if phase:
            k("rd = pid_r // (STH * STW)")
            k("rh = (pid_r // STW) % STH")
            k("rw = pid_r % STW")
            k("sd_ = qd * STD + rd")
            k("sh_ = qh * STH + rh")
            k("sw_ = qw * STW + rw")
            k("row_ok = row_ok & (sd_ < XD) & (sh_ < XH) & (sw_ < XW)")
        else:
            k("sd_ = qd")
            k("sh_ = qh")
            k("sw_ = qw")
        k("j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
        k("col_ok = j < CT")
        k("c = pid_g * OC_G + j" if gemm else "c = j")

    # ------------------------------------------------------------------ sources
    def _source(self, k: Code, st: _Stage, co: _Coords, kinds: dict[int, str], *, phase: bool) -> None:
        if st.source == "conv":
            if self.design == "implicit_gemm":
                self._conv_tap(k, co, phase=phase, pooled=st.pool is not None)
            elif self.design == "implicit_gemm_flatk":
                self._conv_flat(k, co)
            else:
                self._conv_direct(k, co)
            k(f"v{st.src_op} = acc")
            kinds[st.src_op] = "f"
            return
        sp = co.flat if co.flat is not None else f"{co.d} * sin_d + {co.h} * sin_h + {co.w} * sin_w"
        if st.src_cred:
            k(f"src = tl.load(in_ptr + nr64 * sin_n + ({sp})[:, None], mask={co.ok}[:, None], other=0.0)")
            kind = "c"
        else:
            k(
                f"src = tl.load(in_ptr + nr64 * sin_n + (c * sin_c)[None, :] + ({sp})[:, None], "
                f"mask={co.ok}[:, None] & col_ok[None, :], other=0.0)"
            )
            kind = "f"
        k("src = src.to(tl.float32)")
        if st.norm is not None and st.norm_at_load:
            k(f"v{st.norm.args[0]} = src")  # the value before normalisation, for ops that read it
            kinds[st.norm.args[0]] = kind
            k("gi = (c // CG)[None, :]")
            k("mu = tl.load(mean_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
            k("rs = tl.load(rstd_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
            k("src = (src - mu) * rs")
        k(f"v{st.src_op} = src")
        kinds[st.src_op] = kind

    def _conv_coords(self, k: Code, co: _Coords, kd: str, kh: str, kw: str, row: str = "") -> None:
        """id_/ih_/iw_ and ok_ for taps (kd, kh, kw); `row` indexes the row vectors into a 2-D tile."""
        d, h, w, ok = (f"{v}{row}" for v in (co.d, co.h, co.w, co.ok))
        if not self.spec.transposed:
            k(f"id_ = {d} * STD - PADD + {kd} * DLD")
            k(f"ih_ = {h} * STH - PADH + {kh} * DLH")
            k(f"iw_ = {w} * STW - PADW + {kw} * DLW")
            k(f"ok_ = {ok} & (id_ >= 0) & (id_ < ID) & (ih_ >= 0) & (ih_ < IH) & (iw_ >= 0) & (iw_ < IW)")
        else:
            # gradient-of-input form: output o takes input i where o = i * stride - pad + k * dil
            k(f"td_ = {d} + PADD - {kd} * DLD")
            k(f"th_ = {h} + PADH - {kh} * DLH")
            k(f"tw_ = {w} + PADW - {kw} * DLW")
            k("id_ = td_ // STD")
            k("ih_ = th_ // STH")
            k("iw_ = tw_ // STW")
            k(
                f"ok_ = {ok} & (td_ >= 0) & (th_ >= 0) & (tw_ >= 0) & (td_ % STD == 0) & (th_ % STH == 0)"
                " & (tw_ % STW == 0) & (id_ < ID) & (ih_ < IH) & (iw_ < IW)"
            )

    def _conv_tap(self, k: Code, co: _Coords, *, phase: bool, pooled: bool = False) -> None:
        nchw = self.cfg.LAYOUT == "nchw"
        k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("rk = tl.arange(0, BLOCK_K)")
        k("n_icb = tl.cdiv(CIN_G, BLOCK_K)")
        k("xg = x_ptr + (pid_g * CIN_G).to(tl.int64) * sxc")
        # the packed weight is [groups, OC_G, taps, CIN_G]: one output channel's K = taps x CIN_G contiguous
        k("WK = KD * KH * KW * CIN_G")
        k("wg = w_ptr + (pid_g * OC_G).to(tl.int64) * WK")
        if phase:
            self._phase_loop(k, co, nchw, ("rd", "rh", "rw"), ("qd", "qh", "qw"))
        elif pooled and self.spec.transposed:
            # Inside a pooling window: when the pool's stride is a multiple of the convolution's, all
            # pixels of the tile have the same output phase for a given window offset.
            k("if POOL_PHASE:")
            with k.indent():
                for dim, wk, pp, pd, st in (
                    ("d", "wkd", "PPD", "PDD", "STD"),
                    ("h", "wkh", "PPH", "PDH", "STH"),
                    ("w", "wkw", "PPW", "PDW", "STW"),
                ):
                    k(f"r{dim}_ = (({wk} * {pd} - {pp}) % {st} + {st}) % {st}")
                    k(f"q{dim}_ = (c{dim}_ - r{dim}_) // {st}")
                self._phase_loop(k, co, nchw, ("rd_", "rh_", "rw_"), ("qd_", "qh_", "qw_"))
            k("else:")
            with k.indent():
                self._tap_loop(k, co, nchw)
        else:
            self._tap_loop(k, co, nchw)

    def _tap_loop(self, k: Code, co: _Coords, nchw: bool) -> None:
        k("for it in range(0, KD * KH * KW * n_icb):")
        with k.indent():
            k("tap = it // n_icb")
            k("ic0 = (it - tap * n_icb) * BLOCK_K")
            k("kw_ = tap % KW")
            k("kh_ = (tap // KW) % KH")
            k("kd_ = tap // (KW * KH)")
            self._conv_coords(k, co, "kd_", "kh_", "kw_")
            self._tap_dot(k, nchw)

    def _phase_loop(
        self, k: Code, co: _Coords, nchw: bool, r: tuple[str, str, str], q: tuple[str, str, str]
    ) -> None:
        # Taps that reach output phase r: k * dil = r + pad (mod stride); they repeat every
        # STEP = stride / gcd(stride, dil). Find the first one per dim, then walk only those.
        rd, rh, rw = r
        qd, qh, qw = q
        for dim, rr, kk, s, pad, dil, step in (
            ("d", rd, "KD", "STD", "PADD", "DLD", "STEPD"),
            ("h", rh, "KH", "STH", "PADH", "DLH", "STEPH"),
            ("w", rw, "KW", "STW", "PADW", "DLW", "STEPW"),
        ):
            k(f"k0{dim} = pid * 0 + {kk}")  # a tensor from the start: it is loop-carried
            k(f"for kt in range(0, {step}):")
            with k.indent():
                k(f"hit = (({rr} + {pad} - kt * {dil}) % {s} == 0) & (k0{dim} == {kk}) & (kt < {kk})")
                k(f"k0{dim} = tl.where(hit, kt, k0{dim})")
            k(f"nv{dim} = tl.where(k0{dim} < {kk}, ({kk} - k0{dim} + {step} - 1) // {step}, 0)")
        k("for it in range(0, nvd * nvh * nvw * n_icb):")
        with k.indent():
            k("tv = it // n_icb")
            k("ic0 = (it - tv * n_icb) * BLOCK_K")
            k("kw_ = k0w + (tv % nvw) * STEPW")
            k("kh_ = k0h + ((tv // nvw) % nvh) * STEPH")
            k("kd_ = k0d + (tv // (nvw * nvh)) * STEPD")
            k("tap = (kd_ * KH + kh_) * KW + kw_")
            k(f"id_ = {qd} + ({rd} + PADD - kd_ * DLD) // STD")
            k(f"ih_ = {qh} + ({rh} + PADH - kh_ * DLH) // STH")
            k(f"iw_ = {qw} + ({rw} + PADW - kw_ * DLW) // STW")
            k(f"ok_ = {co.ok} & (id_ >= 0) & (id_ < ID) & (ih_ >= 0) & (ih_ < IH) & (iw_ >= 0) & (iw_ < IW)")
            self._tap_dot(k, nchw)

    def _tap_dot(self, k: Code, nchw: bool) -> None:
        k("xo = n64 * sxn + id_ * sxd + ih_ * sxh + iw_ * sxw")
        k("ic = ic0 + rk")
        k("kok = ic < CIN_G")
        if nchw:
            # pixels along the fast axis: neighbouring output pixels read neighbouring input words (the
            # A tile is M-major; nhwc gives the K-major tile that TF32 tensor-core MMAs want)
            k(
                "a = tl.load(xg + xo[None, :] + (ic * sxc)[:, None], mask=ok_[None, :] & kok[:, None], other=0.0)"
            )
            k("a = tl.trans(a)")
        else:
            k(
                "a = tl.load(xg + xo[:, None] + (ic * sxc)[None, :], mask=ok_[:, None] & kok[None, :], other=0.0)"
            )
        # B = W^T with K contiguous in memory: Hopper's TF32 wgmma reads both operands K-major from
        # shared memory; an N-contiguous weight would need a transposing copy every step
        k(
            "b = tl.load(wg + j[None, :] * WK + (tap * CIN_G + ic)[:, None], "
            "mask=kok[:, None] & col_ok[None, :], other=0.0)"
        )
        k(f"acc = tl.dot(a, b, acc{self._dot_args()})")

    def _conv_flat(self, k: Code, co: _Coords) -> None:
        nchw = self.cfg.LAYOUT == "nchw"
        # nchw: tiles are [BLOCK_K, BLOCK_M] (pixels on the fast axis), transposed for the dot
        row, tap_ax = ("[None, :]", "[:, None]") if nchw else ("[:, None]", "[None, :]")
        k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("rk = tl.arange(0, BLOCK_K)")
        k("KT = KD * KH * KW")
        k("xg = x_ptr + (pid_g * CIN_G).to(tl.int64) * sxc")
        # the packed weight is [groups, OC_G, K] with K contiguous, in the kernel's K order
        k("WK = KT * CIN_G")
        k("wg = w_ptr + (pid_g * OC_G).to(tl.int64) * WK")
        k("nx = n64 * sxn" if self._ps else f"nx = (n64 * sxn){row}")
        k("for k0 in range(0, CIN_G * KT, BLOCK_K):")
        with k.indent():
            k("kk = k0 + rk")
            k("kok = kk < CIN_G * KT")
            if nchw:  # k = ic * KT + tap: the weight's own order, taps of one channel adjacent
                k("ic = kk // KT")
                k("tap = kk - ic * KT")
            else:  # k = tap * CIN_G + ic: channels of one tap adjacent, as channels-last stores them
                k("tap = kk // CIN_G")
                k("ic = kk - tap * CIN_G")
            k(f"kw_ = (tap % KW){tap_ax}")
            k(f"kh_ = ((tap // KW) % KH){tap_ax}")
            k(f"kd_ = (tap // (KW * KH)){tap_ax}")
            self._conv_coords(k, co, "kd_", "kh_", "kw_", row=row)
            k(f"ok_ = ok_ & kok{tap_ax}")
            k(f"xo = nx + (ic * sxc){tap_ax} + id_ * sxd + ih_ * sxh + iw_ * sxw")
            k("a = tl.load(xg + xo, mask=ok_, other=0.0)")
            if nchw:
                k("a = tl.trans(a)")
            k(
                "b = tl.load(wg + j[None, :] * WK + kk[:, None], mask=kok[:, None] & col_ok[None, :], other=0.0)"
            )
            k(f"acc = tl.dot(a, b, acc{self._dot_args()})")

    def _unrolled(self) -> bool:
        """direct_depthwise of a forward convolution: taps unrolled at compile time."""
        return self.design == "direct_depthwise" and not self.spec.transposed

    def _conv_direct_unrolled(self, k: Code, co: _Coords) -> None:
        # Memory-bound: per pixel the input origin and one pointer are computed once; each tap then adds
        # a per-row scalar (kd, kh) or a compile-time offset (kw, folded into the load) and one mask.
        nchw = self.cfg.LAYOUT == "nchw"
        k("ci = c // OC_G")
        k(f"od0 = {co.d} * STD - PADD")
        k(f"oh0 = {co.h} * STH - PADH")
        k(f"ow0 = {co.w} * STW - PADW")
        k("xo = n64 * sxn + od0 * sxd + oh0 * sxh + ow0 * sxw")
        k("xc = (ci * sxc).to(tl.int64)")
        if nchw:
            k("xb = x_ptr + xo[None, :] + xc[:, None]")
            k("acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)")
        else:
            k("xb = x_ptr + xo[:, None] + xc[None, :]")
            k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("for kd_ in tl.static_range(KD):")
        with k.indent():
            k("id_ = od0 + kd_ * DLD")
            k(f"okd = {co.ok} & (id_ >= 0) & (id_ < ID)")
            k("for kh_ in tl.static_range(KH):")
            with k.indent():
                k("ih_ = oh0 + kh_ * DLH")
                k("okh = okd & (ih_ >= 0) & (ih_ < IH)")
                k("xr = xb + (kd_ * DLD * sxd + kh_ * DLH * sxh)")
                k("for kw_ in tl.static_range(KW):")
                with k.indent():
                    k("iw_ = ow0 + kw_ * DLW")
                    k("ok_ = okh & (iw_ >= 0) & (iw_ < IW)")
                    k("wv = tl.load(w_ptr + ((kd_ * KH + kh_) * KW + kw_) * C + c, mask=col_ok, other=0.0)")
                    if nchw:
                        k(
                            "xv = tl.load(xr + kw_ * DLW * sxw, mask=ok_[None, :] & col_ok[:, None], other=0.0)"
                        )
                        k("acc_t += xv.to(tl.float32) * wv.to(tl.float32)[:, None]")
                    else:
                        k(
                            "xv = tl.load(xr + kw_ * DLW * sxw, mask=ok_[:, None] & col_ok[None, :], other=0.0)"
                        )
                        k("acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]")
        if nchw:
            k("acc = tl.trans(acc_t)")

    def _conv_direct(self, k: Code, co: _Coords) -> None:
        if self._unrolled():
            self._conv_direct_unrolled(k, co)
            return
        nchw = self.cfg.LAYOUT == "nchw"
        # input channel of output channel c: groups == in_channels, OC_G outputs per input
        k("ci = c // OC_G")
        if nchw:
            k("acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)")
        else:
            k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("for tap in range(0, KD * KH * KW):")
        with k.indent():
            k("kw_ = tap % KW")
            k("kh_ = (tap // KW) % KH")
            k("kd_ = tap // (KW * KH)")
            self._conv_coords(k, co, "kd_", "kh_", "kw_")
            k("xo = n64 * sxn + id_ * sxd + ih_ * sxh + iw_ * sxw")
            k("wv = tl.load(w_ptr + tap * C + c, mask=col_ok, other=0.0).to(tl.float32)")
            if nchw:
                k(
                    "xv = tl.load(x_ptr + xo[None, :] + (ci * sxc)[:, None], mask=ok_[None, :] & col_ok[:, None], "
                    "other=0.0)"
                )
                k("acc_t += xv.to(tl.float32) * wv[:, None]")
            else:
                k(
                    "xv = tl.load(x_ptr + xo[:, None] + (ci * sxc)[None, :], mask=ok_[:, None] & col_ok[None, :], "
                    "other=0.0)"
                )
                k("acc += xv.to(tl.float32) * wv[None, :]")
        if nchw:
            k("acc = tl.trans(acc_t)")

    # ------------------------------------------------------------------ 2-D plane tiles (direct)
    def _plane(self, st: _Stage) -> bool:
        """Whether a stage tiles one (sample, channel) plane in 2-D (direct_depthwise, BLOCK_W > 0).

        Pointwise work on one channel only: no pooling, channel reductions, whole-tensor operands,
        spatial reductions or one-channel buffers (those stages keep the flat tiles)."""
        if not (
            self.design == "direct_depthwise"
            and not self.spec.transposed
            and self.cfg.LAYOUT == "nchw"
            and self.cfg.BLOCK_W > 0
        ):
            return False
        if st.pool is not None or st.needs_cfull or st.sink not in ("store", "stats", "stats_only"):
            return False
        if st.source == "load" and st.src_cred:
            return False
        if self.plan.ops[st.value].cred if st.value > 0 else False:
            return False
        return not any(
            op.kind == "operand" and self.plan.operands[op.operand or 0].kind == "full" for op in st.ops
        )

    def _plane_body(self, k: Code, st: _Stage) -> None:
        """A [BLOCK_H, BLOCK_W] tile of output rows (depth x height flattened) x columns of one plane.

        Program ids are split once per program; per tap the kernel adds a per-row pointer (once per
        (kd, kh)), a compile-time column offset (folded into the load) and one row & column mask, so
        each output costs a load, a predicate and an FMA per tap; the centre column tap (stride 1) is a
        16-byte vector load."""
        self._shape = "(BLOCK_H, BLOCK_W)"
        k("pid = tl.program_id(0)")
        k("cs = tl.program_id(1)")
        k("n = tl.program_id(2)")
        k("TWN = tl.cdiv(SW, BLOCK_W)")
        k("th = pid // TWN")
        k("tw = pid - th * TWN")
        k("q = th * BLOCK_H + tl.arange(0, BLOCK_H)")  # output rows, depth and height flattened
        k("ow = tw * BLOCK_W + tl.arange(0, BLOCK_W)")
        k("q_ok = q < SD * SH")
        k("w_ok = ow < SW")
        k("od = q // SH")  # per row, not per pixel
        k("oh = q - od * SH")
        k("n64 = n.to(tl.int64)")
        k("nr64 = n64")
        k("c = cs + tl.arange(0, 1)")  # a one-channel vector: per-channel operands broadcast as [1, 1]
        k("col_ok = c < C")
        k("ok2 = q_ok[:, None] & w_ok[None, :]")
        kinds: dict[int, str] = {}
        coords = _Coords("od", "oh", "ow", "ok2", None)
        if st.source == "conv":
            k("xp = x_ptr + n64 * sxn + (cs // OC_G).to(tl.int64) * sxc")
            k("owx = ow * STW")
            k("acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)")
            k("for kd_ in tl.static_range(KD):")
            with k.indent():
                k("id_ = od * STD + (kd_ * DLD - PADD)")
                k("for kh_ in tl.static_range(KH):")
                with k.indent():
                    k("ih_ = oh * STH + (kh_ * DLH - PADH)")
                    k("rok = q_ok & (id_ >= 0) & (id_ < ID) & (ih_ >= 0) & (ih_ < IH)")
                    k("xr = (xp + (id_ * sxd + ih_ * sxh))[:, None] + owx[None, :]")
                    k("for kw_ in tl.static_range(KW):")
                    with k.indent():
                        k("iw_ = owx + (kw_ * DLW - PADW)")
                        k("cok = w_ok & (iw_ >= 0) & (iw_ < IW)")
                        k("wv = tl.load(w_ptr + ((kd_ * KH + kh_) * KW + kw_) * C + cs).to(tl.float32)")
                        k(
                            "xv = tl.load(xr + (kw_ * DLW - PADW), mask=rok[:, None] & cok[None, :], other=0.0)"
                        )
                        k("acc += xv.to(tl.float32) * wv")
            k(f"v{st.src_op} = acc")
            kinds[st.src_op] = "f"
        else:
            k("sp = (od * sin_d + oh * sin_h)[:, None] + (ow * sin_w)[None, :]")
            k("src = tl.load(in_ptr + n64 * sin_n + cs.to(tl.int64) * sin_c + sp, mask=ok2, other=0.0)")
            k("src = src.to(tl.float32)")
            if st.norm is not None and st.norm_at_load:
                k(f"v{st.norm.args[0]} = src")
                kinds[st.norm.args[0]] = "f"
                k("gi = (c // CG)[None, :]")
                k("mu = tl.load(mean_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
                k("rs = tl.load(rstd_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
                k("src = (src - mu) * rs")
            k(f"v{st.src_op} = src")
            kinds[st.src_op] = "f"
        self._ops(k, st, st.pre, coords, kinds)
        v = self._full(st.value, kinds) if kinds[st.value] != "f" else f"v{st.value}"
        if st.value in self.bools:
            v = f"{v}.to(tl.float32)"
        if st.sink != "stats_only":
            k(
                "tl.store(out_ptr + n64 * son + cs.to(tl.int64) * soc + (od * sod + oh * soh)[:, None] "
                f"+ (ow * sow)[None, :], {v}.to(out_ptr.dtype.element_ty), mask=ok2)"
            )
        if st.sink in ("stats", "stats_only"):
            # the tile's (count, sum, centred sum of squares): deterministic partials per (n, c, tile)
            k(f"vz = tl.where(ok2, {v}, 0.0)")
            k("cnt = tl.sum(q_ok.to(tl.float32), axis=0) * tl.sum(w_ok.to(tl.float32), axis=0)")
            k("s1 = tl.sum(tl.sum(vz, axis=1), axis=0)")
            k("mu_t = s1 / tl.maximum(cnt, 1.0)")
            k(f"dz = tl.where(ok2, {v} - mu_t, 0.0)")
            k("m2 = tl.sum(tl.sum(dz * dz, axis=1), axis=0)")
            k("pb = part_ptr + ((n64 * TT + pid) * 3) * C + cs")
            k("tl.store(pb, cnt)")
            k("tl.store(pb + C, s1)")
            k("tl.store(pb + 2 * C, m2)")

    # ------------------------------------------------------------------ pooling
    def _pool(self, k: Code, st: _Stage, kinds: dict[int, str], *, phase: bool) -> None:
        pool = st.pool
        assert pool is not None
        kind = pool.attrs["kind"]
        include = all(p.get("count_include_pad", True) for p in pool.attrs["parts"])
        in_kind = self._pre_kind(st)
        shape = "(BLOCK_M, BLOCK_N)" if in_kind == "f" else "(BLOCK_M, 1)"
        if kind == "max":
            k(f"pooled = tl.full({shape}, float('-inf'), tl.float32)")
        else:
            k(f"pooled = tl.zeros({shape}, dtype=tl.float32)")
            if not include:
                k("pcnt = tl.zeros((BLOCK_M, 1), dtype=tl.float32)")
        k("for wi in range(0, PKD * PKH * PKW):")
        with k.indent():
            k("wkw = wi % PKW")
            k("wkh = (wi // PKW) % PKH")
            k("wkd = wi // (PKW * PKH)")
            k("cd_ = sd_ * PSD - PPD + wkd * PDD")
            k("ch_ = sh_ * PSH - PPH + wkh * PDH")
            k("cw_ = sw_ * PSW - PPW + wkw * PDW")
            k("pok = row_ok & (cd_ >= 0) & (cd_ < XD) & (ch_ >= 0) & (ch_ < XH) & (cw_ >= 0) & (cw_ < XW)")
            co = _Coords("cd_", "ch_", "cw_", "pok", None)
            self._source(k, st, co, kinds, phase=False)
            self._ops(k, st, st.pre, co, kinds)
            val = f"v{pool.args[0]}"
            if kind == "max":
                k(f"pooled = tl.where(pok[:, None], tl.maximum(pooled, {val}), pooled)")
            else:
                k(f"pooled = pooled + tl.where(pok[:, None], {val}, 0.0)")
                if not include:
                    k("pcnt = pcnt + pok[:, None].to(tl.float32)")
        if kind == "avg":
            k("pooled = pooled / " + ("PDIV" if include else "tl.maximum(pcnt, 1.0)"))
        k(f"v{pool.id} = pooled")
        kinds[pool.id] = in_kind

    def _pre_kind(self, st: _Stage) -> str:
        assert st.pool is not None
        target = st.pool.args[0]
        if target == st.src_op:
            return "c" if st.src_cred else "f"
        return "c" if self.plan.ops[target].cred else "f"

    # ------------------------------------------------------------------ epilogue ops
    def _ops(self, k: Code, st: _Stage, ops: list[Op], co: _Coords, kinds: dict[int, str]) -> None:
        for op in ops:
            v = f"v{op.id}"
            if op.kind == "operand":
                o = op.operand
                assert o is not None
                kind = self.plan.operands[o].kind
                if kind == "scalar":
                    k(f"{v} = tl.load(o{o}_ptr).to(tl.float32)")
                    kinds[op.id] = "s"
                elif kind == "channel":
                    k(
                        f"{v} = tl.load(o{o}_ptr + c * o{o}_sc, mask=col_ok, other=0.0).to(tl.float32)[None, :]"
                    )
                    kinds[op.id] = "r"
                else:
                    sp = f"{co.d} * o{o}_sd + {co.h} * o{o}_sh + {co.w} * o{o}_sw"
                    k(
                        f"{v} = tl.load(o{o}_ptr + nr64 * o{o}_sn + (c * o{o}_sc)[None, :] + ({sp})[:, None], "
                        f"mask={co.ok}[:, None] & col_ok[None, :], other=0.0).to(tl.float32)"
                    )
                    kinds[op.id] = "f"
            elif op.kind == "const":
                k(f"{v} = k{op.id}_0")
                kinds[op.id] = "s"
            elif op.kind == "unary":
                fn = op.attrs["fn"]
                ks = {f"k{i}": f"k{op.id}_{i}" for i in range(len(op.consts))}
                k(f"{v} = " + _UNARY_TEMPLATES[fn].format(a=self._float(op.args[0], kinds), **ks))
                kinds[op.id] = kinds[op.args[0]]
            elif op.kind == "binary":
                fn = op.attrs["fn"]
                a, b = op.args
                if fn in _COMPARISONS:
                    k(f"{v} = " + _BINARY_TEMPLATES[fn].format(a=f"v{a}", b=f"v{b}"))
                    self.bools.add(op.id)
                else:
                    k(
                        f"{v} = "
                        + _BINARY_TEMPLATES[fn].format(a=self._float(a, kinds), b=self._float(b, kinds))
                    )
                kinds[op.id] = _bshape(kinds[a], kinds[b])
            elif op.kind == "where":
                cnd, a, b = op.args
                cexpr = f"v{cnd}" if cnd in self.bools else f"(v{cnd} != 0.0)"
                k(f"{v} = tl.where({cexpr}, {self._float(a, kinds)}, {self._float(b, kinds)})")
                kinds[op.id] = _bshape(_bshape(kinds[cnd], kinds[a]), kinds[b])
            elif op.kind == "norm":
                a = op.args[0]
                k("gi = (c // CG)[None, :]")
                k("mu = tl.load(mean_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
                k("rs = tl.load(rstd_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
                k(f"{v} = ({self._full(a, kinds)} - mu) * rs")
                kinds[op.id] = "f"
            elif op.kind == "creduce":
                a = op.args[0]
                fn = op.attrs["fn"]
                if kinds[a] == "c":
                    k(f"{v} = v{a}")
                else:
                    full = self._full(a, kinds)
                    if fn in ("sum", "mean"):
                        k(f"{v} = tl.sum(tl.where(col_ok[None, :], {full}, 0.0), axis=1)[:, None]")
                        if fn == "mean":
                            k(f"{v} = {v} / C")
                    else:
                        fill = "float('-inf')" if fn == "max" else "float('inf')"
                        red = "tl.max" if fn == "max" else "tl.min"
                        k(f"{v} = {red}(tl.where(col_ok[None, :], {full}, {fill}), axis=1)[:, None]")
                kinds[op.id] = "c"
            else:
                raise ConvEmitError(f"op {op.kind} inside a stage")

    def _float(self, op_id: int, kinds: dict[int, str]) -> str:
        if op_id in self.bools:
            return f"v{op_id}.to(tl.float32)"
        return f"v{op_id}"

    def _full(self, op_id: int, kinds: dict[int, str]) -> str:
        kind = kinds[op_id]
        v = self._float(op_id, kinds)
        if kind == "f":
            return v
        return f"({v} + tl.zeros({self._shape}, dtype=tl.float32))"

    # ------------------------------------------------------------------ sinks
    def _sink(self, k: Code, st: _Stage, kinds: dict[int, str], *, per_sample: bool, phase: bool) -> None:
        v = f"v{st.value}"
        kind = kinds[st.value]
        if kind in ("s", "r"):  # cannot happen for values of the convolution; keep the tile shape honest
            v = self._full(st.value, kinds)
            kind = "f"
        if st.value in self.bools:
            v = f"{v}.to(tl.float32)"
        sp = "(sd_ * sod + sh_ * soh + sw_ * sow)" if phase else "p"
        if st.sink == "sreduce":
            red = st.sreduce
            assert red is not None
            fn = red.attrs["fn"]
            if kind == "f":
                mask2 = "row_ok[:, None] & col_ok[None, :]"
                chan = "c * soc"
                cmask = "col_ok"
            else:  # one value per pixel: only the first channel tile writes it
                mask2 = "row_ok[:, None] & (pid_n == 0)"
                chan = "tl.zeros((1,), dtype=tl.int32)"
                cmask = "pid_n == 0"
            atomic = {
                "sum": "tl.atomic_add",
                "mean": "tl.atomic_add",
                "max": "tl.atomic_max",
                "min": "tl.atomic_min",
            }[fn]
            if per_sample:
                if fn in ("sum", "mean"):
                    k(f"r = tl.sum(tl.where({mask2}, {v}, 0.0), axis=0) * red_scale")
                else:
                    fill = "float('-inf')" if fn == "max" else "float('inf')"
                    red_fn = "tl.max" if fn == "max" else "tl.min"
                    k(f"r = {red_fn}(tl.where({mask2}, {v}, {fill}), axis=0)")
                mask = f", mask={cmask}" if cmask else ""
                k(f"{atomic}(out_ptr + n64 * son + {chan}, r{mask})")
            else:
                k("sp_ = sd_ * sod + sh_ * soh + sw_ * sow")
                scale = " * red_scale" if fn in ("sum", "mean") else ""
                cexpr = "(c * soc)[None, :]" if kind == "f" else "0"
                k(f"{atomic}(out_ptr + nr64 * son + {cexpr} + sp_[:, None], {v}{scale}, mask={mask2})")
            return
        if st.sink == "stats_only":
            pass
        elif kind == "f":
            k(
                f"tl.store(out_ptr + nr64 * son + (c * soc)[None, :] + ({sp})[:, None], "
                f"{v}.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])"
            )
        else:
            k(f"tl.store(out_ptr + nr64 * son + ({sp})[:, None], {v}.to(out_ptr.dtype.element_ty), "
              "mask=row_ok[:, None] & (pid_n == 0))")  # fmt: skip
        if st.sink in ("stats", "stats_only"):
            full = self._full(st.value, kinds) if kind == "f" else v
            k("okf = row_ok[:, None] & col_ok[None, :]")
            k(f"vz = tl.where(okf, {full}, 0.0)")
            k("cnt = tl.sum(row_ok.to(tl.float32), axis=0)")
            k("s1 = tl.sum(vz, axis=0)")
            k("mu_t = s1 / tl.maximum(cnt, 1.0)")
            k(f"dz = tl.where(okf, {full} - mu_t[None, :], 0.0)")
            k("m2 = tl.sum(dz * dz, axis=0)")
            tile = "pid_r * TPS + tt" if phase else "tt"
            k(f"pb = part_ptr + ((n64 * TT + {tile}) * 3) * C + c")
            k("tl.store(pb, tl.zeros((BLOCK_N,), dtype=tl.float32) + cnt, mask=col_ok)")
            k("tl.store(pb + C, s1, mask=col_ok)")
            k("tl.store(pb + 2 * C, m2, mask=col_ok)")

    # ------------------------------------------------------------------ the host side
    def emit(self, source: str) -> str:
        kernels = [self._stage_kernel(st) for st in self.stages]
        has_norm = any(st.norm is not None for st in self.stages)
        head = (
            KernelHeader.of("conv", self.design, self.cfg.model_dump()).render()
            + "\n"
            + '"""Generated by kernelwright\'s convolution writer: the convolution as a Triton implicit GEMM\n'
            + "with the work after it fused.\n\n"
            + "\n".join("    " + line for line in self.plan.describe().splitlines())
            + '\n"""\n'
        )
        reference = _ReferenceParts(source)
        parts = [
            head,
            "import math",
            "import torch",
            "import torch.nn as nn",
            "import triton",
            "import triton.language as tl",
        ]
        parts += reference.imports
        parts.append(_JIT_HELPERS)
        if has_norm:
            parts.append(_NORM_STATS_KERNEL)
        parts += ["\n" + kt for kt in kernels]
        parts.append(_HOST_HELPERS)
        if any(st.norm is not None and st.norm.attrs.get("running") for st in self.stages):
            parts.append(BN_RUNNING)
        parts += reference.helpers
        parts.append(self._forward_function())
        parts.append(reference.model_new(self.plan.forward_args))
        return "\n".join(parts).rstrip() + "\n"

    def _forward_function(self) -> str:
        s = self.spec
        h = Code()
        args = ", ".join(self.plan.forward_args)
        h(f"def _kw_forward(self, {args}):")
        with h.indent():
            h(f"ND = {s.ndim}")
            self._host_conv(h)
            for st in self.stages:
                self._host_stage(h, st)
            last = self.stages[-1]
            sizes = f"b{last.index}.shape"
            groups = self.plan.out_groups
            dims = ", ".join("1" if not g else " * ".join(f"{sizes}[{d}]" for d in g) for g in groups)
            h(f"return b{last.index}.view({dims}{',' if len(groups) == 1 else ''})")
        return "\n" + h.text()

    def _host_conv(self, h: Code) -> None:
        s = self.spec
        x = self.plan.conv_input
        if s.module is not None:
            m = f"self.{s.module}"
            h(f"stride = _kw_tup({m}.stride, ND)")
            h(f"dil = _kw_tup({m}.dilation, ND)")
            h(f"groups = int({m}.groups)")
            h(f"opad = _kw_tup(getattr({m}, 'output_padding', 0), ND)")
            h(f"padding = {m}.padding")
        else:
            hp = s.hyper
            h(f"stride = _kw_tup({hp['stride']}, ND)")
            h(f"dil = _kw_tup({hp['dilation']}, ND)")
            h(f"groups = int({hp['groups']})")
            h(f"opad = _kw_tup({hp['output_padding']}, ND)")
            h(f"padding = {hp['padding']}")
        h(f"w = {s.weight}")
        h(f"x5 = _kw_as5d({x}, ND)")
        h("w5 = _kw_as5d(w, ND)")
        h("N, CIN, ID, IH, IW = x5.shape")
        h("KD, KH, KW = w5.shape[2], w5.shape[3], w5.shape[4]")
        if s.transposed:
            h("OC_G = w5.shape[1]")
            h("OC = OC_G * groups")
            h("CIN_G = CIN // groups")
        else:
            h("OC = w5.shape[0]")
            h("CIN_G = w5.shape[1]")
            h("OC_G = OC // groups")
        h("ksz = (KD, KH, KW)")
        h("stride3, dil3, opad3 = _kw_pad3(stride, ND, 1), _kw_pad3(dil, ND, 1), _kw_pad3(opad, ND, 0)")
        h("if isinstance(padding, str):")
        with h.indent():
            h(
                "pad3 = tuple(dil3[i] * (ksz[i] - 1) // 2 for i in range(3)) if padding == 'same' else (0, 0, 0)"
            )
        h("else:")
        with h.indent():
            h("pad3 = _kw_pad3(_kw_tup(padding, ND), ND, 0)")
        h("insz = (ID, IH, IW)")
        if s.transposed:
            h(
                "osz = [(insz[i] - 1) * stride3[i] - 2 * pad3[i] + dil3[i] * (ksz[i] - 1) + opad3[i] + 1 for i in range(3)]"
            )
        else:
            h("if padding == 'same':")
            with h.indent():
                h("osz = list(insz)")
            h("else:")
            with h.indent():
                h(
                    "osz = [(insz[i] + 2 * pad3[i] - dil3[i] * (ksz[i] - 1) - 1) // stride3[i] + 1 for i in range(3)]"
                )
        h("OD, OH, OW = osz")
        # input layout
        if self.cfg.LAYOUT == "nhwc":
            h("xk = x5.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3)")
        else:
            h("xk = x5")
        # packed weight
        if self.design == "direct_depthwise":
            if s.transposed:
                pack = "lambda t: _kw_as5d(t, ND).reshape(t.shape[0] * t.shape[1], -1).t().contiguous()"
            else:
                pack = "lambda t: _kw_as5d(t, ND).reshape(t.shape[0], -1).t().contiguous()"
        else:
            # K-contiguous rows per output channel, in the kernel's K order: (tap, ic) for implicit_gemm
            # and nhwc flat-K, (ic, tap) for nchw flat-K (the forward weight's own layout, no copy)
            tap_major = self.design == "implicit_gemm" or self.cfg.LAYOUT == "nhwc"
            if s.transposed:  # (Cin, OC_G, taps) as (G, CIN_G, OC_G, T)
                perm = "(0, 2, 3, 1)" if tap_major else "(0, 2, 1, 3)"
                pack = (
                    f"lambda t: _kw_as5d(t, ND).reshape(groups, CIN_G, OC_G, -1).permute{perm}.contiguous()"
                )
            else:  # (OC, CIN_G, taps) as (G, OC_G, CIN_G, T)
                perm = ".permute(0, 1, 3, 2)" if tap_major else ""
                pack = f"lambda t: _kw_as5d(t, ND).reshape(groups, OC_G, CIN_G, -1){perm}.contiguous()"
        h(f"wp = _kw_cached(self, '{self.design}:{self.cfg.LAYOUT}:{s.weight}', w, {pack})")

    def _host_norm_stats(self, h: Code, st: _Stage) -> None:
        """mean{i} and rstd{i} of stage i's normalisation, from the previous stage's partials."""
        i = st.index
        assert st.norm is not None
        # the statistics of the previous stage's value, combined
        prev = self.stages[st.in_buf]
        norm = st.norm
        kind = norm.attrs["kind"]
        if kind == "group":
            h(f"G{i} = int({norm.attrs['groups']})")
        elif kind == "layer":
            h(f"G{i} = 1")
        else:
            h(f"G{i} = C{i}")
        h(f"CG{i} = C{i} // G{i}")
        per = kind != "batch"
        h(f"NB{i} = {'N' if per else '1'}")
        h(f"mean{i} = torch.empty((NB{i}, G{i}), device=x5.device, dtype=torch.float32)")
        h(f"rstd{i} = torch.empty((NB{i}, G{i}), device=x5.device, dtype=torch.float32)")
        h(f"smn{i} = {'G' + str(i) if per else '0'}")
        h(f"BC = min(64, _kw_npow2(CG{i}))")
        rows = f"TT{prev.index}" if per else f"N * TT{prev.index}"
        h(f"BT = max(1, min(2048 // BC, _kw_npow2({rows})))")
        launch = (
            f"_kw_norm_stats[(NB{i} * G{i},)](part{prev.index}, mean{i}, rstd{i}, TT{prev.index}, C{i}, CG{i}, "
            f"G{i}, N, float({norm.attrs['eps']}), PER_SAMPLE={per}, BLOCK_T=BT, BLOCK_C=BC)"
        )
        bn = norm.attrs.get("running")
        if bn is None:
            h(launch)
            return
        # A BatchNorm with running statistics follows its module's mode, as PyTorch's does: in eval mode
        # the running statistics normalise (the batch statistics pass above still runs, unused); in
        # train mode the batch statistics do, and update the running ones.
        h(f"if {bn}.training:")
        h(f"    {launch}")
        h(f"    _kw_bn_running({bn}, mean{i}, rstd{i}, N * math.prod(S{prev.index}))")
        h("else:")
        h(f"    mean{i}, rstd{i} = _kw_bn_eval_stats({bn}, C{i})")

    def _host_fold(self, h: Code, st: _Stage) -> None:
        """Stage i as the fold kernel (plan.fold): the reduced buffer from the statistics partials."""
        i = st.index
        prev = self.stages[st.in_buf]
        red = st.sreduce
        assert red is not None
        h(f"# stage {i}: statistics partials -> {red.attrs['fn']} of the normalised value (folded)")
        h(f"C{i} = OC")
        cb = "1" if self.plan.ops[st.value].cred else f"C{i}"
        h(f"b{i} = torch.empty((N, {cb}, 1, 1, 1), device=x5.device, dtype=torch.float32)")
        self._host_norm_stats(h, st)
        a = [f"part{prev.index}", f"TT{prev.index}", f"mean{i}", f"rstd{i}", f"smn{i}", f"CG{i}", "N", f"C{i}",
             f"b{i}", f"b{i}.stride(0)", f"b{i}.stride(1)"]  # fmt: skip
        for o in sorted({op.operand for op in st.ops if op.operand is not None}):
            operand = self.plan.operands[o]
            h(f"t{o} = {operand.expr}")
            if operand.kind == "scalar":
                a += [f"t{o}"]
            else:
                h(f"st{o} = _kw_ostrides(t{o}, {operand.align!r}, N, OC)")
                a += [f"t{o}", f"st{o}[1]"]
        a += [f"float({expr})" for _name, expr in self._const_args(st)]
        h(f"BN = _kw_npow2(C{i})")
        h(f"BT = max(1, min(max(1, 4096 // BN), _kw_npow2(TT{prev.index})))")
        _wrapped_call(h, f"_kw_stage{i}[(N,)]", a, "BLOCK_T=BT, BLOCK_N=BN, num_warps=4,")

    def _host_stage(self, h: Code, st: _Stage) -> None:
        if st.fold:
            self._host_fold(h, st)
            return
        i = st.index
        cfg = self.cfg
        per_sample = self._per_sample(st)
        conv = st.source == "conv"
        h(f"# stage {i}: {st.source}{' + pool' if st.pool else ''} -> {st.sink}")
        if conv:
            h(f"C{i} = OC")
            h(f"X{i} = (OD, OH, OW)")
        else:
            src = self.stages[st.in_buf]
            h(f"C{i} = OC")  # every value that has channels has the convolution's
            h(f"X{i} = tuple(b{src.index}.shape[2:])")
        if st.pool is not None:
            parts = ", ".join(
                f"({p['kernel']}, {p['stride']}, {p['padding']}, {p['dilation']})"
                for p in st.pool.attrs["parts"]
            )
            h(f"pk{i}, ps{i}, pp{i}, pd{i} = _kw_pool_params([{parts}], ND)")
            h(f"S{i} = _kw_pool_out(X{i}, pk{i}, ps{i}, pp{i}, pd{i})")
            h(f"pdiv{i} = float(pk{i}[0] * pk{i}[1] * pk{i}[2])")
        else:
            h(f"S{i} = list(X{i})")
        # the buffer this stage writes
        value_cred = self.plan.ops[st.value].cred if st.value > 0 else False
        if st.sink == "sreduce" and st.sreduce is not None:
            red = st.sreduce
            dims = red.attrs["dims"]
            h(f"B{i} = [{', '.join(f'1 if {d} in {tuple(dims)!r} else S{i}[{d - 2}]' for d in (2, 3, 4))}]")
            h(f"red_count{i} = 1")
            for d in dims:
                h(f"red_count{i} *= S{i}[{d - 2}]")
            cb = "1" if value_cred else f"C{i}"
            fn = red.attrs["fn"]
            init = {"sum": "torch.zeros", "mean": "torch.zeros"}.get(fn)
            shape = f"(N, {cb}, B{i}[0], B{i}[1], B{i}[2])"
            if init:
                h(f"b{i} = {init}({shape}, device=x5.device, dtype=torch.float32)")
            else:
                fill = "float('-inf')" if fn == "max" else "float('inf')"
                h(f"b{i} = torch.full({shape}, {fill}, device=x5.device, dtype=torch.float32)")
            h(f"red_scale{i} = 1.0 / red_count{i}" if fn == "mean" else f"red_scale{i} = 1.0")
        elif st.sink != "stats_only":
            cb = "1" if value_cred else f"C{i}"
            dtype = self.out_dtype if st.final else "torch.float32"
            h(f"b{i} = torch.empty((N, {cb}, S{i}[0], S{i}[1], S{i}[2]), device=x5.device, dtype={dtype})")
        # output strides (contiguous buffer; a reduced dim's stride is 0 for the per-element atomics)
        if st.sink == "sreduce" and st.sreduce is not None:
            dims = st.sreduce.attrs["dims"]
            h(f"so{i} = list(b{i}.stride())")
            for d in dims:
                h(f"so{i}[{d}] = 0")
        elif st.sink != "stats_only":
            h(f"so{i} = list(b{i}.stride())")
        # tile sizes
        ct = "OC_G" if (conv and self.gemm) else f"C{i}"
        cfull = st.needs_cfull
        h(f"CT{i} = {ct}" if self._has_channels(st) else f"CT{i} = 1")
        plane = self._plane(st)
        if plane:
            # rows (depth x height) of up to BLOCK_W columns; a 1-D plane's tile is one long row
            h(f"R{i} = S{i}[0] * S{i}[1]")
            h(f"BW = min({cfg.BLOCK_W}, {cfg.BLOCK_M}, _kw_npow2(S{i}[2]))")
            h(f"if R{i} == 1:")
            with h.indent():
                h(f"BW = min({cfg.BLOCK_M}, _kw_npow2(S{i}[2]))")
            h(f"BH = max(1, min({cfg.BLOCK_M} // BW, _kw_npow2(R{i})))")
            h("BM, BN, BK = BH * BW, 1, 16")
            warps, stages = cfg.num_warps, 1
        elif conv:
            h(f"BM, BN, BK = {cfg.BLOCK_M}, {cfg.BLOCK_N}, {cfg.BLOCK_K}")
            lo = 16 if self.gemm else 1
            if cfull:
                h(f"BN = max({lo}, _kw_npow2(CT{i}))")
                h(f"while BM * BN > 16384 and BM > {lo}:")
                with h.indent():
                    h("BM //= 2")
            else:
                h(f"BN = max({lo}, min(BN, _kw_npow2(CT{i})))")
            if self.design == "implicit_gemm":
                h("BK = max(16, min(BK, _kw_npow2(CIN_G)))")
            elif self.design == "implicit_gemm_flatk":
                h("BK = max(16, min(BK, _kw_npow2(CIN_G * KD * KH * KW)))")
            if per_sample:
                h(f"BM = max({lo}, min(BM, _kw_npow2(S{i}[0] * S{i}[1] * S{i}[2])))")
            warps, stages = cfg.num_warps, cfg.num_stages
        else:
            h("BK = 16")
            if cfull or st.src_cred:
                h(f"BN = _kw_npow2(CT{i})")
            else:
                h(f"BN = min(64, _kw_npow2(CT{i}))")
            h("BM = max(1, min(128, 4096 // BN))")
            if per_sample:
                h(f"BM = max(1, min(BM, _kw_npow2(S{i}[0] * S{i}[1] * S{i}[2])))")
            warps, stages = 4, 2
        # grid
        if plane:
            h(f"grid = (-(-R{i} // BH) * -(-S{i}[2] // BW), C{i}, N)")
            if st.sink in ("stats", "stats_only"):
                h(f"TT{i} = grid[0]")
                h(f"part{i} = torch.empty((N, TT{i}, 3, C{i}), device=x5.device, dtype=torch.float32)")
        elif conv and self.phase:
            h(f"GP{i} = -(-OD // stride3[0]) * -(-OH // stride3[1]) * -(-OW // stride3[2])")
        else:
            h(f"GP{i} = S{i}[0] * S{i}[1] * S{i}[2]")
        if plane:
            pass
        elif per_sample:
            h(f"num_m = N * -(-GP{i} // BM)")
        else:
            h(f"num_m = -(-(N * GP{i}) // BM)")
        if not plane:
            h(f"grid = (num_m * -(-CT{i} // BN), {'groups' if conv and self.gemm else 1}, "
              f"{'stride3[0] * stride3[1] * stride3[2]' if conv and self.phase else 1})")  # fmt: skip
        if st.sink in ("stats", "stats_only") and not plane:
            h(f"TT{i} = -(-GP{i} // BM) * grid[2]")
            h(f"part{i} = torch.empty((N, TT{i}, 3, C{i}), device=x5.device, dtype=torch.float32)")
        # launch
        a: list[str] = []
        if conv:
            a += ["xk", "wp", "*xk.stride()", "ID", "IH", "IW", "CIN_G", "OC_G", "KD", "KH", "KW",
                  "*stride3", "*pad3", "*dil3"]  # fmt: skip
            if self.design == "implicit_gemm" and self.spec.transposed:
                a += [f"stride3[{d}] // math.gcd(stride3[{d}], dil3[{d}])" for d in range(3)]
        else:
            src = self.stages[st.in_buf]
            a += [f"b{src.index}", f"*b{src.index}.stride()"]
        if st.norm is not None:
            a += [f"mean{i}", f"rstd{i}", f"smn{i}", f"CG{i}"]
        a += ["N", f"C{i}", f"CT{i}", f"*X{i}", f"*S{i}"]
        if st.pool is not None:
            a += [f"*pk{i}", f"*ps{i}", f"*pp{i}", f"*pd{i}", f"pdiv{i}"]
        if st.sink != "stats_only":
            a += [f"b{i}", f"*so{i}"]
        if st.sink in ("stats", "stats_only"):
            a += [f"part{i}", f"TT{i}"]
        if st.sink == "sreduce":
            a += [f"red_scale{i}"]
        operand_ids = sorted({op.operand for op in st.ops if op.operand is not None})
        for o in operand_ids:
            operand = self.plan.operands[o]
            h(f"t{o} = {operand.expr}")
            if operand.kind == "scalar":
                a += [f"t{o}"]
            else:
                h(f"st{o} = _kw_ostrides(t{o}, {operand.align!r}, N, OC)")
                if operand.kind == "channel":
                    a += [f"t{o}", f"st{o}[1]"]
                else:
                    a += [f"t{o}", f"*st{o}"]
        for _name, expr in self._const_args(st):
            a += [f"float({expr})"]
        if st.norm is not None:
            self._host_norm_stats(h, st)
        extra = ""
        if self._pool_phase(st):
            extra = f"POOL_PHASE=all(ps{i}[d] % stride3[d] == 0 for d in range(3)), "
        if plane:
            extra = "BLOCK_H=BH, BLOCK_W=BW, "
        meta = (
            f"BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M={cfg.GROUP_M}, {extra}"
            f"num_warps={warps}, num_stages={stages},"
        )
        _wrapped_call(h, f"_kw_stage{i}[grid]", a, meta)


def _wrapped_call(h: Code, callee: str, args: list[str], tail: str) -> None:
    """`callee(` with the arguments packed into lines of about 96 characters, `tail` (the launch's
    keyword arguments) ending the last line, then `)`."""
    h(callee + "(")
    with h.indent():
        line = ""
        for piece in [p + ", " for p in args]:
            if len(line) + len(piece) > 96:
                h(line.rstrip())
                line = ""
            line += piece
        h((line + tail).rstrip())
    h(")")


class _ReferenceParts:
    """What ModelNew takes from the task's source: imports, helpers, and Model.__init__ (renamed)."""

    _SKIP_FUNCTIONS = ("get_inputs", "get_init_inputs", "get_small_inputs", "get_small_init_inputs")

    def __init__(self, source: str) -> None:
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            raise ConvEmitError(f"the task source does not parse: {exc.msg}") from None
        self.imports: list[str] = []
        self.helpers: list[str] = []
        self.model: ast.ClassDef | None = None
        standard = {
            "import math",
            "import torch",
            "import torch.nn as nn",
            "import triton",
            "import triton.language as tl",
        }
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                text = ast.unparse(node)
                if text not in standard:
                    self.imports.append(text)
            elif isinstance(node, ast.ClassDef) and node.name == "Model":
                self.model = node
            elif isinstance(node, ast.ClassDef):
                self.helpers.append("\n" + ast.unparse(node) + "\n")
            elif isinstance(node, ast.FunctionDef) and node.name not in self._SKIP_FUNCTIONS:
                self.helpers.append("\n" + ast.unparse(node) + "\n")
        if self.model is None:
            raise ConvEmitError("the task source defines no Model class")
        self.forward: ast.FunctionDef | None = None
        for item in self.model.body:
            if isinstance(item, ast.FunctionDef) and item.name == "forward":
                self.forward = item
        # module-level constants the copied code reads (and the constants those read), in source order
        keep = [self.model] + [n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)]
        used = set().union(*(_free_names(node) for node in keep))
        assigns = [n for n in tree.body if isinstance(n, ast.Assign)]
        chosen: set[int] = set()
        changed = True
        while changed:
            changed = False
            for i, node in enumerate(assigns):
                if i not in chosen and any(isinstance(t, ast.Name) and t.id in used for t in node.targets):
                    chosen.add(i)
                    used |= {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                    changed = True
        self.helpers = [ast.unparse(assigns[i]) for i in sorted(chosen)] + self.helpers

    def model_new(self, forward_args: list[str]) -> str:
        assert self.model is not None
        cls = _RenameModel().visit(ast.parse(ast.unparse(self.model)).body[0])
        assert isinstance(cls, ast.ClassDef)
        cls.name = "ModelNew"
        body = [
            item for item in cls.body if not (isinstance(item, ast.FunctionDef) and item.name == "forward")
        ]
        if self.forward is not None:
            fwd_args = ast.unparse(self.forward.args)
        else:
            fwd_args = ", ".join(["self", *forward_args])
        call = ", ".join(forward_args)
        fwd = ast.parse(f"def forward({fwd_args}):\n    return _kw_forward(self, {call})\n").body[0]
        cls.body = body + [fwd]
        cls.decorator_list = []
        return "\n" + ast.unparse(cls) + "\n"


def _free_names(node: ast.AST) -> set[str]:
    """Names a class or function reads without binding them itself (arguments, assignments)."""
    bound: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            bound.add(n.id)
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


class _RenameModel(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == "Model":
            return ast.copy_location(ast.Name(id="ModelNew", ctx=node.ctx), node)
        return node


def emit(plan: ConvPlan, source: str, design: str, config: ConvConfig, precision: str) -> str:
    """The candidate module for `plan` (see conv.emit_conv_program)."""
    return _Emitter(plan, design, config, precision).emit(source)
