"""Row kernels (reductions, softmax, norms, losses, scans) as a kernel kind: facts, designs, defaults.

The facts come from `RowPlan` (row_plan.py) without building a generator; the code from `RowKernelGen`
(emit_rows.py). Defaults aim at Hopper-class GPUs: one program per row when the row fits in registers
and several rows per program when rows are short; reductions over a middle dim tile over the
contiguous inner dim; few long rows (global reductions) are split over many programs, "few" measured
against the target's SM count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.emit.emit_rows import RowKernelGen
from kernelwright.providers.offline.kinds.kind import Design, KernelInfo, KernelKind, make_config
from kernelwright.providers.offline.kinds.row_plan import RowConfig, RowPlan, next_pow2, registers_rows_launch


@dataclass
class RowsInfo(KernelInfo):
    """A row kernel's facts: its layout, the sizes of its kept (NK), reduced (NR) and inner (NI) dims, and
    which designs its statistics allow."""

    layout: str = ""  # rows | cols
    NK: int = 1
    NR: int = 1
    NI: int = 1
    split_ok: bool = False
    merges: bool = False  # an online pass can merge dependent statistics (softmax's, Welford's)
    welford: bool = False  # a variance around a mean: the split design computes both in one pass
    has_scan: bool = False
    itemsize: int = 4


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
                    "num_warps": (2, 4, 8, 16), "MERGE": (0, 1), "WRITE_CHUNKS": (0, 1, 4)}  # fmt: skip
        return {"BLOCK_R": (1024, 2048, 4096, 8192), "WAVES": (1, 2, 4, 8), "num_warps": (4, 8, 16),
                "MERGE": (0, 1), "WRITE_CHUNKS": (0, 1, 4)}  # fmt: skip
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


def _row_applies(mode: str, name: str = "") -> Callable[[RowsInfo], bool]:
    def applies(info: RowsInfo) -> bool:
        if name == PREFETCH_DESIGN:
            return info.layout == "rows"  # persistent programs walk rows of the last dim only
        if mode == "split":
            return info.split_ok
        if mode == "online":
            return info.merges
        return True

    return applies


def designs() -> dict[str, list[Design]]:
    return {
        fam: [Design(n, fam, "rows", mode, {}, _row_applies(mode, n), about) for n, mode, about in ds]
        for fam, ds in _ROW_DESIGNS.items()
    }


def facts(sched: Schedule, k: Kernel, info: RowsInfo) -> None:
    g = sched.graph
    plan = RowPlan(sched, k)
    groups = plan.groups

    def size(gis: list[int]) -> int:
        n = 1
        for gi in gis:
            for d in groups[gi][1]:
                n *= g.hint(k.space[d])
        return n

    info.layout = plan.layout
    info.NK, info.NR, info.NI = size(plan.kept), size(plan.red), size(plan.inner)
    info.split_ok = plan.split_ok()
    merges = plan.merges()
    info.merges = bool(merges)
    info.welford = any(kind == "welford" for kind, _, _ in merges.values())
    info.has_scan = bool(plan.scans)
    info.itemsize = max((ld.value.dtype.itemsize for ld in plan.loads.values()), default=4)


def cost(info: RowsInfo) -> float:
    return float(info.NK * info.NR) * 1.5


def default_design(info: RowsInfo, by_mode: dict[str, Design]) -> Design:
    sms = info.sm_count
    np2 = next_pow2(max(info.NR, 1))
    # Few long rows leave most SMs idle with one program per row: split each row over programs.
    if "split" in by_mode and info.NK < 4 * sms and info.NR >= 65536:
        return by_mode["split"]
    if info.layout == "cols":
        programs = (info.NK // max(info.NI, 1)) * -(-info.NI // 16)
        if "split" in by_mode and programs < 2 * sms and info.NR >= 16384:
            return by_mode["split"]
        if np2 * 64 <= 16384:
            return by_mode["registers"]
        return by_mode.get("online", by_mode["looped"])
    if np2 * info.itemsize <= 16384 * 4:
        return by_mode["registers"]
    return by_mode.get("online", by_mode["looped"])


def default_config(design: Design, info: RowsInfo, tf32: bool = False) -> dict[str, Any]:
    if info.layout == "cols":
        # Enough (outer, inner-block) programs to fill the GPU, with coalesced inner tiles.
        bi = 128
        while bi > 16 and (info.NK // max(info.NI, 1)) * -(-info.NI // bi) < 2 * info.sm_count:
            bi //= 2
        bi = min(bi, next_pow2(max(info.NI, 1)))
        if design.mode == "registers":
            return {"BLOCK_I": bi, "TILE": 8192, "num_warps": 0}
        if design.mode == "split":
            return {"BLOCK_R": max(8, min(128, 4096 // bi)), "BLOCK_I": bi, "WAVES": 4, "num_warps": 8}
        return {"BLOCK_R": max(8, min(128, 4096 // bi)), "BLOCK_I": bi, "num_warps": 8, "EVICT": 1}
    if design.mode == "registers":
        cfg: dict[str, Any] = {"TILE": 4096, "RMAX": 16384, "num_warps": 0}
        if next_pow2(max(info.NR, 1)) <= 8192 and info.itemsize >= 4:
            # Weights loaded with the row, not after the statistics: on an H200 (rows of 8192) RMSnorm
            # + SiLU*gate went 0.207 -> 0.191 ms, layer norm 0.136 -> 0.133; a no-op with one load.
            # Longer rows would hold twice the registers per thread and lose occupancy: not measured.
            # In bf16 the same task went the other way (design_sweep, twenty-fourth session: 0.104 ms
            # without, 0.119 with; torch.compile 0.107): half-precision rows keep the default load order.
            cfg["PRELOAD"] = 1
        if info.family == "norm":
            # A row past 8192 that is mostly padding in registers (under three quarters of its power of two) takes
            # the looped fallback, run as the two_pass design runs its loops: 4096-wide chunks, 16 warps, the row
            # kept in L2 for its second and third reads (EVICT). On an H100 (the first program at its traced size
            # run at wider rows; ms): layer norm at 10240 x 10240 0.367 in registers padded to 16384 -> 0.336
            # (two_pass 0.313), layer norm + GELU at 20480 x 10240 0.761 -> 0.627 (0.591), RMS norm at 10240^2
            # 0.348 -> 0.325 (0.313). Rows of 12288 and 16384 stay in registers: 0.333 and 0.216 there, 0.343 and
            # 0.281 this way. The fallback with its sizes compiled in (STATIC) ran 0.311-0.313 at 10240: not
            # taken, since STATIC compiles the single load once per row length too (not measured at traced sizes).
            cfg.update({"RFULL": 8192, "BLOCK_R": 4096, "EVICT": 1, "FALLBACK_WARPS": 16})
        if info.family == "softmax" and "PRELOAD" not in cfg:
            # Rows past RMAX take the looped fallback (three passes over the row). On an H200 at 5120 x
            # 20480 (softmax searched at 4096 x 16384, judged at an unseen size): 0.478 ms looped, 0.340
            # in registers with RMAX 32768 (eager 0.270; the online design 0.314). Norms, and rows given
            # PRELOAD (fp32 rows traced at 8192 or less), keep 16384: not measured at 32768.
            cfg["RMAX"] = 32768
        if design.name == PREFETCH_DESIGN:
            # On an H200, layer norm + GELU over rows of 8192 with libdevice's erf: 0.294 ms this way
            # against 0.313 for one program per row (torch.compile 0.291). With the cheaper _kw_gelu
            # the kernel is no longer compute-bound and one program per row wins (0.265 against 0.281).
            # 32 warps keep the two rows' registers per thread low.
            cfg.update({"num_warps": 32, "PERSIST": 1, "STATIC": 1})
        return cfg
    if design.mode == "split":
        # Few rows (fewer than 4 per SM): the write pass in one-chunk programs of its own, not a few
        # hundred programs walking long stretches. On an H200: batch norm 64x64x512^2 write pass 2259 ->
        # 2161 us, layer norm 16 x 4M 0.513 -> 0.376 ms; with 7168 rows (instance norm) it was slower.
        write = {"WRITE_CHUNKS": 1} if info.NK < 4 * info.sm_count else {}
        if info.welford:
            # Welford partials hold three accumulators per element: at 4096 x 8 warps the partials kernel
            # took 79 registers (3 programs per SM, so the 4-per-SM grid ran in two waves); at 2048, 40.
            # On an H200, batch norm 64x64x512^2: partials 1620 -> 1028 us, the program 4.00 -> 3.47 ms.
            return {"BLOCK_R": 2048, "WAVES": 4, "num_warps": 8, **write}
        return {"BLOCK_R": 4096, "WAVES": 4, "num_warps": 8, **write}
    looped: dict[str, Any] = {"BLOCK_R": 4096, "BLOCK_M": 1, "num_warps": 8, "EVICT": 1}
    if next_pow2(max(info.NR, 1)) >= 8192 and info.family != "scan":
        # Long rows: 16 warps and sizes compiled in (the loops unroll). On an H200 (rows of 8192),
        # two_pass went from 8 warps to this: layer norm+GELU 0.299 -> 0.258 ms, layer norm 0.157 ->
        # 0.138, RMS norm 0.143 -> 0.133, L2 norm 0.138 -> 0.131, softmax 0.204 -> 0.153; welford
        # 0.39-0.48 -> 0.36; a looped sum over rows of 16384 0.0745 -> 0.0727 (2048-wide chunks).
        looped.update({"num_warps": 16, "STATIC": 1})
    return looped


def config_space(design: Design, info: RowsInfo, tf32: bool = False) -> dict[str, tuple[Any, ...]]:
    return dict(_rows_space(info.layout, design.mode))


def launch_effect(design: Design, info: RowsInfo, values: dict[str, Any]) -> tuple[Any, ...] | None:
    """A whole-row-in-registers config over rows: (single, BLOCK_R, BLOCK_M, num_warps) on the traced
    sizes and the keys that change the code; None for the other designs and layouts."""
    if design.mode != "registers" or info.layout != "rows":
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


ROWS = KernelKind(
    info=RowsInfo,
    name="rows",
    config=RowConfig,
    designs=designs,
    facts=facts,
    cost=cost,
    default_design=default_design,
    default_config=default_config,
    config_space=config_space,
    generator=RowKernelGen,
    simplest_mode="registers",
    launch_effect=launch_effect,
    # The write grid of a split follows from the row count (few rows: one chunk per program); on an
    # H200 instance norm (7168 rows) started from batch norm's (64 rows) WRITE_CHUNKS=1 ran 6.10 ms
    # where its own default runs 5.52.
    task_derived=("WRITE_CHUNKS",),
)
