"""The convolution family of the offline writer: Triton convolutions with the following work fused.

Public API (everything a writer needs to offer "conv" as a family):

    analysis = analyze_conv_task(task_source)            # ConvAnalysis(plan | None, reason)
    plan = analysis.plan                                  # or analyze_conv_model(model, example_inputs)
    designs = conv_designs(plan)                          # applicable designs, best guess first
    configs = conv_configs(designs[0], plan, "strict")    # the config space, default first
    text = emit_conv_program(plan, task_source, design=designs[0], config=configs[0], precision="strict")
    conv_neighbours(design, config, "strict")             # small steps: configs one knob away
    parse_conv_header(text)                               # (design, config) back from a program

`write_conv_program(task_source, ...)` does analysis, choice and emission in one call (None when the
task is not a supported convolution). providers/offline/families/conv/conv_writer.py wraps all of this as a TaskWriter
for the offline writer (named in plugins.TASK_WRITERS).

Designs: implicit_gemm (K loop over taps x input-channel blocks; transposed convolutions split by
output phase), implicit_gemm_flatk (K = input channels x taps flattened; for few channels per group),
direct_depthwise (one input channel per group, fp32 FMAs; by default 2-D tiles of one (sample,
channel) plane, BLOCK_W columns wide), direct (a forward convolution of at most 128 input channels x
taps per group: one outer product per (channel, tap), fp32 FMAs). Config knobs: BLOCK_M/N/K, BLOCK_W, GROUP_M, num_warps,
num_stages, LAYOUT (nchw | nhwc inside the kernel), DOT (ieee | tf32x3 | tf32), RECOMPUTE (a
normalisation's second pass recomputes the convolution instead of re-reading it), PERSIST (programs per
SM walking the tiles) and X_TMA (implicit_gemm over nhwc: tiles are boxes of output rows whose input
boxes come through a tensor descriptor). Programs start with
`# kernelwright: family=conv design=<design> config=<k=v,...>`, define `ModelNew` with the task's
constructor (copied from `Model.__init__`, so parameter names and the reference's state_dict match)
and forward signature, and are shape-generic.

A per-channel-affine normalisation (group/instance/batch norm, training statistics) followed only by
affine per-channel work and a sum or mean over every spatial dim is folded (ConvPlan.fold, found by
conv_fold.find_norm_fold): the convolution's output is never stored, the reduction comes from the
normalisation's per-tile partial sums.

Precision: "strict" allows DOT=ieee (exact fp32 FMAs) and DOT=tf32x3 (three TF32 tensor-core
products per term, fp32-level accuracy); "tf32" and "reduced" also allow DOT=tf32. fp16/bf16 tasks
multiply in their own type with fp32 accumulation.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelwright.providers.offline.families.conv.conv_analysis import (
    ConvAnalysis,
    ConvUnsupported,
    analyze_conv_model,
    explain_conv_model,
)
from kernelwright.providers.offline.families.conv.conv_codegen import DESIGNS, ConvEmitError, emit
from kernelwright.providers.offline.families.conv.conv_ir import ConvConfig, ConvPlan, ConvSpec
from kernelwright.providers.offline.families.conv.conv_stages import direct_applies
from kernelwright.providers.protocol import KernelHeader

__all__ = [
    "CONV_FAMILY",
    "ConvAnalysis",
    "ConvConfig",
    "ConvEmitError",
    "ConvPlan",
    "ConvSpec",
    "ConvUnsupported",
    "analyze_conv_model",
    "analyze_conv_task",
    "conv_configs",
    "conv_designs",
    "conv_neighbours",
    "default_conv_config",
    "emit_conv_program",
    "explain_conv_model",
    "parse_conv_header",
    "write_conv_program",
]

CONV_FAMILY = "conv"
Precision = str  # "strict" | "tf32" | "reduced"

_DOTS = {
    "strict": ("tf32x3", "ieee"),
    "tf32": ("tf32", "tf32x3", "ieee"),
    "reduced": ("tf32", "tf32x3", "ieee"),
}


def _dots(precision: str) -> tuple[str, ...]:
    if precision not in _DOTS:
        raise ValueError(f"precision must be strict, tf32 or reduced, not {precision!r}")
    return _DOTS[precision]


def _sizes(plan: ConvPlan | None) -> ConvSpec | None:
    if plan is None:
        return None
    return plan.full_spec or plan.spec


def conv_designs(plan: ConvPlan | None = None) -> list[str]:
    """Designs that can write `plan`, the one expected to be fastest first (all designs without a plan).

    direct_depthwise needs one input channel per group; implicit_gemm_flatk suits few input channels
    per group (the reduction dim is channels x taps), implicit_gemm many; direct, a forward convolution
    whose reduction is short (<= DIRECT_MAX_K), comes before flat-K for few fp32 input channels: on an H200
    (2026-12-02, published/36, 3 -> 64 channels, 3x3x3) direct 128 x 64 took 1.69 ms, flat-K 2.13. Half
    precision keeps flat-K first (bf16/fp16 tensor cores against direct's fp32 FMAs; not measured).
    """
    spec = _sizes(plan)
    if spec is None:
        return list(DESIGNS)
    cin_g = spec.in_per_group
    if cin_g == 1:
        return ["direct_depthwise", "implicit_gemm_flatk", "implicit_gemm"]
    direct = ["direct"] if direct_applies(spec) else []
    if cin_g < 16 and spec.dtype == "float32":
        return [*direct, "implicit_gemm_flatk", "implicit_gemm"]
    if cin_g < 16:  # half operands: flat-K's tensor cores against fp32 FMAs (not measured): flat-K first
        return ["implicit_gemm_flatk", *direct, "implicit_gemm"]
    return ["implicit_gemm", "implicit_gemm_flatk", *direct]


# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
_GEMM_TILES = [
    (128, 128, 32, 8, 3),
    (128, 64, 32, 8, 3),
    (64, 128, 32, 4, 3),
    (64, 64, 32, 4, 4),
    (128, 128, 16, 8, 4),
    (256, 64, 32, 8, 3),
    (128, 32, 32, 4, 3),
    (64, 32, 32, 4, 3),
]
# flat-K builds [BLOCK_M, BLOCK_K] index tiles every step: 8 warps from 128 x 64 up (4 spill on sm_90)
_FLAT_TILES = [
    (128, 64, 32, 8, 3),
    (64, 32, 32, 4, 3),
    (64, 64, 32, 4, 3),
    (128, 128, 32, 8, 3),
    (128, 32, 32, 8, 3),
    (256, 64, 16, 8, 3),
]
# flat-K with a short reduction (input channels per group x taps <= _SHORT_K: a 3-channel 3-D input layer
# has 81): a few K steps, so a software pipeline has nothing to overlap and its prologue costs more than
# the steps. published/36 (3 -> 64, 3x3x3, 16 x 64^3) on an H200, 57 tiles swept: 5.25 ms at 128 x 64 x 32
# over 8 warps and 3 stages, 2.21 ms at 64 x 64 x 16 over 4 warps and 1 stage (the best; 16-wide K slices
# are fine here with one stage, unlike the long reductions below).
_SHORT_K = 128
_SHORT_K_TILES = [(64, 64, 16, 4, 1), (128, 64, 16, 4, 1), (64, 64, 32, 4, 1), (128, 64, 32, 8, 1)]
# direct, flat: BLOCK_M pixels of one sample (contiguous in NCHW) x BLOCK_N channels; every pixel
# divides its flat index by the plane's width and checks nine taps' bounds (instruction-bound on sm_90:
# task 24 at about half the memory roofline)
_DIRECT_TILES = [(256, 4, 16, 4, 1), (512, 2, 16, 4, 1), (128, 8, 16, 4, 1), (1024, 1, 16, 4, 1),
                 (256, 8, 16, 8, 1), (64, 32, 16, 4, 1)]  # fmt: skip
# direct, 2-D plane tiles (nchw): (BLOCK_M pixels, BLOCK_W columns, num_warps) of one (sample, channel)
# plane. sm_90 SASS for task 24 (3 x 3, stats + normalise stages): 16 x 128 over 4 warps (4 rows x 4
# columns a thread, 96/64 registers) is ~68/60 instructions per output, 8 x 128 ~89/76 (the prologue and
# the statistics' reductions amortise over fewer outputs), 32 x 128 ~58/51 at 126 registers. Timed on an
# H200 (2026-12-01, one call): level2/24 (depthwise + batch norm) 0.379 ms at 2048 x 128, 0.418 at 1024 x
# 128; a depthwise convolution with no statistics after it (published/32, 3x3, 16x64x512^2) the other way
# round, 1.42 ms at 1024 x 128 against 1.85. Where a norm follows, 4096 x 128 over 4 warps (its small step
# from 2048) then won twice: level2/24 fp32 0.368 ms against 0.379 (bench, 2026-12-02), level2_bf16/24 0.313
# against 0.343 (design_sweep, 2026-12-02; 2048 over 8 warps 0.380, 512 0.393, NHWC flat tiles 0.40-0.57).
# So 4096 over 4 warps first where a norm follows, 1024 first otherwise. Then judged at sizes its search never
# saw (2026-12-07, H100, benchmarks/probes/unseen_variants.py, 20 repetitions, ~8% run-to-run): level2/24 at
# 23 x 95 x 83^2 0.281 ms at 4096 against 0.250 at 2048, at 40 x 160 x 140^2 1.657 against 1.304 (1.148 with
# the plane's width fitted, _kw_plane_w), at its own 32 x 128 x 112^2 0.419 against 0.381. So 2048 first.
# Unmasked interior tiles (INTERIOR, 2026-12-02, H200, design_sweep): published/32's 512-wide planes 1.421 ->
# 1.026 ms at 1024 x 128, 1.510 -> 0.959 at 1024 x 64, 1.802 -> 0.934 at 2048 x 64 (the best), 1.850 ->
# 1.342 at 2048 x 128; level2/24's 112-wide planes have no interior tile at 128 columns and paid the branch
# (0.370 -> 0.380 ms at 4096 x 128), 1024 x 32 with interior tiles 0.364. So every plane tile carries
# INTERIOR except the first where a norm follows, and a plain depthwise convolution starts at 2048 x 64.
_DIRECT_PLANE_TILES = [(2048, 128, 4), (4096, 128, 4), (1024, 128, 4), (4096, 128, 8), (2048, 128, 8),
                       (2048, 64, 4), (1024, 32, 4)]  # fmt: skip
# direct (dense, short reduction): BLOCK_M pixels x BLOCK_N output channels of fp32 accumulators, one
# outer product per (input channel, tap). Compiled for sm_90 at published/36 (3 -> 64 channels, 3x3x3):
# 128 x 64 over 4 warps 150 registers, 256 x 64 over 8 warps 172, 128 x 32 over 4 warps 95, none spilled;
# 64 x 64 over 4 warps and 128 x 64 over 8 spilled (~1 KB a thread). Timed on an H200 (2026-12-02,
# published/36, flat-K 2.13 ms): 128 x 64 1.69 ms, 128 x 32 1.79, 256 x 64 over 8 warps 2.30, 64 x 32 8.80.
# Fewer than 48 output channels per group start at 128 x 32 (a 64-wide tile would be half empty).
_DENSE_TILES = [(128, 64, 16, 4, 1), (128, 32, 16, 4, 1), (256, 64, 16, 8, 1), (64, 32, 16, 4, 1)]
_PLAIN_PLANE_FIRST = (2048, 64, 4)


def _first_boundary(ops: list[Any]) -> int:
    """Index of the first op that ends the convolution's kernel (a normalisation or spatial reduction)."""
    return next((i for i, op in enumerate(ops) if op.kind in ("norm", "sreduce")), len(ops))


def conv_configs(
    design: str, plan: ConvPlan | None = None, precision: Precision = "strict"
) -> list[ConvConfig]:
    """The config space of `design` for `plan` under `precision`; the default (best guess) first."""
    if design not in DESIGNS:
        raise ValueError(f"unknown conv design {design!r}; known: {', '.join(DESIGNS)}")
    dots = _dots(precision)
    spec = _sizes(plan)
    half = spec is not None and spec.dtype != "float32"
    tiles = {
        "implicit_gemm": _GEMM_TILES,
        "implicit_gemm_flatk": _FLAT_TILES,
        "direct_depthwise": _DIRECT_TILES,
        "direct": _DENSE_TILES,
    }[design]
    tiles = list(tiles)
    short_k = design == "implicit_gemm_flatk" and spec is not None and spec.reduction <= _SHORT_K
    if short_k:
        tiles = _SHORT_K_TILES + [t for t in tiles if t not in _SHORT_K_TILES]
    if spec is not None and design == "direct" and spec.out_per_group < 48:
        tiles.sort(key=lambda t: t[1] != 32)
    if spec is not None and design not in ("direct_depthwise", "direct") and not short_k:
        oc_g = spec.out_per_group
        # channels per group decide the N tile: do not spend a wide tile on a few channels
        preferred = 128 if oc_g >= 128 else (64 if oc_g >= 48 else 32)
        order = {t: i for i, t in enumerate(tiles)}
        # Pooling or a channel reduction in the convolution's own kernel keeps more tiles live: prefer
        # at most 32 accumulator registers per thread there (ptxas spills above with DOT=tf32x3).
        ops = plan.ops[1:] if plan is not None else []
        busy = any(op.kind in ("pool", "creduce") for op in ops[: _first_boundary(ops)])

        # 3-D convolutions and few input channels per group (BLOCK_K clamps to 16): 64 x 64 x 32 over 4
        # warps and 4 stages measured best on sm_90 (task 29: 2.86 ms against 3.38 for 128 x 64 over 8
        # warps); 2-D convolutions with many channels keep the wide tiles (task 09: 128 x 128 best).
        small_k = design == "implicit_gemm" and (spec.ndim == 3 or spec.in_per_group <= 16)
        first = (64, 64, 32, 4, 4) if small_k and oc_g >= 48 else None

        def key(t: tuple[int, int, int, int, int]) -> tuple[bool, int, bool, int]:
            regs = t[0] * t[1] // (32 * t[3])
            return (t != first, abs(t[1] - preferred), busy and regs > 32, order[t])

        tiles.sort(key=key)  # listed order within a width
    if half and design == "implicit_gemm":
        # 16-bit operands: twice the K per step in the same smem, and one warpgroup up to 128 x 128 tiles
        # (level2_bf16 09, 10, 20, 27 on an H200: 128 x 128 x 64 over 4 warps 0.35-0.53 ms for the
        # kernel alone, over 8 warps 0.39-0.74)
        tiles = [(m, n, 64 if k == 32 else k, 4 if m * n <= 128 * 128 else w, s) for m, n, k, w, s in tiles]

    # A normalisation after the convolution: store the convolution's output and re-read it, or recompute
    # the convolution in the second pass; both are in the space, storing first. Even for a cheap
    # depthwise 3x3 convolution storing won on an H200 (level2/24 with batch norm, 1024-pixel plane
    # tiles: 0.416 ms stored, 0.491 recomputed).
    # A folded normalisation (plan.fold) neither stores nor re-reads anything: no second pass to choose.
    folded = plan.fold.norm if plan is not None and plan.fold is not None else -1
    has_norm = plan is not None and any(op.kind == "norm" and op.id != folded for op in plan.ops)

    def tiles_for(dot: str, layout: str) -> list[tuple[int, int, int, int, int, int]]:
        """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, BLOCK_W) for one dot and layout."""
        if design == "direct_depthwise":
            planes = list(_DIRECT_PLANE_TILES)
            if not has_norm:
                planes.remove(_PLAIN_PLANE_FIRST)
                planes.insert(0, _PLAIN_PLANE_FIRST)
            plane = [(m, 1, 16, w, 1, bw) for m, bw, w in planes] if layout == "nchw" else []
            return plane + [(m, n, k, w, s, 0) for m, n, k, w, s in tiles]
        # TF32 tensor-core dots (tf32x3 splits every operand tile in registers each step) do poorly
        # with 16-wide K slices on Hopper: they get BLOCK_K >= 32, duplicates dropped, order kept.
        out: list[tuple[int, int, int, int, int, int]] = []
        for m, n, k, w, s in tiles:
            t = (m, n, k if half or dot == "ieee" or short_k or design == "direct" else max(k, 32), w, s, 0)
            if t not in out:
                out.append(t)
        return out

    # Half-precision 2-D convolutions read their input boxes through a descriptor, two programs per SM walking
    # the tiles (level2_bf16 on an H200, the program with its input copy: 09 0.593 -> 0.416 ms, 10 0.579 ->
    # 0.392; with pointer loads and two programs per SM 0.67 ms on 09). The same boxes lost on the 1-D task
    # 27 (0.235 -> 0.270 ms) and, 128 columns wide over a 96-column output, on 20 (0.449 -> 0.477): 1-D
    # keeps pointer tiles, 3-D (not measured) reaches boxes by a small step.
    boxed = half and design == "implicit_gemm" and spec is not None and spec.ndim == 2 and not spec.transposed
    layouts = ["nchw", "nhwc"]
    if design == "direct":
        layouts = ["nchw"]  # each step loads one channel's pixels: contiguous along the output row in NCHW
    elif design == "implicit_gemm":
        # nhwc: 16-byte channel loads, fewer registers than the transposed nchw tile, and a K-major A
        # tile (with the K-major packed weight, both dot operands K-major, as TF32 wgmma wants)
        layouts = ["nhwc", "nchw"]
    recompute = [False, True] if has_norm else [False]
    out: list[ConvConfig] = []
    for i, rec in enumerate(recompute):
        for dot in dots[:1] if half or design in ("direct_depthwise", "direct") else dots:  # no dot in direct
            for layout in layouts:
                space = tiles_for(dot, layout)
                # the direct design's space is small: every tile both ways (flat tiles stay measurable)
                for m, n, k, w, s, bw in space if i == 0 or design == "direct_depthwise" else space[:2]:
                    out.append(
                        ConvConfig(
                            BLOCK_M=m,
                            BLOCK_N=n,
                            BLOCK_K=k,
                            BLOCK_W=bw,
                            num_warps=w,
                            num_stages=s,
                            LAYOUT=layout,  # type: ignore[arg-type]
                            DOT=dot,  # type: ignore[arg-type]
                            RECOMPUTE=rec,
                            X_TMA=boxed and layout == "nhwc",
                            PERSIST=2 if boxed and layout == "nhwc" else 0,
                            INTERIOR=bw > 0 and not (has_norm and (m, bw, w) == _DIRECT_PLANE_TILES[0]),
                        )
                    )
    return out


def default_conv_config(
    design: str, plan: ConvPlan | None = None, precision: Precision = "strict"
) -> ConvConfig:
    return conv_configs(design, plan, precision)[0]


def conv_neighbours(design: str, config: ConvConfig, precision: Precision = "strict") -> list[ConvConfig]:
    """Configs one knob away from `config` (a small step): tiles x2 / /2, warps, stages, grouping,
    layout, recompute, persistent tiles, input boxes through a descriptor (X_TMA, nhwc implicit GEMMs), and
    the dot precision where `precision` allows another."""
    if design not in DESIGNS:
        raise ValueError(f"unknown conv design {design!r}")
    direct = design == "direct_depthwise"
    dense = design == "direct"  # one stage, nchw, no dot: only its tile, warps, grouping and recompute move
    lo = 1 if direct else 16
    c = config.model_dump()
    out: list[ConvConfig] = []

    def add(**change: Any) -> None:
        cand = dict(c, **change)
        for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
            # a direct tile holds one value per pixel and channel: up to 4096 pixels
            if not lo <= cand[key] <= (4096 if direct and key == "BLOCK_M" else 256):
                return
        if cand["BLOCK_M"] * cand["BLOCK_N"] > (4096 if direct else 256 * 128):
            return
        if cand["BLOCK_W"] and (not direct or cand["LAYOUT"] != "nchw" or cand["BLOCK_N"] != 1):
            return  # plane tiles: direct, nchw, one channel
        if direct and cand["BLOCK_W"] not in (0, 16, 32, 64, 128, 256, 512):
            return
        new = ConvConfig(**cand)
        if new != config and new not in out:
            out.append(new)

    for key in ("BLOCK_M", "BLOCK_N") + (() if direct or dense else ("BLOCK_K",)):
        add(**{key: c[key] * 2})
        add(**{key: c[key] // 2})
    if direct and c["BLOCK_W"]:
        add(BLOCK_W=c["BLOCK_W"] * 2)
        add(BLOCK_W=c["BLOCK_W"] // 2)
        add(INTERIOR=not c["INTERIOR"])
        add(BLOCK_W=0, BLOCK_M=256, BLOCK_N=4)  # back to the flat tiles
    elif direct and c["LAYOUT"] == "nchw":
        add(BLOCK_W=128, BLOCK_M=1024, BLOCK_N=1, INTERIOR=True)
    add(num_warps=8 if c["num_warps"] == 4 else 4)
    if not (direct or dense):
        add(num_stages=c["num_stages"] + 1)
        if c["num_stages"] > 2:
            add(num_stages=c["num_stages"] - 1)
    if not (direct and c["BLOCK_W"]):
        # plane tiles map programs to (tile, channel, sample) directly: GROUP_M is never read there (on an
        # H200 published/32 timed 1.4195 and 1.4196 ms with GROUP_M 8 and 1, a candidate spent on nothing)
        add(GROUP_M=1 if c["GROUP_M"] != 1 else 8)
    if not dense:
        add(LAYOUT="nhwc" if c["LAYOUT"] == "nchw" else "nchw", **({"BLOCK_W": 0} if direct else {}))
    add(RECOMPUTE=not c["RECOMPUTE"])
    if not (direct or dense):
        # two programs per SM walking the tiles: 0.230 against 0.293 ms on level2_bf16/27 (a 1-D convolution,
        # five K steps), slower on the 2-D bf16 tasks (0.67 against 0.59 ms on 09); one per SM was slower
        # everywhere (a 4-warp program alone on an SM)
        add(PERSIST=2 if not c["PERSIST"] else 0)
    if design == "implicit_gemm" and c["LAYOUT"] == "nhwc":
        add(X_TMA=not c["X_TMA"])
    for dot in _dots(precision) if not (direct or dense) else ():
        add(DOT=dot)
    return out


def emit_conv_program(
    plan: ConvPlan,
    source: str,
    *,
    design: str | None = None,
    config: ConvConfig | None = None,
    precision: Precision = "strict",
) -> str:
    """A complete candidate module for the task whose `Model` gave `plan`.

    `source` is the task file's text (ModelNew copies Model.__init__ and the forward signature from it).
    `design` defaults to conv_designs(plan)[0], `config` to that design's default config. Raises
    ConvEmitError (a ValueError) when the design cannot write this plan.
    """
    design = design or conv_designs(plan)[0]
    if design not in conv_designs(plan):
        raise ConvEmitError(f"design {design} does not apply to this convolution")
    config = config or default_conv_config(design, plan, precision)
    _dots(precision)
    return emit(plan, source, design, config, precision)


def parse_conv_header(text: str) -> tuple[str, ConvConfig] | None:
    """(design, config) from a program's `# kernelwright: family=conv ...` line, or None."""
    header = KernelHeader.parse(text)
    if header is None or header.family != "conv":
        return None
    values: dict[str, Any] = {}
    for key, value in header.config.items():
        values[key] = int(value) if value.lstrip("-").isdigit() else value
    try:
        return header.design, ConvConfig(**values)
    except Exception:
        return None


def analyze_conv_task(source: str, name: str = "task") -> ConvAnalysis:
    """Analyse a task file's source: the plan from its small inputs, sizes from its full ones.

    The task's own code runs here (reference code, as task loading does); the forward runs once on the
    small CPU inputs, and the full-size model is built on the meta device only for its sizes. A task
    without small inputs is analysed on the meta device alone: its full-size inputs (gigabytes, for
    some) are never made in this process.
    """
    from kernelwright.tasks import TaskError, exec_task_module, has_small_inputs, task_inputs, task_model

    try:
        module = exec_task_module(source, name)
        small = has_small_inputs(module)
        device = "cpu" if small else "meta"
        with torch.random.fork_rng(devices=[]), torch.device(device):
            inputs = task_inputs(module, small=small, seed=0, device=device)
            model = task_model(module, small=small, seed=0, device=device)
    except TaskError as exc:
        return ConvAnalysis(plan=None, reason=f"the task does not load: {exc}")
    analysis = explain_conv_model(model, inputs)
    if analysis.plan is None:
        return analysis
    full = _full_spec(module)
    if full is not None:
        analysis.plan.full_spec = full
    return analysis


def _full_spec(module: Any) -> ConvSpec | None:
    """The convolution's sizes at the task's full size, from a model built on the meta device."""
    from kernelwright.tasks import task_inputs, task_model

    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            inputs = task_inputs(module, small=False, seed=None, device="meta")
            model = task_model(module, small=False, seed=None, device="meta")
            plan = analyze_conv_model(model, inputs)
    except Exception:
        return None
    return plan.spec if plan is not None else None


def write_conv_program(
    source: str,
    *,
    design: str | None = None,
    config: ConvConfig | None = None,
    precision: Precision = "strict",
    name: str = "task",
) -> str | None:
    """Analyse the task and write its Triton convolution program; None when it is not supported."""
    analysis = analyze_conv_task(source, name)
    if analysis.plan is None:
        return None
    return emit_conv_program(analysis.plan, source, design=design, config=config, precision=precision)
