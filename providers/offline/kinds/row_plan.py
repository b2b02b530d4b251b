"""What a row kernel is, before any code: its layout, statistics, passes and launch arithmetic.

`RowPlan` classifies a row kernel's values (per element "full" or per row "row"), finds its layout
("rows" when the innermost dim is reduced, "cols" when it is kept), the level of each statistic (how
many statistics it depends on: one looped pass per level), which dependent statistics an online pass
can merge (softmax's max and sum of exp; Welford's mean and variance) and whether the split design
applies. designs.kernel_info reads these facts without building a generator; RowKernelGen
(emit_rows.py) writes the code from them. `RowConfig` is a row design's config, and
`registers_rows_launch` the launch arithmetic the emitted launcher performs.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.frontend.ir import Value, aligned, is_one
from kernelwright.providers.offline.kinds.kernel_plan import KernelPlan

STAT_OPS = ("sum", "mean", "max", "min", "argmax", "argmin", "prod", "numel", "any", "all")


@dataclass
class RowConfig:
    mode: str = "registers"  # registers | looped | online | split
    BLOCK_M: int = 1
    BLOCK_R: int = 1024
    BLOCK_I: int = 64
    TILE: int = 4096
    RMAX: int = 16384
    num_warps: int = 0  # 0: derived from the tile size
    num_stages: int = 1
    WAVES: int = 4  # split: partial programs per SM
    PERSIST: int = 0  # registers over rows: 0 one program per row block; k: k programs per SM walk them
    EVICT: int = 0  # looped/online: keep rows in L2 between statistic passes, stream them in the last
    PRELOAD: int = 0  # registers: 1 issues every per-element load (weights too) before the statistics
    STATIC: int = 0  # 1: row length, sizes and strides are compile-time constants (one compile per shape)
    MERGE: int = 1  # split: a variance in its mean's pass (Welford partials, Chan); 0: a pass per level
    WRITE_CHUNKS: int = 0  # split: chunks per program of the write pass; 0: the statistics passes' grid
    # registers over rows, rows too long for one load (the looped fallback): RFULL k > 0 keeps a row wider than
    # k in registers only when it fills at least three quarters of its power of two (a row mostly padding takes
    # the fallback); FALLBACK_WARPS w > 0 launches the fallback with w warps (0: the tile rule, as the single load)
    RFULL: int = 0
    FALLBACK_WARPS: int = 0

    def as_dict(self) -> dict[str, int | str]:
        return dict(self.__dict__)


# Warps for a tile when the config leaves num_warps at 0: 4 for short tiles, 8 from 2K elements, 16 from
# 8K (as Triton's layer-norm tutorial). The launchers print this rule; `registers_rows_launch` applies it.
_AUTO_WARPS = ((2048, 4), (8192, 8))
_AUTO_WARPS_MAX = 16


def auto_warps_expr(tile: str) -> str:
    """The rule above as the Python expression an emitted launcher evaluates."""
    (b0, w0), (b1, w1) = _AUTO_WARPS
    return f"{w0} if {tile} < {b0} else ({w1} if {tile} < {b1} else {_AUTO_WARPS_MAX})"


def next_pow2(n: int) -> int:
    """triton.next_power_of_2 for a Python int (1 for n <= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def registers_rows_launch(cfg: RowConfig, nk: int, nr: int) -> tuple[bool, int, int, int]:
    """(single, BLOCK_R, BLOCK_M, num_warps) that a whole-row-in-registers launcher over rows computes for
    NK rows of NR elements: the same arithmetic as the code `emit_rows_launch.launch_plain` emits, for callers that
    reason about configs without running them."""
    npow = next_pow2(max(nr, 1))
    single = npow <= cfg.RMAX and (not cfg.RFULL or npow <= cfg.RFULL or 4 * nr >= 3 * npow)
    block_r = npow if single else cfg.BLOCK_R
    block_m = min(max(1, cfg.TILE // block_r), next_pow2(max(nk, 1))) if single else 1
    tile = block_m * block_r
    warps = cfg.num_warps or next((w for bound, w in _AUTO_WARPS if tile < bound), _AUTO_WARPS_MAX)
    if not single and not cfg.num_warps and cfg.FALLBACK_WARPS:
        warps = cfg.FALLBACK_WARPS
    return single, block_r, block_m, warps


class RowPlan(KernelPlan):
    """The facts of one row kernel: layout, statistics and their levels, mergeable statistics."""

    def __init__(self, sched: Schedule, k: Kernel) -> None:
        super().__init__(sched, k)
        self.layout = "rows" if self.groups and self.groups[-1][0] == "R" else "cols"
        if not any(c == "R" for c, _ in self.groups):
            self.layout = "rows"
        self.stats = [v for v in k.values if v.kind == "reduce"]
        self.scans = [v for v in k.values if v.kind == "scan"]
        self.full_outputs = [v for v in k.outputs if self.vclass(v) == "full"]
        self.row_outputs = [v for v in k.outputs if self.vclass(v) == "row"]
        self.level: dict[int, int] = {}
        for v in k.values:
            self._level(v)

    def vclass(self, v: Value) -> str:
        if v.id in self.owned:
            return self.s.space[v.id]
        if v.kind == "reduce":
            return "row"
        al = aligned(v.shape, self.rank) if v.rank <= self.rank else v.shape
        return "row" if all(is_one(al[d]) for d in self.D) else "full"

    def _level(self, v: Value) -> int:
        if v.id in self.level:
            return self.level[v.id]
        if self.is_load(v):
            lv = 0
        elif v.kind == "reduce":
            lv = 0 if v.op == "numel" else 1 + self._level(v.args[0])
        else:
            lv = max((self._level(a) for a in v.tensor_args), default=0)
        self.level[v.id] = lv
        return lv

    def merges(self) -> dict[int, tuple[str, Value, Value | None]]:
        """Statistics that an online pass computes together: {dependent stat id: (kind, base stat, extra)}."""
        out: dict[int, tuple[str, Value, Value | None]] = {}
        stats = {v.id: v for v in self.stats}
        for s in self.stats:
            x = s.args[0]
            if s.op == "sum" and x.kind == "pw" and x.op == "exp" and not self.is_load(x):
                sub = x.args[0]
                if (
                    isinstance(sub, Value)
                    and sub.kind == "pw"
                    and sub.op == "sub"
                    and isinstance(sub.args[1], Value)
                ):
                    e, mx = sub.args
                    base = self._row_base_stat(mx)
                    if base is not None and base.op == "max" and base.args[0] is e and base.id in stats:
                        out[s.id] = ("softmax", base, mx)
            if s.op in ("sum", "mean") and x.kind == "pw":
                d = None
                if x.op == "mul" and x.args[0] is x.args[1] and isinstance(x.args[0], Value):
                    d = x.args[0]
                elif x.op == "pow" and x.args[1] in (2, 2.0) and isinstance(x.args[0], Value):
                    d = x.args[0]
                if d is not None and d.kind == "pw" and d.op == "sub" and isinstance(d.args[1], Value):
                    e, m = d.args
                    base = self._row_base_stat(m)
                    if base is not None and base is m and base.op == "mean" and base.args[0] is e:
                        out[s.id] = ("welford", base, None)
        return out

    def _row_base_stat(self, v: Value) -> Value | None:
        """The one statistic a row value is a function of (through row values), else None."""
        found: list[Value] = []
        stack = [v]
        seen: set[int] = set()
        while stack:
            x = stack.pop()
            if x.id in seen:
                continue
            seen.add(x.id)
            if x.kind == "reduce" and x.id in self.owned:
                found.append(x)
                continue
            if self.is_load(x) or self.vclass(x) != "row" or x.kind not in ("pw", "view"):
                return None
            stack.extend(x.tensor_args)
        return found[0] if len(found) == 1 else None

    def split_ok(self) -> bool:
        return bool(self.stats) and not self.scans and all(s.op in STAT_OPS for s in self.stats)

    def split_passes(self, merge: bool) -> tuple[list[list[Value]], dict[int, list[Value]]]:
        """The split design's passes over the input: the statistics each pass's partials hold, and
        {mean id: the variances computed with it} (Welford partials, combined with Chan's formula), which
        take no pass of their own. Without `merge`, one pass per level (mean, then variance around it)."""
        welford: dict[int, list[Value]] = {}
        if merge:
            for sid, (kind, base, _) in self.merges().items():
                if kind == "welford":
                    welford.setdefault(base.id, []).append(next(s for s in self.stats if s.id == sid))
        merged = {d.id for ds in welford.values() for d in ds}
        own = [s for s in self.stats if s.op != "numel" and s.id not in merged]
        levels = sorted({self.level[s.id] for s in own})
        return [[s for s in own if self.level[s.id] == lv] for lv in levels], welford
