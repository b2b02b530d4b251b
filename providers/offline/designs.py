"""The design space: for each family of kernel, its designs, their configuration spaces and defaults.

A *design* is a way to write a kernel (whole row in registers vs a looped two-pass vs an online pass;
grouped vs split-K vs persistent matmul; ...). Its *config* is a point in the design's space of block
sizes, warps, stages, swizzle and precision. Designs are registered per family in `REGISTRY`; a family
whose designs do not apply to a kernel (today: "conv", whose only design keeps the torch op) is skipped
when choosing. Writing convolutions in Triton plugs in here: register "implicit_gemm"-style designs for
the "conv" family with their own `kind` and generator.

Defaults aim at Hopper-class GPUs (H100/H200): memory-bound kernels use large tiles and 4-16 warps,
one program per row when the row fits in registers and several rows per program when rows are short;
reductions over a middle dim tile over the contiguous inner dim; global reductions split the row over
many programs.

fp32 matmuls: under strict precision a large product (M*N*K >= 2^30) starts from split-precision
tensor-core dots (PREC=tf32x3: three TF32 MMAs, fp32-level accuracy) with both operands made K-major
(KMAJOR=1) and BLOCK_K=32, which Hopper's TF32 MMAs need; split_k keeps strict IEEE dots by default
so the search also measures the CUDA-core path. Small products use IEEE dots. With TF32 allowed,
PREC=tf32 (one TF32 MMA) with K-major operands. Two products sharing A whose results meet in one
pointwise chain can be one dual kernel (designs "dual" and "dual_persistent"); the policy decides per
program whether to fuse them (`policy.fuse_allowed`: the root starts unfused).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelwright.providers.offline.emit import ExprContext
from kernelwright.providers.offline.emit_matmul import MatmulConfig
from kernelwright.providers.offline.emit_pointwise import PointwiseConfig
from kernelwright.providers.offline.emit_rows import RowConfig, RowKernelGen, registers_rows_launch
from kernelwright.providers.offline.emit_rows import next_pow2 as _next_pow2
from kernelwright.providers.offline.schedule import Kernel, Schedule

HOPPER_SMS = 132


@dataclass
class KernelInfo:
    """What a design choice looks at: the kernel's kind and the sizes seen while tracing."""

    kernel: Kernel
    kind: str  # rows | matmul | pointwise
    family: str
    layout: str = ""  # rows | cols (row kernels)
    NK: int = 1
    NR: int = 1
    NI: int = 1
    split_ok: bool = False
    merges: bool = False
    has_scan: bool = False
    M: int = 1
    N: int = 1
    K: int = 1
    NB: int = 1
    numel: int = 1
    fp32_dot: bool = True
    itemsize: int = 4
    dual: bool = False
    """A dual matmul kernel (several products sharing A, one epilogue): see emit_matmul.DualKernel."""
    b_kmajor: bool = False
    """B was K-contiguous while tracing (nn.Linear's W.T): KMAJOR costs no copy."""

    @property
    def cost(self) -> float:
        """A rough work estimate: which kernel of a program is its main one."""
        if self.kind == "matmul":
            return 2.0 * self.M * self.N * self.K * self.NB * (2 if self.dual else 1) / 50.0
        if self.kind == "rows":
            return float(self.NK * self.NR) * 1.5
        return float(self.numel)


@dataclass(frozen=True)
class Design:
    name: str
    family: str
    kind: str
    mode: str
    space: dict[str, tuple[Any, ...]]
    applies: Callable[[KernelInfo], bool] = field(default=lambda info: True, compare=False)
    about: str = ""


def _rows_space(layout: str, mode: str) -> dict[str, tuple[Any, ...]]:
    if mode == "registers":
        if layout == "cols":
            return {
                "BLOCK_I": (16, 32, 64, 128, 256),
                "TILE": (2048, 4096, 8192, 16384),
                "num_warps": (0, 4, 8, 16),
            }
        return {
            "TILE": (1024, 2048, 4096, 8192, 16384),
            "RMAX": (4096, 8192, 16384, 32768),
            # 32 warps: a long row in fewer registers per thread (more rows resident per SM)
            "num_warps": (0, 4, 8, 16, 32),
            "PERSIST": (0, 1, 2, 4, 8),
            "PRELOAD": (0, 1),
            "STATIC": (0, 1),
        }
    if mode == "split":
        if layout == "cols":
            return {"BLOCK_R": (8, 16, 32, 64, 128), "BLOCK_I": (16, 32, 64, 128, 256), "WAVES": (1, 2, 4, 8),
                    "num_warps": (2, 4, 8, 16)}  # fmt: skip
        return {"BLOCK_R": (1024, 2048, 4096, 8192), "WAVES": (1, 2, 4, 8), "num_warps": (4, 8, 16)}
    if layout == "cols":
        return {
            "BLOCK_R": (8, 16, 32, 64, 128),
            "BLOCK_I": (16, 32, 64, 128, 256),
            "num_warps": (2, 4, 8, 16),
            "EVICT": (0, 1),
        }
    return {
        "BLOCK_R": (256, 512, 1024, 2048, 4096, 8192),
        "BLOCK_M": (1, 2, 4, 8),
        "num_warps": (2, 4, 8, 16),
        "EVICT": (0, 1),
        "STATIC": (0, 1),
    }


PREFETCH_DESIGN = "row_prefetch"
PREFETCH_ABOUT = (
    "one program per SM walks the rows, fetching the next row while it reduces and writes this one"
)
_ROW_DESIGNS = {
    # family: [(design name, mode, about)]
    "reduction": [("row_registers", "registers", "whole row in registers, one load"),
                  (PREFETCH_DESIGN, "registers", PREFETCH_ABOUT),
                  ("looped", "looped", "loop over the row in chunks, tile accumulators"),
                  ("split", "split", "rows split over many programs, partials combined by a second kernel"),
                  ("online", "online", "dependent statistics merged into one pass")],
    # For softmax and norms two_pass comes second: on an H200 it was the fastest design for most of them.
    "softmax": [("row_registers", "registers", "whole row in registers: max, exp, sum from one load"),
                ("two_pass", "looped", "a pass for the max, a pass for the sum, a pass to write"),
                (PREFETCH_DESIGN, "registers", PREFETCH_ABOUT),
                ("online", "online", "online softmax: running max and rescaled sum in one pass, then write"),
                ("split", "split", "few long rows: statistics from many programs' partials, then a parallel write")],
    "norm": [("row_registers", "registers", "whole row in registers: mean and variance from one load"),
             ("two_pass", "looped", "a pass for the mean, a pass for the variance, a pass to write"),
             (PREFETCH_DESIGN, "registers", PREFETCH_ABOUT),
             ("welford", "online", "one pass of Welford per lane, lanes merged at the end (Chan), then write"),
             ("split", "split", "few long rows (batch norm): statistics from many programs, then a parallel write")],
    "loss": [("row_registers", "registers", "whole row in registers"),
             (PREFETCH_DESIGN, "registers", PREFETCH_ABOUT),
             ("split", "split", "row split over many programs, partials combined by a second kernel"),
             ("looped", "looped", "loop over the row in chunks"),
             ("online", "online", "dependent statistics merged into one pass")],
    "scan": [("single_block", "registers", "whole row in registers, one tl.cumsum"),
             ("blocked", "looped", "chunks scanned in order with a running carry")],
}  # fmt: skip


def _row_applies(mode: str, name: str = "") -> Callable[[KernelInfo], bool]:
    def applies(info: KernelInfo) -> bool:
        if info.kind != "rows":
            return False
        if name == PREFETCH_DESIGN:
            return info.layout == "rows"  # persistent programs walk rows of the last dim only
        if mode == "split":
            return info.split_ok
        if mode == "online":
            return info.merges
        return True

    return applies


def _build_registry() -> dict[str, list[Design]]:
    reg: dict[str, list[Design]] = {}
    for fam, designs in _ROW_DESIGNS.items():
        reg[fam] = [
            Design(n, fam, "rows", mode, {}, _row_applies(mode, n), about) for n, mode, about in designs
        ]
    reg["pointwise"] = [
        Design("flat", "pointwise", "pointwise", "flat",
               {"BLOCK": (512, 1024, 2048, 4096, 8192), "num_warps": (2, 4, 8, 16)},
               lambda i: i.kind == "pointwise", "one block of elements per program"),
        Design("grid_stride", "pointwise", "pointwise", "grid_stride",
               {"BLOCK": (512, 1024, 2048, 4096, 8192), "num_warps": (2, 4, 8, 16), "WAVES": (2, 4, 8, 16)},
               lambda i: i.kind == "pointwise", "a few programs per SM, each walking many blocks"),
    ]  # fmt: skip
    mm_space = {"BLOCK_M": (32, 64, 128, 256), "BLOCK_N": (32, 64, 128, 256), "BLOCK_K": (16, 32, 64, 128),
                "GROUP_M": (1, 4, 8, 16), "num_warps": (2, 4, 8, 16), "num_stages": (2, 3, 4, 5),
                "PREC": ("ieee", "tf32x3", "tf32"), "KMAJOR": (0, 1)}  # fmt: skip

    def single(i: KernelInfo) -> bool:
        return i.kind == "matmul" and not i.dual

    def dual(i: KernelInfo) -> bool:
        return i.kind == "matmul" and i.dual

    reg["matmul"] = [
        Design("grouped", "matmul", "matmul", "grouped", mm_space, single,
               "one program per tile, GROUP_M band ordering"),
        Design("split_k", "matmul", "matmul", "split_k", {**mm_space, "SPLIT_K": (2, 4, 8, 16)},
               single, "K split over programs, partials reduced with the epilogue"),
        Design("persistent", "matmul", "matmul", "persistent", mm_space, single,
               "one program per SM walking the tiles"),
        Design("dual", "matmul", "matmul", "grouped", mm_space, dual,
               "two products sharing A in one kernel: A loaded once, two accumulators, one fused store"),
        Design("dual_persistent", "matmul", "matmul", "persistent", mm_space, dual,
               "the dual kernel with one program per SM walking the tiles"),
    ]  # fmt: skip
    # Convolutions are kept as torch ops today: the family is registered so that Triton designs
    # (implicit GEMM, direct) can be added here with their own generator.
    reg["conv"] = [Design("torch", "conv", "conv", "torch", {}, lambda i: False, "cuDNN through torch")]
    return reg


REGISTRY: dict[str, list[Design]] = _build_registry()
DESIGN_NAMES: set[str] = {d.name for ds in REGISTRY.values() for d in ds}


def designs_for(info: KernelInfo) -> list[Design]:
    return [d for d in REGISTRY.get(info.family, []) if d.applies(info)]


def find_design(family: str, name: str) -> Design | None:
    return next((d for d in REGISTRY.get(family, []) if d.name == name), None)


# ---- kernel facts ----------------------------------------------------------------------------------


def kernel_info(sched: Schedule, k: Kernel) -> KernelInfo:
    g = sched.graph
    info = KernelInfo(k, k.kind, k.family)
    if k.kind == "rows":
        gen = RowKernelGen(sched, k, RowConfig(), ExprContext())
        groups = gen.groups

        def size(gis: list[int]) -> int:
            n = 1
            for gi in gis:
                for d in groups[gi][1]:
                    n *= g.hint(k.space[d])
            return n

        info.layout = gen.layout
        info.NK, info.NR, info.NI = size(gen.kept), size(gen.red), size(gen.inner)
        info.split_ok = gen.split_ok()
        info.merges = bool(gen.merges())
        info.has_scan = bool(gen.scans)
        info.itemsize = max((ld.value.dtype.itemsize for ld in gen.loads.values()), default=4)
    elif k.kind == "matmul":
        a, b = k.anchor.args  # type: ignore[union-attr]
        shape = g.hints(k.space)
        info.M, info.N, info.K = shape[-2], shape[-1], g.hint(a.shape[-1])
        info.NB = 1
        for d in shape[:-2]:
            info.NB *= d
        info.fp32_dot = a.dtype.itemsize == 4 and b.dtype.itemsize == 4
        info.itemsize = a.dtype.itemsize
        info.dual = bool(getattr(k, "extra_anchors", None))
        info.b_kmajor = _kmajor_view(b)
    else:
        info.numel = g.numel_hint(k.space)
    return info


def _kmajor_view(b: Any) -> bool:
    """B is a transposed view of its last two dims (x @ W.T): K-contiguous when the source is contiguous."""
    if b.kind != "view" or b.op != "permute":
        return False
    dims = list(b.attrs.get("dims", ()))
    n = len(dims)
    return n >= 2 and dims[-2:] == [n - 1, n - 2]


# ---- defaults --------------------------------------------------------------------------------------


def default_design(info: KernelInfo) -> Design:
    ds = designs_for(info)
    if not ds:
        raise ValueError(f"no design for a {info.kind} kernel of family {info.family}")
    by_mode: dict[str, Design] = {}
    for d in ds:
        by_mode.setdefault(d.mode, d)  # the first design of a mode is its default (row_registers)
    if info.kind == "rows":
        np2 = _next_pow2(max(info.NR, 1))
        # Few long rows leave most SMs idle with one program per row: split each row over programs.
        if "split" in by_mode and info.NK < 4 * HOPPER_SMS and info.NR >= 65536:
            return by_mode["split"]
        if info.layout == "cols":
            programs = (info.NK // max(info.NI, 1)) * -(-info.NI // 16)
            if "split" in by_mode and programs < 2 * HOPPER_SMS and info.NR >= 16384:
                return by_mode["split"]
            if np2 * 64 <= 16384:
                return by_mode["registers"]
            return by_mode.get("online", by_mode["looped"])
        if np2 * info.itemsize <= 16384 * 4:
            return by_mode["registers"]
        return by_mode.get("online", by_mode["looped"])
    if info.kind == "matmul":
        if (
            "split_k" in by_mode
            and info.M * info.N * info.NB <= 128 * 128 * 16
            and info.K >= 4 * max(info.M, info.N)
        ):
            return by_mode["split_k"]
        return by_mode["grouped"]
    return by_mode["flat"]


def default_config(design: Design, info: KernelInfo, tf32: bool = False) -> dict[str, Any]:
    """Hopper defaults for a design on a kernel."""
    if design.kind == "rows":
        if info.layout == "cols":
            # Enough (outer, inner-block) programs to fill the GPU, with coalesced inner tiles.
            bi = 128
            while bi > 16 and (info.NK // max(info.NI, 1)) * -(-info.NI // bi) < 2 * HOPPER_SMS:
                bi //= 2
            bi = min(bi, _next_pow2(max(info.NI, 1)))
            if design.mode == "registers":
                return {"BLOCK_I": bi, "TILE": 8192, "num_warps": 0}
            if design.mode == "split":
                return {"BLOCK_R": max(8, min(128, 4096 // bi)), "BLOCK_I": bi, "WAVES": 4, "num_warps": 8}
            return {"BLOCK_R": max(8, min(128, 4096 // bi)), "BLOCK_I": bi, "num_warps": 8, "EVICT": 1}
        if design.mode == "registers":
            cfg: dict[str, Any] = {"TILE": 4096, "RMAX": 16384, "num_warps": 0}
            if _next_pow2(max(info.NR, 1)) <= 8192:
                # Weights loaded with the row, not after the statistics: on an H200 (rows of 8192) RMSnorm
                # + SiLU*gate went 0.207 -> 0.191 ms, layer norm 0.136 -> 0.133; a no-op with one load.
                # Longer rows would hold twice the registers per thread and lose occupancy: not measured.
                cfg["PRELOAD"] = 1
            if design.name == PREFETCH_DESIGN:
                # On an H200, layer norm + GELU over rows of 8192 with libdevice's erf: 0.294 ms this way
                # against 0.313 for one program per row (torch.compile 0.291). With the cheaper _kw_gelu
                # the kernel is no longer compute-bound and one program per row wins (0.265 against 0.281).
                # 32 warps keep the two rows' registers per thread low.
                cfg.update({"num_warps": 32, "PERSIST": 1, "STATIC": 1})
            return cfg
        if design.mode == "split":
            return {"BLOCK_R": 4096, "WAVES": 4, "num_warps": 8}
        looped: dict[str, Any] = {"BLOCK_R": 4096, "BLOCK_M": 1, "num_warps": 8, "EVICT": 1}
        if _next_pow2(max(info.NR, 1)) >= 8192 and info.family != "scan":
            # Long rows: 16 warps and sizes compiled in (the loops unroll). On an H200 (rows of 8192),
            # two_pass went from 8 warps to this: layer norm+GELU 0.299 -> 0.258 ms, layer norm 0.157 ->
            # 0.138, RMS norm 0.143 -> 0.133, L2 norm 0.138 -> 0.131, softmax 0.204 -> 0.153; welford
            # 0.39-0.48 -> 0.36; a looped sum over rows of 16384 0.0745 -> 0.0727 (2048-wide chunks).
            looped.update({"num_warps": 16, "STATIC": 1})
        return looped
    if design.kind == "matmul":
        return _matmul_default(design, info, tf32)
    if design.mode == "grid_stride":
        return {"BLOCK": 2048, "num_warps": 8, "WAVES": 8}
    # Small blocks (8 elements a thread): many short programs keep the last wave's tail short; on an H200
    # BLOCK=4096 with 8 warps ran elementwise ops at 94-96% of the copy bandwidth, torch.compile's
    # 1024-element blocks at 98%.
    return {"BLOCK": 1024, "num_warps": 4}


BIG_MATMUL = 1 << 30
"""M*N*K (times the batch) from which a strict fp32 product starts on tensor cores (PREC=tf32x3)."""


def _matmul_default(design: Design, info: KernelInfo, tf32: bool) -> dict[str, Any]:
    cfg: dict[str, Any] = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 8,
                           "num_stages": 3}  # fmt: skip
    if not info.fp32_dot:
        cfg.update({"BLOCK_N": 256, "BLOCK_K": 64})
        if design.mode == "split_k":
            cfg.update({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 8, "num_warps": 4})
        return cfg
    big = info.M * info.N * info.K * info.NB >= BIG_MATMUL
    if tf32:
        prec = "tf32"
    elif big and (design.mode != "split_k" or info.dual):
        prec = "tf32x3"
    else:
        prec = "ieee"
    cfg["PREC"] = prec
    # TF32 MMAs want both operands K-major; IEEE dots run on CUDA cores and do not care.
    cfg["KMAJOR"] = 0 if prec == "ieee" else 1
    if prec == "ieee":
        cfg["BLOCK_K"] = 16
    if info.dual:
        # Two accumulators: a smaller tile keeps them (and tf32x3's split operands) in registers. On an
        # H200 (SwiGLU, strict) 64x64x32 with 4 warps and 4 stages ran 7.45 ms, 128x64x32 with 8 warps 7.71.
        cfg.update({"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 4})
    if design.mode == "split_k":
        cfg.update({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 8, "num_warps": 4})
    return cfg


def launch_effect(design: Design, info: KernelInfo, values: dict[str, Any]) -> tuple[Any, ...] | None:
    """What a whole-row-in-registers config launches with on this kernel's (traced) sizes, mirroring
    the launcher emit_rows writes; None where this is not modelled. Two configs with the same effect
    run the same kernel (e.g. TILE below the row length changes nothing), so a small step between them
    would spend a candidate on a program already measured."""
    if design.kind != "rows" or design.mode != "registers" or info.layout != "rows":
        return None
    cfg = make_config(design, values)
    assert isinstance(cfg, RowConfig)
    return (
        *registers_rows_launch(cfg, info.NK, info.NR),
        cfg.PERSIST,
        cfg.PRELOAD,
        cfg.STATIC,
        cfg.num_stages,
    )


def make_config(design: Design, values: dict[str, Any]) -> RowConfig | MatmulConfig | PointwiseConfig:
    if design.kind == "rows":
        cfg: Any = RowConfig(mode=design.mode)
    elif design.kind == "matmul":
        cfg = MatmulConfig(mode=design.mode)
    else:
        cfg = PointwiseConfig(mode=design.mode)
    for k, v in values.items():
        if hasattr(cfg, k):
            setattr(cfg, k, v)
    return cfg


def config_space(design: Design, info: KernelInfo, tf32: bool = False) -> dict[str, tuple[Any, ...]]:
    """The values each config key may take for this design on this kernel."""
    if design.kind == "rows":
        space = dict(_rows_space(info.layout, design.mode))
    else:
        space = dict(design.space)
    if "PREC" in space:
        space["PREC"] = ("ieee", "tf32x3", "tf32") if tf32 else ("ieee", "tf32x3")
        if not info.fp32_dot:
            space.pop("PREC")
            space.pop("KMAJOR", None)
    return space
