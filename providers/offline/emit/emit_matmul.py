"""Matmul kernels: C[..., M, N] = A[..., M, K] @ B[..., K, N] with the pointwise epilogue fused in.

Tiled `tl.dot` with fp32 accumulation. Operands are read through their strides, so transposed inputs
(`A.T @ B`, `x @ W.T`) cost no copy. Batch dims along which B does not vary (a Linear applied to a 3-d
input) are folded into M; the others go to the second grid axis. For fp32 inputs `tl.dot` uses
`input_precision="ieee"` unless the config says otherwise ("tf32" only where TF32 is allowed;
"tf32x3" keeps fp32-level accuracy on tensor cores), or split into bf16 parts in registers (PREC=bf16x6:
three parts per operand and six bf16 MMAs, as accurate as fp32; PREC=bf16x3: two parts and three MMAs,
~2^-16 per product, outside strict fp32's table, so offered only where TF32 is allowed). Hopper's bf16
MMAs read either operand layout, so these need no K-major copy.

Designs (`MatmulConfig.mode`):
- "grouped": one program per output tile, tiles ordered in GROUP_M-row bands for L2 reuse;
- "split_k": K split over SPLIT_K programs per tile, partial tiles reduced (and the epilogue applied)
  by a second kernel: more parallelism when M*N is small and K is long;
- "persistent": one program per SM walking the tiles, which trims launch and tail effects; `FLAT=1`
  flattens its tile and K loops into one for Triton's pipeliner (Triton's own persistent matmul tutorial
  does so on Hopper), so the next tile's loads overlap this one's epilogue: 1-6% faster on the bf16 GEMMs
  measured on an H200 (kind_matmul.default_config), the default there. `PER_SM=2` launches two programs
  per SM: without warp specialization (Triton's own hangs with 3.6 on sm_90; `WS` below is Gluon's) a
  program's tensor cores wait while it stores a tile, and a second resident program's MMAs fill that wait
  (the default where two fit an SM: kind_matmul.default_config).

`WS=n` (persistent, `TMA=1`, a plain fp16/bf16 product: no epilogue, one output in the operands' dtype) adds
Hopper's warp-specialized GEMM, written in Gluon (emit_gluon.py; a ring of n stages; `WS_COOP=1` for its
cooperative schedule, 0 for ping-pong), which the launcher runs first on an sm_90 GPU where the operands'
layouts allow, and the Triton kernels otherwise (and in the interpreter, which cannot run Gluon).

`TMA=1` (fp16/bf16 dots, grouped or persistent; one product, or a batch of them along which both A and B
vary, as bmm) adds a twin kernel that reads A and B through Hopper tensor descriptors (TMA loads; 2-D, or
3-D with a batch dim, built on the host by `_kw_tma`). The launcher runs it when the GPU has TMA (sm_90+;
the interpreter too) and both operands have a unit stride and 16-byte aligned base and strides, and the
pointer kernel otherwise (the same epilogue in both). On an
H200 (benchmarks/probes/gemm_variants.py, bf16 x @ W.T + bias, ReLU at 8192 x 4096 x 4096) the descriptor kernel
ran 704 TFLOP/s against the pointer kernel's 546: an `nn.Linear` weight, read K-major, is what pointer
tiles handle worst.

`ALIGN=1` copies an operand whose rows (or, column-major, columns) are not a multiple of 16 elements apart
into a padded buffer first (`_kw_align`): Triton proves a stride's alignment only as divisible by 16, and
with an odd K or N every tile load is otherwise scalar.

`KMAJOR=1` makes both operands K-contiguous before the launch (one transpose copy of an operand that is
not, e.g. a row-major B of `A @ B`; a no-op for `x @ W.T`, whose W already is): Hopper's TF32 tensor-core
MMAs (PREC=tf32x3 / tf32) read both operands K-major, and without the copy they run far slower than with it.

A dual kernel (matmul_fusion.DualKernel: further products sharing A, `extra_anchors`) loads each A tile
once for its `tl.dot`s into one accumulator each, and the epilogue combines them before the single store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy
import torch

from kernelwright.providers.offline.choice.matmul_fusion import DualKernel, fuse_dual_matmuls
from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.emit.emit import TL_DTYPE, Code, ExprContext, Operand, cat_of
from kernelwright.providers.offline.emit.emit_matmul_launch import launcher_source
from kernelwright.providers.offline.emit.kernel_gen import KernelGen
from kernelwright.providers.offline.frontend.ir import SymScalar, Value, aligned, is_one
from kernelwright.providers.offline.kinds.kernel_plan import Load, RowPlanError


@dataclass
class MatmulConfig:
    mode: str = "grouped"  # grouped | split_k | persistent
    BLOCK_M: int = 128
    BLOCK_N: int = 128
    BLOCK_K: int = 32
    GROUP_M: int = 8
    SPLIT_K: int = 4
    num_warps: int = 8
    num_stages: int = 3
    PREC: str = "ieee"  # ieee | tf32x3 | bf16x6 | bf16x3 | tf32
    KMAJOR: int = 0  # 1: copy an operand that is not K-contiguous to a K-contiguous layout first
    TMA: int = 0  # 1: fp16/bf16 operands through tensor descriptors where the GPU and layouts allow
    ALIGN: int = 0  # 1: copy an operand whose row stride is not a multiple of 16 elements into a padded one
    FLAT: int = 0  # persistent: 1 flattens the tile and K loops into one (tl.range flatten) for the pipeliner
    PER_SM: int = 1  # persistent: programs per SM (2: one stores its tile while the other's MMAs run)
    WS: int = 0  # persistent, a plain fp16/bf16 product: >0 runs Hopper's Gluon GEMM first (WS stages)
    WS_COOP: int = 0  # with WS: 1 the cooperative schedule (two warpgroups on a 128 x 256 tile), 0 ping-pong

    def as_dict(self) -> dict[str, int | str]:
        return dict(self.__dict__)


BF16_PARTS = {"bf16x3": 2, "bf16x6": 3}
"""PREC values that split each fp32 operand tile into bf16 parts (x = x0 + x1 [+ x2]) in registers."""
_BF16_TERMS = {
    2: [(1, 0), (0, 1), (0, 0)],  # a1 b0 + a0 b1 + a0 b0: the product to ~2^-16 of |a||b|
    3: [(2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0)],  # every term above ~2^-24: fp32's own precision
}


def plain_product(sched: Schedule, k: Kernel) -> bool:
    """One product with nothing fused after it, stored in its operands' dtype (a bmm, a bare GEMM): what the
    Gluon kernel (`WS`) computes."""
    assert k.anchor is not None
    a, b = k.anchor.args
    return (
        not getattr(k, "extra_anchors", None)
        and len(k.outputs) == 1
        and k.outputs[0] is k.anchor
        and sched.store_dtype(k.anchor) == a.dtype == b.dtype
    )


def _split_bf16(c: Code, x: str, parts: int) -> None:
    """`{x}0`, `{x}1`[, `{x}2`]: bf16 parts of the fp32 tile `x`, each the rounded rest of the one before."""
    c(f"{x}0 = {x}.to(tl.bfloat16)")
    c(f"{x}r = {x} - {x}0.to(tl.float32)")
    c(f"{x}1 = {x}r.to(tl.bfloat16)")
    if parts == 3:
        c(f"{x}2 = ({x}r - {x}1.to(tl.float32)).to(tl.bfloat16)")


class MatmulGen(KernelGen):
    """Generates the tiled `tl.dot` kernel(s) of one matmul kernel, its epilogue and its launcher."""

    cfg: MatmulConfig
    const_shape = "[1, 1]"

    def __init__(self, sched: Schedule, k: Kernel, cfg: MatmulConfig, ctx: ExprContext) -> None:
        self.cfg = cfg
        self.ctx = ctx
        assert k.anchor is not None
        self.anchor = k.anchor
        self.A, self.B = k.anchor.args
        # A dual kernel's other products (same A): accumulators acc2, acc3, ...; B operands c, d, ...
        self.extra = list(getattr(k, "extra_anchors", ()))
        self.Bs = [self.B] + [x.args[1] for x in self.extra]
        self.bp = "bcdefgh"[: len(self.Bs)]
        super().__init__(sched, k)
        self.layout = "matmul"
        self.full_outputs = list(k.outputs)
        self.row_outputs: list[Value] = []

    def _collect(self) -> None:
        seen: set[int] = set()
        stack = list(self.k.outputs) + [v for v in self.k.values if v is not self.anchor]
        while stack:
            v = stack.pop()
            if v.id in seen or v is self.anchor or any(v is x for x in self.extra):
                continue
            seen.add(v.id)
            if self.is_load(v):
                self._add_load(v)
                continue
            for a in v.args:
                if isinstance(a, Value):
                    stack.append(a)
                elif isinstance(a, SymScalar) and id(a) not in self.syms:
                    self.syms[id(a)] = (f"sym{len(self.syms)}", a)

    def _groups(self) -> None:
        r = self.rank
        b_al = aligned(self.B.shape[:-2], r - 2)
        a_al = aligned(self.A.shape[:-2], r - 2)
        classes = []
        for d in range(r):
            if d == r - 1:
                classes.append("N")
            elif d == r - 2:
                classes.append("M")
            else:
                # Batch dims along which B does not change fold into M (one tall matrix).
                classes.append("M" if is_one(b_al[d]) else "B")
        self.a_pattern = tuple(not is_one(a_al[d]) for d in range(r - 2)) + (True, False)
        self.b_pattern = tuple(not is_one(b_al[d]) for d in range(r - 2)) + (False, True)
        patterns = [ld.pattern for ld in self.loads.values()] + [self.a_pattern, self.b_pattern]
        groups: list[tuple[str, list[int]]] = []
        prev = None
        for d in range(r):
            if is_one(self.S[d]) and classes[d] == "B":
                continue
            sig = (classes[d], tuple(p[d] for p in patterns))
            if groups and sig == prev and classes[d] not in ("N",):
                groups[-1][1].append(d)
            else:
                groups.append((classes[d], [d]))
            prev = sig
        self.groups = groups
        for ld in self.loads.values():
            ld.groups = [gi for gi, (_, dims) in enumerate(groups) if ld.pattern[dims[-1]]]
            ld.row = False
        self.bg = [gi for gi, (c, _) in enumerate(groups) if c == "B"]
        self.mg = [gi for gi, (c, _) in enumerate(groups) if c == "M"]
        self.ng = [gi for gi, (c, _) in enumerate(groups) if c == "N"]
        self.a_groups = [gi for gi in self.bg + self.mg if self.a_pattern[groups[gi][1][-1]]]
        self.b_groups = [gi for gi in self.bg if self.b_pattern[groups[gi][1][-1]]]
        self.kept = list(range(len(groups)))
        self.red = []

    def tma_twin(self) -> bool:
        """Whether this kernel gets a tensor-descriptor twin (`TMA=1`; see the module docstring)."""
        half = (torch.float16, torch.bfloat16)
        return (
            bool(self.cfg.TMA)
            and self.cfg.mode in ("grouped", "persistent")
            and len(self.mg) == 1
            and (not self.bg or (len(self.bg) == 1 and self.bg == self.a_groups[:1] == self.b_groups))
            and self.A.dtype in half
            and all(B.dtype == self.A.dtype for B in self.Bs)
        )

    def ws_kernel(self) -> bool:
        """Whether the launcher tries the Gluon GEMM first (`WS`; see the module docstring): a
        plain product (`plain_product`) that reads nothing else."""
        return (
            bool(self.cfg.WS)
            and self.cfg.mode == "persistent"
            and self.tma_twin()
            and plain_product(self.s, self.k)
            and not self.loads
            and not self.syms
        )

    # ---- kernel ------------------------------------------------------------------------------------
    def _index(self, c: Code, pid_expr: str) -> None:
        """Tile coordinates (grouped ordering) and the per-group indices for tile `pid_expr`."""
        c(f"tile = {pid_expr}")
        c("num_pid_m = tl.cdiv(M, BLOCK_M)")
        c("num_pid_n = tl.cdiv(N, BLOCK_N)")
        c("pb = tile // (num_pid_m * num_pid_n)")
        c("t = tile % (num_pid_m * num_pid_n)")
        c("width = GROUP_M * num_pid_n")
        c("first_m = (t // width) * GROUP_M")
        c("gsize = tl.minimum(num_pid_m - first_m, GROUP_M)")
        c("pid_m = first_m + (t % width) % gsize")
        c("pid_n = (t % width) // gsize")
        c("rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
        c("rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
        self.kidx = {}
        self.kidx.update(self._decompose(c, "pb", self.bg, "kb", set(self.bg)))
        mi = self._decompose(c, "rm[:, None]", self.mg, "km", set(self.mg))
        self.kidx.update(mi)
        for gi in self.ng:
            self.kidx[gi] = "rn[None, :]"
        self.ridx = {}

    def _mainloop(self, c: Code, k_lo: str, k_hi: str) -> None:
        single_m = len(self.mg) == 1
        # Rows and columns past the edge wrap (their outputs are masked at the store): rows at M, columns at
        # WN, which is N, or N rounded up to 16 where B's storage holds those columns (an ALIGN copy's
        # padding; _kw_wrap). Each BLOCK-wide run is declared contiguous and aligned only where the wrap is
        # at a multiple of 16: a wrap inside a vector would make a vectorized load straddle it (a misaligned
        # address on a GPU).
        c("rmw = rm % M")
        c("rnw = rn % WN")
        if single_m:
            c("if HINT_M:")
            c("    rmw = tl.max_contiguous(tl.multiple_of(rmw, BLOCK_M), BLOCK_M)")
            c("if HINT_N:")
            c("    rnw = tl.max_contiguous(tl.multiple_of(rnw, BLOCK_N), BLOCK_N)")
        # Offsets of A's rows: the M groups, from the wrapped row index.
        am = self._decompose(c, "rmw", self.mg, "am", set(self.mg))
        a_terms = [f"{self.kidx[gi]} * sa{gi}" for gi in self.a_groups if gi in self.bg]
        a_terms += [f"{am[gi]} * sa{gi}" for gi in self.a_groups if gi in self.mg]
        c(f"a_row = {' + '.join(a_terms) if a_terms else '0'}")
        c("rk = tl.arange(0, BLOCK_K)")
        c(f"a_ptrs = a_ptr + a_row[:, None] + ({k_lo} + rk[None, :]) * sak")
        for p in self.bp:
            b_terms = [f"{self.kidx[gi]} * s{p}{gi}" for gi in self.b_groups]
            c(f"{p}_base = {' + '.join(b_terms) if b_terms else '0'}")
            c(f"{p}_ptrs = {p}_ptr + {p}_base + ({k_lo} + rk[:, None]) * s{p}k + rnw[None, :] * s{p}n")
        for j in range(len(self.bp)):
            c(f"{self._acc(j)} = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        # Whole K steps without a mask (a mask along K keeps tile loads from being vectorized), then the
        # ragged last step, masked, if K is not a multiple of BLOCK_K.
        c(f"k_main = {k_lo} + ({k_hi} - {k_lo}) // BLOCK_K * BLOCK_K")
        c(f"for k0 in range({k_lo}, k_main, BLOCK_K):")
        with c.indent():
            self._k_step(c, None)
        c(f"if k_main < {k_hi}:")
        with c.indent():
            c(f"kmask = (k_main + rk) < {k_hi}")
            self._k_step(c, "kmask")

    def _k_step(self, c: Code, kmask: str | None) -> None:
        """One BLOCK_K step: load the A tile and each B tile (masked along K by `kmask`), multiply-add."""
        a_mask = f", mask={kmask}[None, :], other=0.0" if kmask else ""
        c(f"a = tl.load(a_ptrs{a_mask})")
        bf16_parts = BF16_PARTS.get(self.cfg.PREC, 0)
        fp32 = self.A.dtype == torch.float32 and all(B.dtype == torch.float32 for B in self.Bs)
        if fp32 and bf16_parts:
            _split_bf16(c, "a", bf16_parts)
        for j, p in enumerate(self.bp):
            acc = self._acc(j)
            b_mask = f", mask={kmask}[:, None], other=0.0" if kmask else ""
            c(f"{p} = tl.load({p}_ptrs{b_mask})")
            if fp32 and bf16_parts:
                _split_bf16(c, p, bf16_parts)
                # The bf16 products of this K step meet in a fresh tile (smallest first), added to the
                # fp32 accumulator on the CUDA cores: chained through the MMAs over a long K, six products
                # lost up to 2.4e-4 of the output's RMS on an H200 (K = 524288), this way 1.3e-6.
                terms = _BF16_TERMS[bf16_parts]
                c(f"part = tl.dot(a{terms[0][0]}, {p}{terms[0][1]})")
                for i, k in terms[1:]:
                    c(f"part = tl.dot(a{i}, {p}{k}, part)")
                c(f"{acc} += part")
            elif fp32:
                c(f'{acc} = tl.dot(a, {p}, {acc}, input_precision="{self.cfg.PREC}")')
            else:
                c(f"{acc} = tl.dot(a, {p}, {acc})")
        if kmask is None:
            c("a_ptrs += BLOCK_K * sak")
            for p in self.bp:
                c(f"{p}_ptrs += BLOCK_K * s{p}k")

    def _mainloop_tma(self, c: Code) -> None:
        """The K loop through descriptors: `{X}_T` says a descriptor walks its operand's transpose."""
        c("om = pid_m * BLOCK_M")
        c("on = pid_n * BLOCK_N")

        def box(desc: str, at: str, rows: str, cols: str) -> str:
            """A [rows, cols] tile of `desc` at `at`; a batched product's 3-D box at batch `pb`."""
            if self.bg:
                return f"{desc}.load([pb, {at}]).reshape({rows}, {cols})"
            return f"{desc}.load([{at}])"

        for j in range(len(self.bp)):
            c(f"{self._acc(j)} = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        c("for k0 in range(0, K, BLOCK_K):")
        with c.indent():
            c("if A_T:")
            c(f"    a = {box('a_desc', 'k0, om', 'BLOCK_K', 'BLOCK_M')}.T")
            c("else:")
            c(f"    a = {box('a_desc', 'om, k0', 'BLOCK_M', 'BLOCK_K')}")
            for j, p in enumerate(self.bp):
                c(f"if {p.upper()}_T:")
                c(f"    {p} = {box(f'{p}_desc', 'on, k0', 'BLOCK_N', 'BLOCK_K')}.T")
                c("else:")
                c(f"    {p} = {box(f'{p}_desc', 'k0, on', 'BLOCK_K', 'BLOCK_N')}")
                c(f"{self._acc(j)} = tl.dot(a, {p}, {self._acc(j)})")

    @staticmethod
    def _acc(j: int) -> str:
        return "acc" if j == 0 else f"acc{j + 1}"

    def _epilogue(self, c: Code) -> None:
        c("omask = (rm[:, None] < M) & (rn[None, :] < N)")
        self.fmask_name = "omask"
        self.full_memo = {}
        self.row_memo = {}
        self.stat_names = {}
        self.single = True
        for v in self.k.outputs:
            val = self.emit(c, v, "full")
            name = self.out_names[v.id]
            strides = [f"{name}_s{gi}" for gi in range(len(self.groups))]
            off = self.offset(list(range(len(self.groups))), strides, False)
            c(f"tl.store({name} + {off}, {self._store_cast(val.text, v)}, mask=omask)")

    def emit(self, c: Code, v: Value, scope: str, memo: dict[int, Operand] | None = None) -> Operand:
        j = next((i for i, x in enumerate([self.anchor, *self.extra]) if v is x), None)
        if j is not None:
            acc = self._acc(j)
            if v.dtype in (torch.float16, torch.bfloat16):
                return Operand(f"{acc}.to({TL_DTYPE[v.dtype]}).to(tl.float32)", "f")
            return Operand(acc, "f")
        return super().emit(c, v, scope, memo)

    def _emit_load(self, c: Code, v: Value, cls: str) -> Operand:
        ld = self.loads[v.id]
        off = self.offset(ld.groups, self.load_strides(ld), False)
        # A tensor that varies along N only (a bias) or M only is read as one row or column.
        along = {self.groups[gi][0] for gi in ld.groups}
        mask = "omask"
        if along == {"N"}:
            mask = "rn[None, :] < N"
        elif along and along <= {"M", "B"} and "M" in along:
            mask = "rm[:, None] < M"
        elif along <= {"B"}:
            mask = "None"  # one value per program (per batch, or 0-d): a scalar load, always in bounds
        text = (
            f"tl.load({ld.name} + {off}, mask={mask}, other=0)"
            if mask != "None"
            else f"tl.load({ld.name} + {off})"
        )
        return Operand(self._widen(text, v), cat_of(v.dtype))

    def _ab_strides(self) -> list[str]:
        out = [f"sa{gi}" for gi in self.a_groups] + ["sak"]
        for p in self.bp:
            out += [f"s{p}{gi}" for gi in self.b_groups] + [f"s{p}k", f"s{p}n"]
        return out

    def _ep_params(self) -> list[str]:
        p = [s for ld in self.loads.values() for s in self.load_strides(ld)]
        p += [f"{self.out_names[v.id]}_s{gi}" for v in self.k.outputs for gi in range(len(self.groups))]
        return p

    def _sizes(self) -> list[str]:
        return ["M", "N", "K", "NB", "WN"] + [f"G{gi}" for gi in range(len(self.groups))]

    def kernel_source(self, name: str) -> str:
        self.out_names = {v.id: f"out{i}" for i, v in enumerate(self.k.outputs)}
        loads = [ld.name for ld in self.loads.values()]
        outs = [self.out_names[v.id] for v in self.k.outputs]
        syms = [n for n, _ in self.syms.values()]
        meta = [
            "BLOCK_M: tl.constexpr",
            "BLOCK_N: tl.constexpr",
            "BLOCK_K: tl.constexpr",
            "GROUP_M: tl.constexpr",
            "HINT_M: tl.constexpr",
            "HINT_N: tl.constexpr",
        ]
        c = Code()
        mode = self.cfg.mode
        b_ptrs = [f"{p}_ptr" for p in self.bp]
        if mode == "split_k" and self.extra:
            raise RowPlanError("split_k is not written for dual matmuls")
        if mode == "split_k":
            c.jit_def(f"{name}_partial",
                      ["a_ptr", "b_ptr", "ws"] + self._sizes() + self._ab_strides() + meta + ["SPLIT_K: tl.constexpr"])  # fmt: skip
            with c.indent():
                c("ps = tl.program_id(1)")
                self._index(c, "tl.program_id(0)")
                c("k_per = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K")
                c("k_lo = ps * k_per")
                c("k_hi = tl.minimum(K, k_lo + k_per)")
                self._mainloop(c, "k_lo", "k_hi")
                c("w_off = ((ps * NB + pb) * M + rm[:, None]) * N + rn[None, :]")
                c("tl.store(ws + w_off, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))")
            c()
            c.jit_def(f"{name}_reduce",
                      loads + ["ws"] + outs + syms + self._sizes() + self._ep_params() + meta + ["SPLIT_K: tl.constexpr"])  # fmt: skip
            with c.indent():
                self._index(c, "tl.program_id(0)")
                c("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
                c("for s in range(SPLIT_K):")
                with c.indent():
                    c("acc += tl.load(ws + ((s * NB + pb) * M + rm[:, None]) * N + rn[None, :],")
                    c("               mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)")
                self._epilogue(c)
            return c.text()
        persist = ["NUM_PROGS: tl.constexpr"] if mode == "persistent" else []
        tail = loads + outs + syms + self._sizes()
        self._tiled_kernel(c, name, ["a_ptr", *b_ptrs] + tail + self._ab_strides() + self._ep_params() + meta + persist,
                           lambda: self._mainloop(c, "0", "K"))  # fmt: skip
        if self.tma_twin():
            self.ctx.use("_kw_tma")
            descs = ["a_desc"] + [f"{p}_desc" for p in self.bp]
            flags = [f"{x.upper()}_T: tl.constexpr" for x in ["a", *self.bp]]
            c()
            self._tiled_kernel(c, f"{name}_tma", descs + tail + self._ep_params() + meta + flags + persist,
                               lambda: self._mainloop_tma(c))  # fmt: skip
        return c.text()

    def _tiled_kernel(self, c: Code, name: str, params: list[str], mainloop: Any) -> None:
        """A grouped (one program per tile) or persistent (one per SM) kernel around `mainloop`."""
        c.jit_def(name, params)
        with c.indent():
            if self.cfg.mode == "persistent":
                c("total = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) * NB")
                if self.cfg.FLAT:
                    # one loop over (tile, K step) for Triton's software pipeliner: the next tile's first
                    # loads are issued under this tile's last MMAs and epilogue, as in a CUTLASS mainloop
                    c("for tile_id in tl.range(tl.program_id(0), total, NUM_PROGS, flatten=True):")
                else:
                    c("for tile_id in range(tl.program_id(0), total, NUM_PROGS):")
                with c.indent():
                    self._index(c, "tile_id")
                    mainloop()
                    self._epilogue(c)
            else:
                self._index(c, "tl.program_id(0)")
                mainloop()
                self._epilogue(c)

    # ---- launcher ----------------------------------------------------------------------------------
    def launcher_source(
        self, name: str, symmap: dict[sympy.Symbol, str]
    ) -> tuple[str, list[Value], list[SymScalar]]:
        return launcher_source(self, name, symmap)


__all__ = [
    "DualKernel",
    "MatmulConfig",
    "MatmulGen",
    "RowPlanError",
    "plain_product",
    "Load",
    "ExprContext",
    "fuse_dual_matmuls",
]
