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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy
import torch

from kernelwright.providers.offline.emit import (
    TL_DTYPE,
    Code,
    ExprContext,
    Operand,
    as_float,
    cat_of,
    literal,
    pw_expr,
)
from kernelwright.providers.offline.ir import SymScalar, Value, aligned, is_one
from kernelwright.providers.offline.schedule import Kernel, Schedule

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

    def as_dict(self) -> dict[str, int | str]:
        return dict(self.__dict__)


# Warps for a tile when the config leaves num_warps at 0: 4 for short tiles, 8 from 2K elements, 16 from
# 8K (as Triton's layer-norm tutorial). The launchers print this rule; `registers_rows_launch` applies it.
_AUTO_WARPS = ((2048, 4), (8192, 8))
_AUTO_WARPS_MAX = 16


def _auto_warps_expr(tile: str) -> str:
    """The rule above as the Python expression an emitted launcher evaluates."""
    (b0, w0), (b1, w1) = _AUTO_WARPS
    return f"{w0} if {tile} < {b0} else ({w1} if {tile} < {b1} else {_AUTO_WARPS_MAX})"


def next_pow2(n: int) -> int:
    """triton.next_power_of_2 for a Python int (1 for n <= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


def registers_rows_launch(cfg: RowConfig, nk: int, nr: int) -> tuple[bool, int, int, int]:
    """(single, BLOCK_R, BLOCK_M, num_warps) that a whole-row-in-registers launcher over rows computes for
    NK rows of NR elements: the same arithmetic as the code `_launch_plain` emits, for callers that
    reason about configs without running them."""
    npow = next_pow2(max(nr, 1))
    single = npow <= cfg.RMAX
    block_r = npow if single else cfg.BLOCK_R
    block_m = min(max(1, cfg.TILE // block_r), next_pow2(max(nk, 1))) if single else 1
    tile = block_m * block_r
    warps = cfg.num_warps or next((w for bound, w in _AUTO_WARPS if tile < bound), _AUTO_WARPS_MAX)
    return single, block_r, block_m, warps


class RowPlanError(ValueError):
    pass


def constexpr_sizes(src: str, names: set[str]) -> str:
    """Declare the size parameters in `names` as tl.constexpr in every kernel signature of `src`.

    Triton compiles one variant per distinct value, so the source stays shape-generic while divisions
    by these sizes compile to multiply-shift sequences instead of runtime integer division.
    """
    out = []
    for line in src.splitlines():
        stripped = line.strip()
        if (
            stripped.endswith(",")
            and stripped[:-1] in names
            and line.startswith("    ")
            and not line.startswith("     ")
        ):
            line = line.replace(stripped, f"{stripped[:-1]}: tl.constexpr,")
        out.append(line)
    return "\n".join(out) + "\n"


@dataclass
class _Load:
    value: Value
    name: str
    pattern: tuple[bool, ...]  # full (True) or broadcast per dim of S
    groups: list[int] = field(default_factory=list)  # group indices where it is full
    row: bool = False  # broadcast over every reduced dim: loaded once per row
    shared: bool = False  # broadcast over every kept dim: the same values for every row (a norm's weight)


class RowKernelGen:
    """Generates the @triton.jit kernel(s) and the launcher of one row kernel."""

    const_shape = "[1, 1]"

    def generate(
        self, name: str, symmap: dict[sympy.Symbol, str]
    ) -> tuple[str, str, list[Value], list[SymScalar]]:
        """(kernel source, launcher source, launcher tensor arguments, launcher scalar arguments)."""
        self.kname = name
        self.const_sizes: set[str] = set()
        ksrc = self.kernel_source(name)
        if getattr(self.cfg, "STATIC", 0):  # the matmul and pointwise subclasses have configs without it
            # The row length, the group sizes and every stride: address arithmetic and masks fold.
            self.const_sizes |= set(re.findall(r"^    (NR|G\d+|\w+_s\d+),$", ksrc, flags=re.M))
        ksrc = constexpr_sizes(ksrc, self.const_sizes)
        lsrc, tensors, syms = self.launcher_source(name, symmap)
        return ksrc, lsrc, tensors, syms

    def __init__(self, sched: Schedule, k: Kernel, cfg: RowConfig, ctx: ExprContext) -> None:
        self.s = sched
        self.k = k
        self.cfg = cfg
        self.ctx = ctx
        self.S = k.space
        self.D = set(k.dims)
        self.rank = len(self.S)
        self.owned = {v.id for v in k.values}
        self.loads: dict[int, _Load] = {}
        self.syms: dict[int, tuple[str, SymScalar]] = {}
        self.shape_only: dict[int, Value] = {}
        self._collect()
        self._groups()
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

    # ---- classification ----------------------------------------------------------------------------
    def is_load(self, v: Value) -> bool:
        if v.id in self.owned:
            return False
        if v.kind in ("input", "param"):
            return True
        return self.s.owner.get(v.id) is not None

    def vclass(self, v: Value) -> str:
        if v.id in self.owned:
            return self.s.space[v.id]
        if v.kind == "reduce":
            return "row"
        al = aligned(v.shape, self.rank) if v.rank <= self.rank else v.shape
        return "row" if all(is_one(al[d]) for d in self.D) else "full"

    def _collect(self) -> None:
        """Loads (tensors read), runtime scalars, and tensors used only for their shape."""
        seen: set[int] = set()
        stack = list(self.k.outputs) + list(self.k.values)
        while stack:
            v = stack.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            if self.is_load(v):
                self._add_load(v)
                continue
            if v.kind == "reduce" and v.op == "numel":
                x = v.args[0]
                if self.is_load(x) and x.id not in self.loads:
                    self.shape_only[x.id] = x
                elif not self.is_load(x):
                    stack.append(x)
                continue
            for a in v.args:
                if isinstance(a, Value):
                    stack.append(a)
                elif isinstance(a, SymScalar) and id(a) not in self.syms:
                    self.syms[id(a)] = (f"sym{len(self.syms)}", a)

    def _add_load(self, v: Value) -> None:
        if v.rank > self.rank:
            raise RowPlanError("a tensor of higher rank than the kernel's space")
        al = aligned(v.shape, self.rank)
        pattern = tuple(not is_one(al[d]) and not is_one(self.S[d]) for d in range(self.rank))
        self.loads[v.id] = _Load(v, f"in{len(self.loads)}", pattern)

    def _groups(self) -> None:
        patterns = [ld.pattern for ld in self.loads.values()]
        for v in self._iotas():
            d = v.attrs["dim"] + (self.rank - v.rank)
            patterns.append(tuple(i == d for i in range(self.rank)))
        groups: list[tuple[str, list[int]]] = []
        prev = None
        for d in range(self.rank):
            if is_one(self.S[d]):
                continue
            sig = ("R" if d in self.D else "K", tuple(p[d] for p in patterns))
            if groups and sig == prev:
                groups[-1][1].append(d)
            else:
                groups.append((sig[0], [d]))
            prev = sig
        self.groups = groups
        for ld in self.loads.values():
            ld.groups = [gi for gi, (_, dims) in enumerate(groups) if ld.pattern[dims[0]]]
            ld.row = all(groups[gi][0] == "K" for gi in ld.groups)
            ld.shared = not any(groups[gi][0] == "K" for gi in ld.groups)
        self.kept = [gi for gi, (c, _) in enumerate(groups) if c == "K"]
        self.red = [gi for gi, (c, _) in enumerate(groups) if c == "R"]
        last_r = max(self.red) if self.red else -1
        self.inner = [gi for gi in self.kept if gi > last_r]
        self.outer = [gi for gi in self.kept if gi < last_r]

    def _iotas(self) -> list[Value]:
        out = []
        seen: set[int] = set()
        stack = list(self.k.values)
        while stack:
            v = stack.pop()
            if v.id in seen or self.is_load(v):
                continue
            seen.add(v.id)
            if v.kind == "pw" and v.op == "iota":
                out.append(v)
            stack.extend(v.tensor_args)
        return out

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

    # ---- applicability -----------------------------------------------------------------------------
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

    # ---- code: shared pieces -----------------------------------------------------------------------
    def gname(self, gi: int) -> str:
        return f"G{gi}"

    def _decompose(self, c: Code, flat: str, gis: list[int], prefix: str, needed: set[int]) -> dict[int, str]:
        """Indices of groups `gis` (outer to inner) from a flat index; only `needed` groups are named."""
        out: dict[int, str] = {}
        if not gis:
            return out
        if len(gis) == 1:
            out[gis[0]] = flat
            return out
        for j, gi in enumerate(gis):
            if gi not in needed:
                continue
            inner = [self.gname(g) for g in gis[j + 1 :]]
            # Sizes used as divisors are compile-time constants: division becomes multiply-shift.
            self.const_sizes.update(inner)
            if j > 0:
                self.const_sizes.add(self.gname(gi))
            div = " * ".join(inner)
            if j == 0:
                expr = f"{flat} // ({div})" if inner else flat
            elif not inner:
                expr = f"{flat} % {self.gname(gi)}"
            else:
                expr = f"({flat} // ({div})) % {self.gname(gi)}"
            out[gi] = f"{prefix}{gi}"
            c(f"{prefix}{gi} = {expr}")
        return out

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

    def offset(
        self, ld_groups: list[int], strides: list[str], row_only: bool, kidx: dict[int, str] | None = None
    ) -> str:
        """The element offset of a load over its groups; `kidx` names the kept groups' indices when they
        are not the current row block's (a prefetch of the next one)."""
        terms = []
        for gi, s in zip(ld_groups, strides, strict=True):
            if self.groups[gi][0] == "R":
                if row_only:
                    continue
                terms.append(f"{self.ridx[gi]} * {s}")
            else:
                terms.append(f"{(self.kidx if kidx is None else kidx)[gi]} * {s}")
        return " + ".join(terms) if terms else "0"

    def load_strides(self, ld: _Load) -> list[str]:
        return [f"{ld.name}_s{gi}" for gi in ld.groups]

    # ---- code: expressions -------------------------------------------------------------------------
    def emit(self, c: Code, v: Value, scope: str, memo: dict[int, Operand] | None = None) -> Operand:
        """The value of `v`, emitting what it needs into `c`.

        Per-row values (class "row") are named once per program (`self.row_memo`); per-element values
        once per chunk (`self.full_memo`). `scope` and `memo` are accepted for readability only.
        """
        cls = self.vclass(v)
        memo = self.row_memo if cls == "row" else self.full_memo
        if v.id in memo:
            return memo[v.id]
        if self.is_load(v):
            op = self._emit_load(c, v, cls)
        elif v.kind == "reduce":
            op = self._stat_value(c, v)
            if v.dtype in (torch.float16, torch.bfloat16) and op.cat == "f":
                c(f"w{v.id}r = ({op.text}).to({TL_DTYPE[v.dtype]}).to(tl.float32)")
                op = Operand(f"w{v.id}r", "f")
            memo[v.id] = op
            return op
        elif v.kind == "scan":
            op = self._scan_value(c, v)
        elif v.kind == "view":
            op = self.emit(c, v.args[0], cls)
            memo[v.id] = op
            return op
        elif v.kind == "pw":
            op = self._emit_pw(c, v)
            if v.op in ("full", "iota"):
                memo[v.id] = op
                return op
        else:
            raise RowPlanError(f"cannot compute {v.kind} {v.op} inside a row kernel")
        if v.dtype in (torch.float16, torch.bfloat16) and op.cat == "f" and not self.is_load(v):
            # Eager rounds every fp16/bf16 result to its dtype; registers hold fp32, so round here too.
            op = Operand(f"({op.text}).to({TL_DTYPE[v.dtype]}).to(tl.float32)", "f")
        name = f"v{v.id}" if cls == "full" else f"w{v.id}"
        c(f"{name} = {op.text}")
        out = Operand(name, op.cat)
        memo[v.id] = out
        return out

    def _emit_pw(self, c: Code, v: Value) -> Operand:
        if v.op == "full":
            val = v.attrs["value"]
            lit = (Operand(self._sym_name(val), "f" if val.is_float else "i") if isinstance(val, SymScalar)
                   else literal(val))  # fmt: skip
            cat = cat_of(v.dtype)
            text = as_float(lit) if cat == "f" else lit.text
            return Operand(f"tl.full({self.const_shape}, {text}, {TL_DTYPE[v.dtype]})", cat)
        if v.op == "iota":
            d = v.attrs["dim"] + (self.rank - v.rank)
            if is_one(self.S[d]):
                return Operand(f"tl.zeros({self.const_shape}, dtype=tl.int32)", "i")
            gi = next(gi for gi, (_, dims) in enumerate(self.groups) if d in dims)
            idx = self.ridx[gi] if self.groups[gi][0] == "R" else self.kidx[gi]
            return Operand(idx, "i")
        args = []
        for a in v.args:
            if isinstance(a, Value):
                args.append(self.emit(c, a, self.vclass(a)))
            elif isinstance(a, SymScalar):
                args.append(Operand(self._sym_name(a), "f" if a.is_float else "i"))
            elif isinstance(a, torch.dtype):
                continue
            else:
                args.append(literal(a))
        return pw_expr(v.op, args, v.dtype, v.attrs, self.ctx)

    def _sym_name(self, s: SymScalar) -> str:
        for name, val in self.syms.values():
            if val is s:
                return name
        raise RowPlanError("unknown runtime scalar")

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
        cat = cat_of(v.dtype)
        if cat == "f" and v.dtype != torch.float32:
            text = f"{text}.to(tl.float32)"
        return Operand(text, cat)

    @staticmethod
    def _widen(text: str, v: Value) -> str:
        return f"{text}.to(tl.float32)" if cat_of(v.dtype) == "f" and v.dtype != torch.float32 else text

    # ---- statistics --------------------------------------------------------------------------------
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

    # ---- code: stores ------------------------------------------------------------------------------
    def store_full(self, c: Code, v: Value, memo: dict[int, Operand]) -> None:
        val = self.emit(c, v, "full", memo)
        name = self.out_names[v.id]
        strides = [f"{name}_s{gi}" for gi in range(len(self.groups))]
        off = self.offset(list(range(len(self.groups))), strides, False)
        text = val.text
        if cat_of(v.dtype) == "f" and v.dtype != torch.float32:
            text = f"({text}).to({TL_DTYPE[v.dtype]})"
        zero = "tl.zeros([BLOCK_M, BLOCK_R], dtype=tl.int1)" if self.layout == "rows" else \
            "tl.zeros([BLOCK_R, BLOCK_I], dtype=tl.int1)"  # fmt: skip
        if self.vclass(v) == "row":
            text = f"({text}) + {zero}.to({TL_DTYPE.get(v.dtype, 'tl.float32')})"
        c(f"tl.store({name} + {off}, {text}, mask=fmask)")

    def store_row(self, c: Code, v: Value) -> None:
        val = self.emit(c, v, "row", self.row_memo)
        text = val.text
        if cat_of(v.dtype) == "f" and v.dtype != torch.float32:
            text = f"({text}).to({TL_DTYPE[v.dtype]})"
        c(f"tl.store({self.out_names[v.id]} + {self.rowid}, {text}, mask={self.rowmask})")

    # ---- the kernel --------------------------------------------------------------------------------
    def kernel_source(self, name: str) -> str:
        mode = self.cfg.mode
        if mode == "split":
            return self._split_sources(name)
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
                self._looped_body(c, online=(mode == "online"))
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
                self._looped_body(c, online=False)

    def _prefetched_loads(self) -> list[_Load]:
        """Per-element loads that a persistent program can fetch one row block ahead: those indexed by
        the rows when the kept dims form one group (the row block's index is then the row index)."""
        if len(self.kept) != 1:
            return []
        return [ld for ld in self.loads.values() if not ld.row and self.kept[0] in ld.groups]

    def _prefetch(self, c: Code, loads: list[_Load]) -> None:
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
            self._looped_body(c, online=False)

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

    def _looped_body(self, c: Code, online: bool) -> None:
        self.single = False
        merges = self.merges() if online else {}
        merged_into: dict[int, list[tuple[Value, str, Value | None]]] = {}
        for sid, (kind, base, extra) in merges.items():
            merged_into.setdefault(base.id, []).append(
                (next(s for s in self.stats if s.id == sid), kind, extra)
            )
        skip = set(merges)
        levels = sorted({self.level[s.id] for s in self.stats if s.op != "numel" and s.id not in skip})
        for lv in levels:
            group = [s for s in self.stats if self.level[s.id] == lv and s.op != "numel" and s.id not in skip]
            self._pass(c, group, merged_into)
        # The writing pass: the last read of each element.
        self.evict = "evict_first" if self.cfg.EVICT else None
        if self.full_outputs:
            self._row_prereqs(c, self.full_outputs)
            self.carries = {}
            for v in self._scans_needed(self.full_outputs):
                self.carries[v.id] = f"carry{v.id}"
                neutral = "1.0" if v.op == "cumprod" else "0.0"
                shape = "[BLOCK_M, 1]" if self.layout == "rows" else "[1, BLOCK_I]"
                c(f"carry{v.id} = tl.full({shape}, {neutral}, tl.float32)")
            c("for r0 in range(0, NR, BLOCK_R):")
            with c.indent():
                self.after_chunk: list[str] = []
                self.chunk_setup(c, "r0")
                memo: dict[int, Operand] = {}
                self.full_memo = memo
                for v in self.full_outputs:
                    self.store_full(c, v, memo)
                for line in self.after_chunk:
                    c(line)
        for v in self.row_outputs:
            self.store_row(c, v)

    def _scans_needed(self, targets: list[Value]) -> list[Value]:
        out: list[Value] = []
        seen: set[int] = set()
        stack = list(targets)
        while stack:
            v = stack.pop()
            if v.id in seen or self.is_load(v) or (v.kind == "reduce"):
                continue
            seen.add(v.id)
            if v.kind == "scan":
                out.append(v)
            stack.extend(v.tensor_args)
        return sorted(out, key=lambda v: v.id)

    def _row_prereqs(self, c: Code, targets: list[Value]) -> None:
        """Emit (before a loop) the row values the loop body will read."""
        need: list[Value] = []
        seen: set[int] = set()
        stack = list(targets)
        while stack:
            v = stack.pop()
            if v.id in seen:
                continue
            seen.add(v.id)
            if self.vclass(v) == "row" and not (v.kind == "reduce" and v.id in self.owned and v in targets):
                need.append(v)
                continue
            if self.is_load(v):
                continue
            if v.kind == "reduce" and v.id in self.owned:
                stack.append(v.args[0])
                continue
            stack.extend(v.tensor_args)
        for v in sorted(need, key=lambda v: v.id):
            self.emit(c, v, "row", self.row_memo)

    def _pass(self, c: Code, group: list[Value], merged_into: dict) -> None:
        self.evict = "evict_last" if self.cfg.EVICT and self.full_outputs else None
        self._row_prereqs(c, group)
        ax = self.AX
        tile = "[BLOCK_M, BLOCK_R]" if self.layout == "rows" else "[BLOCK_R, BLOCK_I]"
        rowshape = "[BLOCK_M, 1]" if self.layout == "rows" else "[1, BLOCK_I]"
        welford = {s.id for s in group for (_, kind, _) in merged_into.get(s.id, []) if kind == "welford"}
        softmax = {s.id: [(d, extra) for (d, kind, extra) in merged_into.get(s.id, []) if kind == "softmax"]
                   for s in group}  # fmt: skip
        self.carries = {}
        for s in group:
            acc = self._acc_dtype(s)
            if s.id in welford:
                # Welford per lane of the tile (no cross-thread reduction inside the loop), one Chan
                # combine across lanes after it.
                for acc_name in ("wn", "wm", "w2"):
                    c(f"{acc_name}{s.id} = tl.zeros({tile}, dtype=tl.float32)")
                continue
            c(f"a{s.id} = tl.full({tile}, {self._neutral(s)}, {acc})")
            if s.op in ("argmax", "argmin"):
                c(f"i{s.id} = tl.zeros({tile}, dtype=tl.int32)")
            for d, _ in softmax.get(s.id, []):
                c(f"e{d.id} = tl.zeros({tile}, dtype=tl.float32)")
        for v in self._scans_needed([s.args[0] for s in group]):
            self.carries[v.id] = f"carry{v.id}"
            c(f"carry{v.id} = tl.full({rowshape}, {'1.0' if v.op == 'cumprod' else '0.0'}, tl.float32)")
        c("for r0 in range(0, NR, BLOCK_R):")
        with c.indent():
            self.after_chunk = []
            self.chunk_setup(c, "r0")
            memo: dict[int, Operand] = {}
            self.full_memo = memo
            for s in group:
                if s.id in welford:
                    x = self.emit(c, s.args[0], "full", memo)
                    xf = as_float(x)
                    # A lane in bounds in this chunk was in bounds in every earlier one (chunks walk the
                    # row upward), so its count is the chunk's number: one reciprocal per chunk, not a
                    # division per element.
                    c("inv_n = 1.0 / (r0 // BLOCK_R + 1)")
                    c(f"wd = tl.where(fmask, {xf} - wm{s.id}, 0.0)")
                    c(f"wm{s.id} = wm{s.id} + wd * inv_n")
                    c(f"w2{s.id} = w2{s.id} + wd * tl.where(fmask, {xf} - wm{s.id}, 0.0)")
                    c(f"wn{s.id} = wn{s.id} + fmask.to(tl.float32)")
                    continue
                m = self._masked(c, s, memo)
                a = f"a{s.id}"
                if s.op in ("sum", "mean"):
                    c(f"{a} = {a} + {m}")
                elif s.op in ("max", "any"):
                    if softmax.get(s.id):
                        c(f"mnew = tl.maximum({a}, {m})")
                        c(f'msafe_old = tl.where({a} == -float("inf"), 0.0, {a})')
                        c('msafe = tl.where(mnew == -float("inf"), 0.0, mnew)')
                        for d, _ in softmax[s.id]:
                            c(f"e{d.id} = e{d.id} * tl.exp(msafe_old - msafe) + tl.exp({m} - msafe)")
                        c(f"{a} = mnew")
                    else:
                        c(f"{a} = tl.maximum({a}, {m})")
                elif s.op in ("min", "all"):
                    c(f"{a} = tl.minimum({a}, {m})")
                elif s.op == "prod":
                    c(f"{a} = {a} * {m}")
                elif s.op in ("argmax", "argmin"):
                    cmp = ">" if s.op == "argmax" else "<"
                    c(f"upd = {m} {cmp} {a}")
                    c(f"{a} = tl.where(upd, {m}, {a})")
                    c(f"i{s.id} = tl.where(upd, rr, i{s.id})")
            for line in self.after_chunk:
                c(line)
        # Reduce the accumulators to one value per row.
        for s in group:
            if s.id in welford:
                combine = self.ctx.use("_kw_welford_combine")
                c(
                    f"wm{s.id}, w2{s.id}, wn{s.id} = tl.reduce((wm{s.id}, w2{s.id}, wn{s.id}), {ax}, {combine}, "
                    "keep_dims=True)"
                )
                self.stat_names[s.id] = Operand(f"wm{s.id}", "f")
                for d, kind, _ in merged_into.get(s.id, []):
                    if kind == "welford":
                        c(f"s{d.id} = w2{s.id}" + (" / NR" if d.op == "mean" else ""))
                        self.stat_names[d.id] = Operand(f"s{d.id}", "f")
                continue
            a = f"a{s.id}"
            if s.op in ("argmax", "argmin"):
                red = "tl.max" if s.op == "argmax" else "tl.min"
                c(f"b{s.id} = {red}({a}, axis={ax}, keep_dims=True)")
                c(
                    f"s{s.id} = tl.min(tl.where({a} == b{s.id}, i{s.id}, 2147483647), axis={ax}, keep_dims=True).to(tl.int64)"
                )
                self.stat_names[s.id] = Operand(f"s{s.id}", "i")
                continue
            self._finish_stat(c, s, self._reduce_text(s.op, a, ax))
            for d, extra in softmax.get(s.id, []):
                mx = self.emit(c, extra, "row", self.row_memo)
                c(f'msafe = tl.where({a} == -float("inf"), 0.0, {a})')
                c(f"s{d.id} = tl.sum(e{d.id} * tl.exp(msafe - {mx.text}), axis={ax}, keep_dims=True)")
                self.stat_names[d.id] = Operand(f"s{d.id}", "f")

    # ---- split: partial statistics, combined per row, then the written pass ---------------------------
    def split_levels(self) -> list[list[Value]]:
        levels = sorted({self.level[s.id] for s in self.stats if s.op != "numel"})
        return [[s for s in self.stats if s.op != "numel" and self.level[s.id] == lv] for lv in levels]

    def _split_sources(self, name: str) -> str:
        """Kernels `{name}_p{l}` (partials of level l), `{name}_c{l}` (combine), `{name}_apply` (write)."""
        self.out_names = {v.id: f"out{i}" for i, v in enumerate(self.k.outputs)}
        levels = self.split_levels()
        all_stats = [st for group in levels for st in group]
        sbufs = [f"sb{st.id}" for st in all_stats]
        loads = [ld.name for ld in self.loads.values()]
        syms = [n for n, _ in self.syms.values()]
        sizes = [self.gname(gi) for gi in range(len(self.groups))]
        strides = [x for ld in self.loads.values() for x in self.load_strides(ld)]
        c = Code()
        for li, group in enumerate(levels):
            parts = [
                x
                for st in group
                for x in ([f"p{st.id}"] + ([f"pi{st.id}"] if st.op in ("argmax", "argmin") else []))
            ]
            # Partials of this level: each program reduces CHUNKS chunks of its rows.
            c.jit_def(f"{name}_p{li}", loads + sbufs + parts + syms + self._split_sizes() + ["SPLIT", "CHUNKS"]
                               + sizes + strides + self._split_meta())  # fmt: skip
            with c.indent():
                self.stat_names = {}
                self.row_memo = {}
                self.single = False
                self.evict = None
                self.stat_buffers = {st.id for g in levels[:li] for st in g}
                (self.header_rows if self.layout == "rows" else self.header_cols)(c)
                c("ps = tl.program_id(1)")
                self._row_prereqs(c, group)
                tile = "[BLOCK_M, BLOCK_R]" if self.layout == "rows" else "[BLOCK_R, BLOCK_I]"
                ax = self.AX
                for st in group:
                    c(f"a{st.id} = tl.full({tile}, {self._neutral(st)}, {self._acc_dtype(st)})")
                    if st.op in ("argmax", "argmin"):
                        c(f"i{st.id} = tl.zeros({tile}, dtype=tl.int32)")
                c("for ci in range(0, CHUNKS):")
                with c.indent():
                    self.after_chunk = []
                    self.chunk_setup(c, "(ps * CHUNKS + ci) * BLOCK_R")
                    self.full_memo = {}
                    for st in group:
                        self._accumulate(c, st)
                rid, rmask = self.rowid, self.rowmask
                for st in group:
                    a = f"a{st.id}"
                    if st.op in ("argmax", "argmin"):
                        red = "tl.max" if st.op == "argmax" else "tl.min"
                        big = "2147483647"
                        c(f"b{st.id} = {red}({a}, axis={ax}, keep_dims=True)")
                        c(
                            f"j{st.id} = tl.min(tl.where({a} == b{st.id}, i{st.id}, {big}), axis={ax}, keep_dims=True)"
                        )
                        c(f"tl.store(p{st.id} + {rid} * SPLIT + ps, b{st.id}, mask={rmask})")
                        c(f"tl.store(pi{st.id} + {rid} * SPLIT + ps, j{st.id}.to(tl.int64), mask={rmask})")
                    else:
                        op = "sum" if st.op == "mean" else st.op
                        c(
                            f"tl.store(p{st.id} + {rid} * SPLIT + ps, {self._reduce_text(op, a, ax)}, mask={rmask})"
                        )
            c()
            # Combine: one program per BLOCK_M rows reads every partial of its rows.
            last = li == len(levels) - 1
            outs = [self.out_names[v.id] for v in self.row_outputs] if last else []
            c.jit_def(f"{name}_c{li}", loads + sbufs + parts + outs + syms + ["NK", "NR", "SPLIT"] + sizes
                               + strides + ["BLOCK_M: tl.constexpr", "BLOCK_S: tl.constexpr"])  # fmt: skip
            with c.indent():
                self.stat_names = {}
                self.row_memo = {}
                self.stat_buffers = {st.id for g in levels[:li] for st in g}
                # Partials are stored per flattened kept index, whatever the layout: combine walks rows.
                layout, self.layout = self.layout, "rows"
                self.header_rows(c)
                c("sp = tl.arange(0, BLOCK_S)[None, :]")
                c("pmask = kmask & (sp < SPLIT)")
                for st in group:
                    neutral = self._neutral(st) if st.op != "mean" else "0.0"
                    c(f"q{st.id} = tl.load(p{st.id} + rk * SPLIT + sp, mask=pmask, other={neutral})")
                    if st.op in ("argmax", "argmin"):
                        red = "tl.max" if st.op == "argmax" else "tl.min"
                        big = "9223372036854775807"
                        c(f"qi{st.id} = tl.load(pi{st.id} + rk * SPLIT + sp, mask=pmask, other={big})")
                        c(f"b{st.id} = {red}(q{st.id}, axis=1, keep_dims=True)")
                        c(
                            f"s{st.id} = tl.min(tl.where(q{st.id} == b{st.id}, qi{st.id}, {big}), axis=1, keep_dims=True)"
                        )
                        self.stat_names[st.id] = Operand(f"s{st.id}", "i")
                    else:
                        op = "sum" if st.op == "mean" else st.op
                        self._finish_stat(c, st, self._reduce_text(op, f"q{st.id}", 1))
                    c(f"tl.store(sb{st.id} + rk, s{st.id}, mask=kmask)")
                if last:
                    for v in self.row_outputs:
                        self.store_row(c, v)
                self.layout = layout
            c()
        if self.full_outputs:
            outs = [self.out_names[v.id] for v in self.full_outputs]
            ostrides = [f"{o}_s{gi}" for o in outs for gi in range(len(self.groups))]
            c.jit_def(f"{name}_apply", loads + sbufs + outs + syms + self._split_sizes() + ["SPLIT", "CHUNKS"]
                               + sizes + strides + ostrides + self._split_meta())  # fmt: skip
            with c.indent():
                self.stat_names = {}
                self.row_memo = {}
                self.stat_buffers = {st.id for st in all_stats}
                self.evict = None
                (self.header_rows if self.layout == "rows" else self.header_cols)(c)
                c("ps = tl.program_id(1)")
                self._row_prereqs(c, self.full_outputs)
                c("for ci in range(0, CHUNKS):")
                with c.indent():
                    self.after_chunk = []
                    self.chunk_setup(c, "(ps * CHUNKS + ci) * BLOCK_R")
                    self.full_memo = {}
                    for v in self.full_outputs:
                        self.store_full(c, v, self.full_memo)
        self.stat_buffers = set()
        return c.text()

    def _split_sizes(self) -> list[str]:
        return ["NK", "NR"] + (["NI"] if self.layout == "cols" else [])

    def _split_meta(self) -> list[str]:
        if self.layout == "rows":
            return ["BLOCK_M: tl.constexpr", "BLOCK_R: tl.constexpr"]
        return ["BLOCK_R: tl.constexpr", "BLOCK_I: tl.constexpr"]

    def _accumulate(self, c: Code, st: Value) -> None:
        m = self._masked(c, st, self.full_memo)
        a = f"a{st.id}"
        if st.op in ("sum", "mean"):
            c(f"{a} = {a} + {m}")
        elif st.op in ("max", "any"):
            c(f"{a} = tl.maximum({a}, {m})")
        elif st.op in ("min", "all"):
            c(f"{a} = tl.minimum({a}, {m})")
        elif st.op == "prod":
            c(f"{a} = {a} * {m}")
        else:
            cmp = ">" if st.op == "argmax" else "<"
            c(f"upd = {m} {cmp} {a}")
            c(f"{a} = tl.where(upd, {m}, {a})")
            c(f"i{st.id} = tl.where(upd, rr, i{st.id})")

    # ---- the launcher ------------------------------------------------------------------------------
    def launcher_source(
        self, name: str, symmap: dict[sympy.Symbol, str]
    ) -> tuple[str, list[Value], list[SymScalar]]:
        """Python launcher; returns (source, tensor arguments in order, runtime scalars in order)."""
        cfg = self.cfg
        c = Code()
        tensors = [ld.value for ld in self.loads.values()] + list(self.shape_only.values())
        tnames = [ld.name for ld in self.loads.values()] + [f"shp{i}" for i in range(len(self.shape_only))]
        snames = [n for n, _ in self.syms.values()]
        from kernelwright.providers.offline.ir import broadcast_shapes

        self.shape_arg: tuple | None = None
        bshape0 = broadcast_shapes(*(t.shape for t in tensors)) if tensors else ()
        needs_shape = not (
            len(bshape0) == self.rank
            and all(sympy.simplify(a - b) == 0 for a, b in zip(bshape0, self.S, strict=True))
        )
        c(f"def _launch_{name}({', '.join(tnames + snames + (['shape'] if needs_shape else []))}):")
        with c.indent():
            bshape = broadcast_shapes(*(t.shape for t in tensors)) if tensors else ()
            exact = len(bshape) == self.rank and all(
                sympy.simplify(a - b) == 0 for a, b in zip(bshape, self.S, strict=True)
            )
            if exact:
                c(f"shape = torch.broadcast_shapes({', '.join(f'{n}.shape' for n in tnames)})")
            else:
                # The tensors read do not span the space (a broadcast constant): the forward passes it.
                self.shape_arg = tuple(self.S)
            dev = tnames[0] if tnames else None
            if dev is None:
                raise RowPlanError("a row kernel with no tensor input")
            groups = [dims for _, dims in self.groups]
            c(f"groups = {groups!r}")
            for gi, dims in enumerate(groups):
                c(f"G{gi} = _prod(shape[d] for d in {dims!r})")
            kept = [groups[gi] for gi in self.kept]
            red = [groups[gi] for gi in self.red]
            c(f"NK = _prod(shape[d] for g in {kept!r} for d in g)")
            c(f"NR = _prod(shape[d] for g in {red!r} for d in g)")
            if self.layout == "cols":
                inner = [groups[gi] for gi in self.inner]
                c(f"NI = _prod(shape[d] for g in {inner!r} for d in g)")
            args = list(tnames[: len(self.loads)])
            for ld in self.loads.values():
                c(f"{ld.name}, st = _group_strides({ld.name}, shape, groups)")
                for gi in ld.groups:
                    c(f"{ld.name}_s{gi} = st[{gi}]")
            outs = []
            for i, v in enumerate(self.k.outputs):
                oshape = self._out_shape(v)
                c(f"out{i} = torch.empty({oshape}, device={dev}.device, dtype={v.dtype})")
                outs.append(f"out{i}")
            size_args = (
                ["NK", "NR"]
                + (["NI"] if self.layout == "cols" else [])
                + [f"G{gi}" for gi in range(len(groups))]
            )
            stride_args = [s for ld in self.loads.values() for s in self.load_strides(ld)]
            if cfg.mode == "split":
                self._launch_split(c, args, outs, snames, stride_args)
            else:
                for v in self.full_outputs:
                    i = self.k.outputs.index(v)
                    c(f"_, st = _group_strides(out{i}, shape, groups)")
                    stride_args += [f"st[{gi}]" for gi in range(len(groups))]
                self._launch_plain(c, args + outs + snames + size_args + stride_args)
            ret = ", ".join(outs)
            c(f"return {ret}," if len(outs) == 1 else f"return {ret}")
        return c.text(), tensors, [s for _, s in self.syms.values()]

    def _out_shape(self, v: Value) -> str:
        if self.vclass(v) == "full":
            return "shape"
        # A per-row value: its dims are the kept dims in order, with size-1 dims where it has them.
        kept_dims = [d for d in range(self.rank) if d not in self.D]
        parts = []
        ki = 0
        nz_kept = [d for d in kept_dims if not is_one(self.S[d])]
        for dim in v.shape:
            if is_one(dim):
                parts.append("1")
                continue
            while ki < len(nz_kept) and sympy.simplify(self.S[nz_kept[ki]] - dim) != 0:
                ki += 1
            if ki >= len(nz_kept):
                raise RowPlanError(f"cannot place per-row output dims {v.shape} in {self.S}")
            parts.append(f"shape[{nz_kept[ki]}]")
            ki += 1
        return "(" + "".join(p + ", " for p in parts) + ")"

    def _launch_plain(self, c: Code, args: list[str]) -> None:
        cfg = self.cfg
        c("npow = triton.next_power_of_2(max(NR, 1))")
        if self.layout == "rows":
            if cfg.mode == "registers":
                c(f"single = npow <= {cfg.RMAX}")
                c(f"BLOCK_R = npow if single else {cfg.BLOCK_R}")
                c(
                    f"BLOCK_M = min(max(1, {cfg.TILE} // BLOCK_R), triton.next_power_of_2(max(NK, 1))) if single else 1"
                )
            else:
                c(f"BLOCK_R = min({cfg.BLOCK_R}, npow)")
                c(f"BLOCK_M = min({cfg.BLOCK_M}, triton.next_power_of_2(max(NK, 1)))")
            if cfg.mode == "registers" and cfg.PERSIST:
                c(
                    f"grid = (max(1, min(triton.cdiv(NK, BLOCK_M), {cfg.PERSIST} * _num_sms({args[0]}.device))),)"
                )
            else:
                c("grid = (triton.cdiv(NK, BLOCK_M),)")
            tile = "BLOCK_M * BLOCK_R"
            meta = "BLOCK_M=BLOCK_M, BLOCK_R=BLOCK_R"
        else:
            c(f"BLOCK_I = min({cfg.BLOCK_I}, triton.next_power_of_2(max(NI, 1)))")
            if cfg.mode == "registers":
                c(f"single = npow * BLOCK_I <= {cfg.TILE * 2}")
                # Not single: the reduced dim is walked in [BLOCK_R, BLOCK_I] tiles of at most TILE elements.
                # BLOCK_R alone (1024 x 128 columns) made a register tile of 131072 elements that took
                # Triton 191 s to compile for an H200 and then ran at 0.07x eager.
                c(f"BLOCK_R = npow if single else max(1, min({cfg.BLOCK_R}, {cfg.TILE} // BLOCK_I))")
            else:
                c(f"BLOCK_R = min({cfg.BLOCK_R}, npow)")
            c("grid = ((NK // max(NI, 1)) * triton.cdiv(NI, BLOCK_I),)")
            tile = "BLOCK_R * BLOCK_I"
            meta = "BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I"
        if cfg.mode == "registers":
            meta += ", SINGLE=single"
        if cfg.num_warps:
            c(f"num_warps = {cfg.num_warps}")
        else:
            c(f"num_warps = {_auto_warps_expr(tile)}")
        c(f"{self.kname}[grid](")
        with c.indent():
            c(", ".join(args) + ",")
            c(f"{meta}, num_warps=num_warps, num_stages={cfg.num_stages},")
        c(")")

    def _launch_split(
        self, c: Code, args: list[str], outs: list[str], snames: list[str], strides: list[str]
    ) -> None:
        cfg = self.cfg
        dev = args[0]
        c(f"BLOCK_R = min({cfg.BLOCK_R}, triton.next_power_of_2(max(NR, 1)))")
        if self.layout == "rows":
            c(f"BLOCK_M = min({cfg.BLOCK_M}, triton.next_power_of_2(max(NK, 1)))")
            c("blocks = triton.cdiv(NK, BLOCK_M)")
            meta = "BLOCK_M=BLOCK_M, BLOCK_R=BLOCK_R"
        else:
            c(f"BLOCK_I = min({cfg.BLOCK_I}, triton.next_power_of_2(max(NI, 1)))")
            c("blocks = (NK // max(NI, 1)) * triton.cdiv(NI, BLOCK_I)")
            meta = "BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I"
        c("nchunks = triton.cdiv(NR, BLOCK_R)")
        c(f"want = max(1, {cfg.WAVES} * _num_sms({dev}.device) // blocks)")
        c("CHUNKS = triton.cdiv(nchunks, max(1, min(nchunks, want, 2048)))")
        c("SPLIT = triton.cdiv(nchunks, CHUNKS)")
        c("BLOCK_S = triton.next_power_of_2(SPLIT)")
        c("BLOCK_MC = max(1, min(triton.next_power_of_2(max(NK, 1)), 4096 // BLOCK_S))")
        levels = self.split_levels()
        sbufs = []
        for group in levels:
            for st in group:
                dt = (
                    "torch.int64"
                    if st.op in ("argmax", "argmin") or self._acc_dtype(st) == "tl.int64"
                    else "torch.float32"
                )
                if st.op in ("any", "all"):
                    dt = "torch.bool"
                sbufs.append(f"sb{st.id}")
                c(f"sb{st.id} = torch.empty((NK,), device={dev}.device, dtype={dt})")
        sizes = [f"G{gi}" for gi in range(len(self.groups))]
        loads = args[: len(self.loads)]
        row_outs = [o for o, v in zip(outs, self.k.outputs, strict=True) if v in self.row_outputs]
        warps = cfg.num_warps or 8
        for li, group in enumerate(levels):
            parts = []
            for st in group:
                dt = "torch.float32" if self._acc_dtype(st) == "tl.float32" else "torch.int64"
                if st.op in ("any", "all"):
                    dt = "torch.int32"
                parts.append(f"p{st.id}")
                c(f"p{st.id} = torch.empty((NK, SPLIT), device={dev}.device, dtype={dt})")
                if st.op in ("argmax", "argmin"):
                    parts.append(f"pi{st.id}")
                    c(f"pi{st.id} = torch.empty((NK, SPLIT), device={dev}.device, dtype=torch.int64)")
            c(f"{self.kname}_p{li}[(blocks, SPLIT)](")
            with c.indent():
                args_p = (
                    loads
                    + sbufs
                    + parts
                    + snames
                    + self._split_sizes()
                    + ["SPLIT", "CHUNKS"]
                    + sizes
                    + strides
                )
                c(", ".join(args_p) + ",")
                c(f"{meta}, num_warps={warps}, num_stages={cfg.num_stages},")
            c(")")
            last = li == len(levels) - 1
            c(f"{self.kname}_c{li}[(triton.cdiv(NK, BLOCK_MC),)](")
            with c.indent():
                c(", ".join(loads + sbufs + parts + (row_outs if last else []) + snames + ["NK", "NR", "SPLIT"] + sizes
                            + strides) + ",")  # fmt: skip
                c("BLOCK_M=BLOCK_MC, BLOCK_S=BLOCK_S, num_warps=4,")
            c(")")
        if self.full_outputs:
            full_outs = []
            ostrides = []
            for o, v in zip(outs, self.k.outputs, strict=True):
                if v in self.full_outputs:
                    full_outs.append(o)
                    c(f"_, st{o} = _group_strides({o}, shape, groups)")
                    ostrides += [f"st{o}[{gi}]" for gi in range(len(self.groups))]
            c(f"{self.kname}_apply[(blocks, SPLIT)](")
            with c.indent():
                args_a = (
                    loads + sbufs + full_outs + snames + self._split_sizes() + ["SPLIT", "CHUNKS"] + sizes
                )
                c(", ".join(args_a + strides + ostrides) + ",")
                c(f"{meta}, num_warps={warps}, num_stages={cfg.num_stages},")
            c(")")
