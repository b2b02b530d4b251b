"""Pointwise kernels: a fused chain of elementwise ops (with broadcasting) written to one or more outputs.

The output space is walked with one flat index; dims are merged into groups where every tensor
broadcasts the same way, so the common case (tensors of one shape) is a plain `base + idx * stride`.
Designs (`PointwiseConfig.mode`):
- "flat": one BLOCK of elements per program;
- "grid_stride": a fixed number of programs (WAVES per SM) each walking many blocks, which trims
  launch and tail overhead on very large tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.emit.emit import Code, ExprContext, Operand, sizes_product
from kernelwright.providers.offline.emit.kernel_gen import KernelGen
from kernelwright.providers.offline.frontend.ir import SymScalar, Value, broadcast_shapes, simplified


@dataclass
class PointwiseConfig:
    mode: str = "flat"  # flat | grid_stride
    BLOCK: int = 2048
    num_warps: int = 8
    WAVES: int = 8

    def as_dict(self) -> dict[str, int | str]:
        return dict(self.__dict__)


class PointwiseGen(KernelGen):
    """Generates the flat-index kernel of one pointwise kernel and its launcher."""

    cfg: PointwiseConfig
    const_shape = "[1]"
    launch_device = True

    def __init__(self, sched: Schedule, k: Kernel, cfg: PointwiseConfig, ctx: ExprContext) -> None:
        self.cfg = cfg
        self.ctx = ctx
        super().__init__(sched, k)
        for ld in self.loads.values():
            ld.row = False
        self.layout = "flat"
        self.full_outputs = list(k.outputs)
        self.row_outputs: list[Value] = []

    def kernel_source(self, name: str) -> str:
        c = Code()
        self.out_names = {v.id: f"out{i}" for i, v in enumerate(self.k.outputs)}
        params = [ld.name for ld in self.loads.values()] + [self.out_names[v.id] for v in self.k.outputs]
        params += (
            [n for n, _ in self.syms.values()] + ["N"] + [self.gname(gi) for gi in range(len(self.groups))]
        )
        for ld in self.loads.values():
            if not self.dense(ld):
                params += self.load_strides(ld)
        if self.cfg.mode == "grid_stride":
            params += ["ITERS"]  # a runtime loop bound: no unrolling, no recompiling per size
        params += ["BLOCK: tl.constexpr"]
        c.jit_def(name, params)
        with c.indent():
            self.row_memo = {}
            self.stat_names = {}
            self.single = True
            if self.cfg.mode == "grid_stride":
                c("for it in range(ITERS):")
                with c.indent():
                    c("idx = (it * tl.num_programs(0) + tl.program_id(0)) * BLOCK + tl.arange(0, BLOCK)")
                    self._body(c)
            else:
                c("idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
                self._body(c)
        return c.text()

    def dense(self, ld: object) -> bool:
        """A tensor of the output's full shape: read at the flat index (made contiguous if needed)."""
        return len(getattr(ld, "groups", [])) == len(self.groups) and len(self.groups) > 1

    def _needed_groups(self) -> set[int]:
        need: set[int] = set()
        for ld in self.loads.values():
            if not self.dense(ld):
                need |= set(ld.groups)
        for v in self._iotas():
            d = v.attrs["dim"] + (self.rank - v.rank)
            for gi, (_, dims) in enumerate(self.groups):
                if d in dims:
                    need.add(gi)
        return need

    def _body(self, c: Code) -> None:
        c("mask = idx < N")
        self.rowmask = "mask"
        self.full_memo: dict[int, Operand] = {}
        self.kidx = self._decompose(c, "idx", list(range(len(self.groups))), "k", self._needed_groups())
        self.ridx = {}
        for v in self.k.outputs:
            val = self.emit(c, v, "full")
            name = self.out_names[v.id]
            # Outputs are allocated contiguous: the flat index is the offset.
            off = "idx"
            c(f"tl.store({name} + {off}, {self._store_cast(val.text, v)}, mask=mask)")

    def _emit_load(self, c: Code, v: Value, cls: str) -> Operand:
        from kernelwright.providers.offline.emit.emit import cat_of

        ld = self.loads[v.id]
        if not ld.groups:
            # The same value everywhere (a 0-d or all-broadcast tensor): one unmasked scalar load.
            return Operand(self._widen(f"tl.load({ld.name})", v), cat_of(v.dtype))
        off = "idx" if self.dense(ld) else self.offset(ld.groups, self.load_strides(ld), False)
        text = f"tl.load({ld.name} + {off}, mask=mask, other=0)"
        return Operand(self._widen(text, v), cat_of(v.dtype))

    def launcher_source(
        self, name: str, symmap: dict[sympy.Symbol, str]
    ) -> tuple[str, list[Value], list[SymScalar]]:
        cfg = self.cfg
        c = Code()
        tensors = [ld.value for ld in self.loads.values()]
        tnames = [ld.name for ld in self.loads.values()]
        snames = [n for n, _ in self.syms.values()]
        bshape = broadcast_shapes(*(t.shape for t in tensors)) if tensors else ()
        exact = (
            bool(tnames)
            and len(bshape) == self.rank
            and all(simplified(a - b) == 0 for a, b in zip(bshape, self.S, strict=True))
        )
        # When the tensors read do not span the output (a broadcast constant), the forward passes the shape.
        self.shape_arg = None if exact else tuple(self.S)
        extra = ["device"] + ([] if exact else ["shape"])
        c(f"def _launch_{name}({', '.join(tnames + snames + extra)}):")
        with c.indent():
            if exact:
                c(f"shape = _bshapes({', '.join(f'{n}.shape' for n in tnames)})")
            groups = [dims for _, dims in self.groups]
            c(f"groups = {groups!r}")
            for gi, dims in enumerate(groups):
                c(f"G{gi} = {sizes_product([dims])}")
            c("N = _prod(shape)")
            stride_args = []
            for ld in self.loads.values():
                if self.dense(ld):
                    c(f"{ld.name} = {ld.name} if {ld.name}.is_contiguous() else {ld.name}.contiguous()")
                    continue
                c(f"{ld.name}, st{ld.name} = _group_strides({ld.name}, shape, groups)")
                stride_args += [f"st{ld.name}[{gi}]" for gi in ld.groups]
            outs = []
            for i, v in enumerate(self.k.outputs):
                c(f"out{i} = torch.empty(shape, device=device, dtype={self.s.store_dtype(v)})")
                outs.append(f"out{i}")
            c(f"BLOCK = min({cfg.BLOCK}, _np2(max(N, 1)))")
            c("nblocks = _cdiv(N, BLOCK)")
            args = tnames + outs + snames + ["N"] + [f"G{gi}" for gi in range(len(groups))] + stride_args
            if cfg.mode == "grid_stride":
                c(f"programs = max(1, min(nblocks, {cfg.WAVES} * _num_sms(device)))")
                args.append("_cdiv(nblocks, programs)")
                meta = "BLOCK=BLOCK"
                grid = "(programs,)"
            else:
                meta = "BLOCK=BLOCK"
                grid = "(nblocks,)"
            c(f"_kw_launch({name}, {grid},")
            with c.indent():
                c(", ".join(args) + ",")
                c(f"{meta}, num_warps={cfg.num_warps},")
            c(")")
            ret = ", ".join(outs)
            c(f"return {ret}," if len(outs) == 1 else f"return {ret}")
        return c.text(), tensors, [s for _, s in self.syms.values()]
