"""Row kernels: reductions, softmax, norms, losses and scans over dims D of an iteration space S.

The space is walked as rows (the kept dims, flattened) by reduced positions (the dims in D, flattened),
without materialising any transpose:
- "rows" layout, when the innermost dim is reduced: a program takes BLOCK_M rows and walks the row in
  BLOCK_R chunks along the contiguous axis (tile [BLOCK_M, BLOCK_R], reduce along axis 1);
- "cols" layout, when the innermost dim is kept (a reduction over a middle dim): a program takes one
  outer index and BLOCK_I contiguous inner columns and walks the reduced dim (tile [BLOCK_R, BLOCK_I],
  reduce along axis 0), so every load is coalesced.

Dims are merged into groups where every tensor broadcasts the same way; each tensor gets one stride per
group at run time. Designs (`RowConfig.mode`):
- "registers": the whole row in registers (BLOCK_R = next_power_of_2(R)); every statistic is computed
  from the one load; rows too long for registers fall back to the looped code path;
- "looped": one pass over the row per level of statistics (max, then sum of exp; mean, then variance),
  then a pass that writes; accumulators are tiles, reduced once after the loop;
- "online": like looped, with dependent statistics merged into one pass (online softmax: max and sum of
  exp together; Welford/Chan: mean and variance together);
- "split": for few long rows (global reductions): the row is split over many programs that write partial
  statistics, and a second kernel combines them and writes the results.

The code lives in: row_plan.py (the facts and RowConfig), kernel_gen.py (what every generator shares),
this module (the generator: headers, statistics, stores, the registers and persistent designs),
emit_rows_looped.py (looped and online passes), emit_rows_split.py (the split design) and
emit_rows_launch.py (the launcher).
"""

from __future__ import annotations

import sympy

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.emit.emit import TL_DTYPE, Code, ExprContext, Operand, as_float, cat_of
from kernelwright.providers.offline.emit.emit_rows_launch import launcher_source
from kernelwright.providers.offline.emit.emit_rows_looped import looped_body
from kernelwright.providers.offline.emit.emit_rows_split import split_sources
from kernelwright.providers.offline.emit.kernel_gen import KernelGen, constexpr_sizes
from kernelwright.providers.offline.frontend.ir import SymScalar, Value
from kernelwright.providers.offline.kinds.kernel_plan import Load, RowPlanError
from kernelwright.providers.offline.kinds.row_plan import (
    STAT_OPS,
    RowConfig,
    RowPlan,
    next_pow2,
    registers_rows_launch,
)


class RowKernelGen(RowPlan, KernelGen):
    """Generates the @triton.jit kernel(s) and the launcher of one row kernel: a RowPlan (the facts)
    with the code helpers every generator shares (KernelGen)."""

    cfg: RowConfig
    scalar_groups: set[int]
    evict: str | None
    after_chunk: list[str]
    carries: dict[int, str]
    stat_buffers: set[int]
    rowid: str
    rowmask: str
    AX: int

    def __init__(self, sched: Schedule, k: Kernel, cfg: RowConfig, ctx: ExprContext) -> None:
        self.cfg = cfg
        self.ctx = ctx
        super().__init__(sched, k)

    def _needed_groups(self) -> set[int]:
        need: set[int] = set()
        for ld in self.loads.values():
            need |= set(ld.groups)
        for v in self._iotas():
            d = v.attrs["dim"] + (self.rank - v.rank)
            for gi, (_, dims) in enumerate(self.groups):
                if d in dims:
                    need.add(gi)
        if self.full_outputs:
            need |= set(range(len(self.groups)))
        return need

    def header_rows(self, c: Code, pid: str = "tl.program_id(0)") -> None:
        c(f"pid = {pid}")
        c("rk = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]")
        c("kmask = rk < NK")
        self.scalar_groups: set[int] = set()
        self.kidx = self._decompose(c, "rk", self.kept, "k", self._needed_groups())
        self.rowid = "rk"
        self.rowmask = "kmask"
        self.AX = 1

    def header_cols(self, c: Code) -> None:
        c("pid = tl.program_id(0)")
        c("n_ib = tl.cdiv(NI, BLOCK_I)")
        c("po = pid // n_ib")
        c("ri = (pid % n_ib) * BLOCK_I + tl.arange(0, BLOCK_I)[None, :]")
        c("imask = ri < NI")
        need = self._needed_groups()
        self.kidx = self._decompose(c, "po", self.outer, "k", need)
        self.scalar_groups = set(self.outer)
        self.kidx.update(self._decompose(c, "ri", self.inner, "k", need))
        c("rowid = po * NI + ri")
        self.rowid = "rowid"
        self.rowmask = "imask"
        self.AX = 0

    def chunk_setup(self, c: Code, start: str, block_mask: bool = True) -> None:
        """Name the row chunk's indices and masks; `block_mask=False` where no row block is known yet
        (before a persistent program's walk): only the row mask is named."""
        if self.layout == "rows":
            c(f"rr = {start} + tl.arange(0, BLOCK_R)[None, :]")
            c("rmask = rr < NR")
            if block_mask:
                c("fmask = kmask & rmask")
        else:
            c(f"rr = {start} + tl.arange(0, BLOCK_R)[:, None]")
            c("rmask = rr < NR")
            c("fmask = rmask & imask")
        self.ridx = self._decompose(c, "rr", self.red, "r", self._needed_groups())

    def _emit_load(self, c: Code, v: Value, cls: str) -> Operand:
        ld = self.loads[v.id]
        row_only = ld.row
        off = self.offset(ld.groups, self.load_strides(ld), row_only)
        if set(ld.groups) <= getattr(self, "scalar_groups", set()):
            # One value per program (a 0-d parameter, a per-batch value): always in bounds, no mask;
            # Triton refuses a block mask on a scalar pointer.
            return Operand(self._widen(f"tl.load({ld.name} + {off})", v), cat_of(v.dtype))
        mask = self.rowmask if row_only else "fmask"
        hint = getattr(self, "evict", None)
        if hint and ld.shared:
            hint = "evict_last"  # the same values for every row (a weight vector): keep them cached
        policy = f', eviction_policy="{hint}"' if hint and not row_only else ""
        text = f"tl.load({ld.name} + {off}, mask={mask}, other=0{policy})"
        return Operand(self._widen(text, v), cat_of(v.dtype))

    def _neutral(self, s: Value) -> str:
        op = s.op
        cat = cat_of(s.args[0].dtype) if s.op not in ("mean",) else "f"
        if op in ("sum", "mean", "any"):
            return "0.0" if cat == "f" else "0"
        if op == "prod" or op == "all":
            return "1.0" if cat == "f" else "1"
        if op in ("max", "argmax"):
            return '-float("inf")' if cat == "f" else "-9223372036854775807"
        if op in ("min", "argmin"):
            return 'float("inf")' if cat == "f" else "9223372036854775807"
        raise RowPlanError(f"no neutral value for {op}")

    def _acc_dtype(self, s: Value) -> str:
        x = s.args[0]
        if s.op in ("any", "all"):
            return "tl.int32"
        if cat_of(x.dtype) == "f" or s.op == "mean":
            return "tl.float32"
        return "tl.int64"

    def _masked(self, c: Code, s: Value, memo: dict[int, Operand]) -> str:
        x = self.emit(c, s.args[0], "full", memo)
        text = x.text
        if s.op in ("any", "all"):
            text = f"({x.text} != 0).to(tl.int32)"
        elif s.op == "mean" and x.cat != "f":
            text = as_float(x)
        elif x.cat == "b":
            text = f"{x.text}.to(tl.int64)"
        name = f"m{s.id}"
        c(f"{name} = tl.where(fmask, {text}, {self._neutral(s)})")
        return name

    def _reduce_text(self, op: str, x: str, axis: int) -> str:
        if op in ("sum", "mean", "any"):
            return (
                f"tl.sum({x}, axis={axis}, keep_dims=True)"
                if op != "any"
                else f"tl.max({x}, axis={axis}, keep_dims=True)"
            )
        if op in ("max",):
            return f"tl.max({x}, axis={axis}, keep_dims=True)"
        if op in ("min", "all"):
            return f"tl.min({x}, axis={axis}, keep_dims=True)"
        if op == "prod":
            return f"tl.reduce({x}, {axis}, {self.ctx.use('_kw_mul')}, keep_dims=True)"
        raise RowPlanError(op)

    def _finish_stat(self, c: Code, s: Value, raw: str) -> None:
        """Name the finished statistic `s{id}` in the row scope (mean divides, any/all become bool)."""
        if s.op == "mean":
            c(f"s{s.id} = {raw} / NR")
        elif s.op in ("any", "all"):
            c(f"s{s.id} = {raw} != 0")
        else:
            c(f"s{s.id} = {raw}")
        self.stat_names[s.id] = Operand(f"s{s.id}", cat_of(s.dtype) if s.op not in ("mean",) else "f")

    def _stat_value(self, c: Code, s: Value) -> Operand:
        if s.id in self.stat_names:
            return self.stat_names[s.id]
        if s.op == "numel":
            c(f"s{s.id} = NR * 1.0")
            self.stat_names[s.id] = Operand(f"s{s.id}", "f")
            return self.stat_names[s.id]
        if s.id in getattr(self, "stat_buffers", set()):
            # Split design: an earlier kernel combined this statistic into a per-row buffer.
            c(f"s{s.id} = tl.load(sb{s.id} + {self.rowid}, mask={self.rowmask}, other=0)")
            self.stat_names[s.id] = Operand(
                f"s{s.id}", "i" if s.op in ("argmax", "argmin") else cat_of(s.dtype)
            )
            return self.stat_names[s.id]
        if not self.single:
            raise RowPlanError(f"statistic {s.id} used before its pass")
        # Registers: the whole row is in this tile.
        memo = self.full_memo
        m = self._masked(c, s, memo)
        ax = self.AX
        if s.op in ("argmax", "argmin"):
            red = "tl.max" if s.op == "argmax" else "tl.min"
            c(f"b{s.id} = {red}({m}, axis={ax}, keep_dims=True)")
            c(
                f"s{s.id} = tl.min(tl.where({m} == b{s.id}, rr, 2147483647), axis={ax}, keep_dims=True).to(tl.int64)"
            )
            self.stat_names[s.id] = Operand(f"s{s.id}", "i")
        else:
            self._finish_stat(c, s, self._reduce_text(s.op, m, ax))
        return self.stat_names[s.id]

    def _scan_value(self, c: Code, v: Value) -> Operand:
        x = self.emit(c, v.args[0], "full")
        neutral = "0.0" if x.cat == "f" else "0"
        if v.op == "cumprod":
            neutral = "1.0" if x.cat == "f" else "1"
        xt = x.text if x.cat != "b" else f"{x.text}.to(tl.int64)"
        fn = "tl.cumsum" if v.op == "cumsum" else "tl.cumprod"
        c(f"q{v.id} = tl.where(fmask, {xt}, {neutral})")
        if self.single:
            return Operand(f"{fn}(q{v.id}, axis={self.AX})", cat_of(v.dtype))
        carry = self.carries[v.id]
        if v.op == "cumsum":
            c(f"c{v.id} = {fn}(q{v.id}, axis={self.AX}) + {carry}")
            self.after_chunk.append(f"{carry} = {carry} + tl.sum(q{v.id}, axis={self.AX}, keep_dims=True)")
        else:
            c(f"c{v.id} = {fn}(q{v.id}, axis={self.AX}) * {carry}")
            self.after_chunk.append(
                f"{carry} = {carry} * tl.reduce(q{v.id}, {self.AX}, {self.ctx.use('_kw_mul')}, keep_dims=True)"
            )
        return Operand(f"c{v.id}", cat_of(v.dtype))

    def store_full(self, c: Code, v: Value, memo: dict[int, Operand]) -> None:
        val = self.emit(c, v, "full", memo)
        name = self.out_names[v.id]
        strides = [f"{name}_s{gi}" for gi in range(len(self.groups))]
        off = self.offset(list(range(len(self.groups))), strides, False)
        text = self._store_cast(val.text, v)
        zero = "tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.int1)" if self.layout == "rows" else \
            "tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.int1)"  # fmt: skip
        if self.vclass(v) == "row":
            text = f"({text}) + {zero}.to({TL_DTYPE.get(v.dtype, 'tl.float32')})"
        c(f"tl.store({name} + {off}, {text}, mask=fmask)")

    def store_row(self, c: Code, v: Value) -> None:
        val = self.emit(c, v, "row", self.row_memo)
        text = self._store_cast(val.text, v)
        c(f"tl.store({self.out_names[v.id]} + {self.rowid}, {text}, mask={self.rowmask})")

    def kernel_source(self, name: str) -> str:
        mode = self.cfg.mode
        if mode == "split":
            return split_sources(self, name)
        c = Code()
        self.out_names = {v.id: f"out{i}" for i, v in enumerate(self.k.outputs)}
        params = self._params(extra=[])
        c.jit_def(name, params)
        with c.indent():
            self.stat_names: dict[int, Operand] = {}
            self.row_memo: dict[int, Operand] = {}
            if mode == "registers" and self.layout == "rows" and self.cfg.PERSIST:
                self._persistent_body(c)
            elif mode == "registers":
                (self.header_rows if self.layout == "rows" else self.header_cols)(c)
                self._registers_body(c)
            else:
                (self.header_rows if self.layout == "rows" else self.header_cols)(c)
                looped_body(self, c, online=(mode == "online"))
        return c.text()

    def _persistent_body(self, c: Code) -> None:
        """A few programs per SM walk the row blocks (no per-block launch, no tail of short-lived
        programs). When the row fits (SINGLE):
        - operands that vary only along the row (a norm's weight and bias) are loaded once per program,
          before the walk, and stay in registers (one program per row reads them for every row);
        - the next row block's data is loaded while this one is reduced and written, so a program keeps
          a load in flight through its compute (when the kept dims form one group).
        """
        walk = "for rb in range(tl.program_id(0), tl.cdiv(NK, BLOCK_M), tl.num_programs(0)):"
        c("if SINGLE:")
        with c.indent():
            self.chunk_setup(c, "0", block_mask=False)
            hoisted: dict[int, Operand] = {}
            for ld in self.loads.values():
                if ld.groups and ld.shared:
                    text = f"tl.load({ld.name} + {self.offset(ld.groups, self.load_strides(ld), False)}, " \
                           "mask=rmask, other=0)"  # fmt: skip
                    c(f"h{ld.value.id} = {self._widen(text, ld.value)}")
                    hoisted[ld.value.id] = Operand(f"h{ld.value.id}", cat_of(ld.value.dtype))
            ahead = self._prefetched_loads()
            if ahead:
                c("rk_n = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]")
                self._prefetch(c, ahead)
            c(walk)
            with c.indent():
                self.header_rows(c, pid="rb")
                self.row_memo = {}
                current = dict(hoisted)
                for ld in ahead:
                    c(f"c{ld.value.id} = p{ld.value.id}")
                    current[ld.value.id] = Operand(f"c{ld.value.id}", cat_of(ld.value.dtype))
                if ahead:
                    c("rk_n = (rb + tl.num_programs(0)) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]")
                    self._prefetch(c, ahead)
                self._single_body(c, preloaded=current, setup=False)
        c("else:")
        with c.indent():
            c(walk)
            with c.indent():
                self.header_rows(c, pid="rb")
                self.stat_names = {}
                self.row_memo = {}
                looped_body(self, c, online=False)

    def _prefetched_loads(self) -> list[Load]:
        """Per-element loads that a persistent program can fetch one row block ahead: those indexed by
        the rows when the kept dims form one group (the row block's index is then the row index)."""
        if len(self.kept) != 1:
            return []
        return [ld for ld in self.loads.values() if not ld.row and self.kept[0] in ld.groups]

    def _prefetch(self, c: Code, loads: list[Load]) -> None:
        """Load `loads` for the row block starting at rows `rk_n` into p<id> (zeros past the last row)."""
        for ld in loads:
            off = self.offset(ld.groups, self.load_strides(ld), False, kidx={self.kept[0]: "rk_n"})
            text = f"tl.load({ld.name} + {off}, mask=(rk_n < NK) & rmask, other=0)"
            c(f"p{ld.value.id} = {self._widen(text, ld.value)}")

    def _registers_body(self, c: Code) -> None:
        c("if SINGLE:")
        with c.indent():
            self._single_body(c)
        c("else:")
        with c.indent():
            self.stat_names = {}
            self.row_memo = {}
            looped_body(self, c, online=False)

    def _params(self, extra: list[str]) -> list[str]:
        p = [ld.name for ld in self.loads.values()]
        p += [self.out_names[v.id] for v in self.k.outputs]
        p += extra
        p += [name for name, _ in self.syms.values()]
        p += ["NK", "NR"] + (["NI"] if self.layout == "cols" else [])
        p += [self.gname(gi) for gi in range(len(self.groups))]
        for ld in self.loads.values():
            p += self.load_strides(ld)
        for v in self.full_outputs:
            p += [f"{self.out_names[v.id]}_s{gi}" for gi in range(len(self.groups))]
        if self.layout == "rows":
            p += ["BLOCK_M: tl.constexpr", "BLOCK_R: tl.constexpr"]
        else:
            p += ["BLOCK_R: tl.constexpr", "BLOCK_I: tl.constexpr"]
        if self.cfg.mode == "registers":
            p += ["SINGLE: tl.constexpr"]
        return p

    def _single_body(self, c: Code, preloaded: dict[int, Operand] | None = None, setup: bool = True) -> None:
        """The whole row block from one load. `preloaded`: operands already loaded (by id); with
        `setup=False` the row indices are already named and only the block's mask is formed here."""
        self.single = True
        self.evict: str | None = None
        self.full_memo: dict[int, Operand] = dict(preloaded or {})
        if setup:
            self.chunk_setup(c, "0")
        else:
            c("fmask = kmask & rmask")
        if getattr(self.cfg, "PRELOAD", 0):
            # All loads in flight together: a weight read after the statistics would add a second
            # memory round trip behind the reductions' barriers, which the compiler cannot hoist over.
            # The row data first (it has the longest way to come), then the operands shared by rows.
            for ld in sorted(self.loads.values(), key=lambda ld: ld.shared):
                if not ld.row and ld.value.id not in self.full_memo:
                    self.emit(c, ld.value, "full", self.full_memo)
        for v in self.full_outputs:
            self.store_full(c, v, self.full_memo)
        for v in self.row_outputs:
            self.store_row(c, v)

    def launcher_source(
        self, name: str, symmap: dict[sympy.Symbol, str]
    ) -> tuple[str, list[Value], list[SymScalar]]:
        """Python launcher; returns (source, tensor arguments in order, runtime scalars in order)."""
        return launcher_source(self, name, symmap)


__all__ = [
    "STAT_OPS",
    "RowConfig",
    "RowKernelGen",
    "RowPlanError",
    "Load",
    "constexpr_sizes",
    "next_pow2",
    "registers_rows_launch",
]
