"""The stages of a conv program: where a ConvPlan's ops are cut into kernels, and the per-stage facts.

`partition` cuts the plan's ops into stages wherever the work needs the whole tensor before it can go on
(see conv_codegen's module docstring); `StagedPlan` applies the design and config to that cut (a grouped
convolution's channel reductions split after the convolution, a normalisation folded into its
statistics or recomputed, the trailing no-op stage dropped) and answers what both the kernel writer
(conv_kernels) and the launcher writer (conv_host) need to agree on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelwright.providers.offline.families.conv.conv_ir import SPATIAL, ConvConfig, ConvPlan, ConvSpec, Op
from kernelwright.providers.offline.operators import BOOLEAN

DESIGNS = ("implicit_gemm", "implicit_gemm_flatk", "direct_depthwise", "direct")
DIRECT_MAX_K = 128
"""`direct` is for short reductions, input channels x taps of a group: at most this many (published/36, a
3-channel 3x3x3 input layer, has 81)."""


def direct_applies(spec: ConvSpec) -> bool:
    """Whether the dense `direct` design can write this convolution: a forward one of a short reduction."""
    return not spec.transposed and spec.reduction <= DIRECT_MAX_K


class ConvEmitError(ValueError):
    """The plan cannot be written with this design (a one-line reason)."""


@dataclass
class Stage:
    """One kernel of the program: a source, the ops in registers, at most one pooling, and a sink."""

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


def partition(plan: ConvPlan, *, split_after_conv: bool = False) -> list[Stage]:
    """The plan's ops as stages (see the module docstring)."""
    stages: list[Stage] = []
    cur = Stage(index=0, source="conv", src_op=0)
    if split_after_conv:
        cur.value, cur.sink = 0, "store"
        stages.append(cur)
        cur = Stage(index=1, source="load", src_op=0, in_buf=0)

    def close(value: int, sink: str) -> None:
        cur.value, cur.sink = value, sink
        stages.append(cur)

    for op in plan.ops[1:]:
        if op.kind == "pool":
            if cur.pool is None:
                cur.pool = op
                continue
            close(op.args[0], "store")
            cur = Stage(index=len(stages), source="load", src_op=op.args[0], in_buf=len(stages) - 1, pool=op)
        elif op.kind == "norm":
            close(op.args[0], "stats")
            stages[-1].next_norm = op
            cur = Stage(index=len(stages), source="load", src_op=op.id, norm=op, in_buf=len(stages) - 1)
        elif op.kind == "sreduce":
            close(op.args[0], "sreduce")
            stages[-1].sreduce = op
            cur = Stage(
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


class StagedPlan:
    """A plan cut into stages for one design and config, with the decisions that both the kernels and
    the launcher read (the tiling of each stage, what is compile-time, which stage is folded)."""

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
        if design == "direct" and not direct_applies(s):
            raise ConvEmitError(
                f"direct needs a forward convolution of at most {DIRECT_MAX_K} input channels x taps per group"
            )
        if precision == "strict" and cfg.DOT == "tf32":
            raise ConvEmitError("DOT=tf32 is not allowed under strict precision")
        self.gemm = design != "direct_depthwise"
        self.w_tma = design == "implicit_gemm" and s.dtype in ("float16", "bfloat16")
        """The tap loop may read the packed weight through a tensor descriptor (`W_TMA`, decided per launch by
        the host: a GPU with TMA, CIN_G a multiple of BLOCK_K, aligned rows): an nn.Linear-like K-major B,
        which pointer tiles read worst (see emit_matmul's TMA twin)."""
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
        if plan.ops[plan.output].kind == "binary" and plan.ops[plan.output].attrs.get("fn") in BOOLEAN:
            raise ConvEmitError("a boolean output")
        self.out_dtype = {
            "float32": "torch.float32",
            "float16": "torch.float16",
            "bfloat16": "torch.bfloat16",
        }[s.dtype]
        # Stage 0 of a transposed implicit GEMM without pooling works per output phase.
        st0 = self.stages[0]
        self.phase = design == "implicit_gemm" and s.transposed and st0.pool is None
        self._varies: dict[int, bool] = {}

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

    def box(self, st: Stage) -> bool:
        """Whether the stage's tiles are boxes of output rows read through an input descriptor (X_TMA)."""
        return (
            self.cfg.X_TMA
            and self.design == "implicit_gemm"
            and self.cfg.LAYOUT == "nhwc"
            and st.source == "conv"
            and st.pool is None
            and not self.spec.transposed
        )

    def per_sample(self, st: Stage) -> bool:
        if st.sink in ("stats", "stats_only") or self.box(st):
            return True
        if self.unrolled() and st.source == "conv" and st.sink == "store":
            # one sample per tile: the sample's base is a scalar, no division by the plane size per pixel
            return True
        if st.sink == "sreduce" and st.sreduce is not None:
            return self.all_spatial(st.sreduce.attrs["dims"])
        return False

    def all_spatial(self, dims: list[int]) -> bool:
        return set(dims) >= set(SPATIAL[3 - self.spec.ndim :])

    def varies_c(self, op_id: int) -> bool:
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
            out = any(self.varies_c(a) for a in op.args)
        self._varies[op_id] = out
        return out

    def has_channels(self, st: Stage) -> bool:
        """Whether a stage's tiles need to run over channels (else one value per pixel)."""
        if st.source == "conv" or not st.src_cred:
            return True
        return any(self.varies_c(op.id) for op in st.ops)

    def pool_phase(self, st: Stage) -> bool:
        return (
            st.source == "conv"
            and st.pool is not None
            and self.design == "implicit_gemm"
            and self.spec.transposed
        )

    def window_split(self, st: Stage) -> bool:
        """Whether the stage's max-pool windows may be split across programs (grid axis 2, WCH window
        positions each, the pooled tile combined with atomic max into a buffer filled with -inf): a GEMM
        design's convolution stage whose stored value is the max pool itself, in fp32. A fused pool walks
        its window positions one after another, each a whole convolution tile, so where the pooled rows
        are few the programs are few and long: level2/21 (conv3d, softmax over channels, two 2x2x2 pools,
        64 positions) at 11 x 11 x 13 x 49 x 49 made 84 programs of 64 x 27 tap steps, 0.24x eager on an
        H200. The launcher splits only where the tiles leave SMs idle (max is exact in any order); a persistent
        stage's programs walk their tiles with their share of each tile's positions (level2/21's best kernel
        at its searched size was persistent, and ran 0.22x eager at that unseen size unsplit, on an H100)."""
        return (
            st.source == "conv"
            and self.gemm
            and self.design in ("implicit_gemm", "implicit_gemm_flatk")
            and st.pool is not None
            and st.pool.attrs["kind"] == "max"
            and not st.post
            and st.value == st.pool.id
            and st.sink == "store"
            and self.spec.dtype == "float32"
            and not self.pool_phase(st)
            and not self.per_sample(st)
            and not self.box(st)
        )

    def channel_chunks(self, st: Stage) -> Op | None:
        """The stage's one reduction over channels, where its tile may walk the channels in chunks of the
        traced whole-channel width instead of one tile as wide as the call's channels (else None): an
        implicit GEMM's convolution stage that reduces over channels once (sum, mean, max or min) and after
        it works only on the reduced value and scalars, storing it. A whole-channel tile is as wide as the
        channels' power of two: level2/10 (conv, sigmoid, channel sum) at 160 output channels (traced 128)
        ran 64 x 256 tiles with 16-wide K steps, 242 registers a thread, 0.56x eager on an H200, where the
        same convolution without the sum (128 x 128 tiles) ran twice as fast. In chunks each tile keeps the
        traced width (128) and reduces as it goes."""
        if not (
            st.source == "conv"
            and self.design == "implicit_gemm"
            and self.plan.full_spec is not None
            and st.pool is None
            and st.norm is None
            and not st.post
            and st.sink == "store"
            and not self.phase
            and not self.persistent(st)
            and not self.per_sample(st)
            and not self.box(st)
        ):
            return None
        reds = [op for op in st.pre if op.kind == "creduce"]
        if len(reds) != 1 or reds[0].attrs["fn"] not in ("sum", "mean", "max", "min"):
            return None
        red = reds[0]
        scalar = {op.id for op in st.pre if op.kind == "const" or self.scalar_operand(op)}
        after = {red.id}
        for op in st.pre[st.pre.index(red) + 1 :]:
            if op.kind not in ("const", "unary", "binary", "where") and not self.scalar_operand(op):
                return None
            if any(a not in after and a not in scalar for a in op.args):
                return None
            after.add(op.id)
        return red if st.value in after else None

    def scalar_operand(self, op: Op) -> bool:
        """Whether `op` loads a scalar operand (one value for the whole call)."""
        return (
            op.kind == "operand"
            and op.operand is not None
            and self.plan.operands[op.operand].kind == "scalar"
        )

    def const_args(self, st: Stage) -> list[tuple[str, str]]:
        out = []
        for op in st.ops:
            for i, c in enumerate(op.consts):
                out.append((f"k{op.id}_{i}", c.expr))
        return out

    def unrolled(self) -> bool:
        """The direct designs of a forward convolution: their taps unrolled (`direct`: a plane's taps, in a
        loop over input channels and depth taps). Every design takes the kernel's size, stride and dilation
        as compile-time constants (conv_kernels); only these unroll over them."""
        return self.design in ("direct_depthwise", "direct") and not self.spec.transposed

    def persistent(self, st: Stage) -> bool:
        """Whether the stage's kernel walks its tiles in a loop (PERSIST > 0): the GEMM designs'
        convolution stage; other stages, and direct_depthwise, launch one program per tile."""
        return self.cfg.PERSIST > 0 and self.gemm and st.source == "conv"

    def plane(self, st: Stage) -> bool:
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
