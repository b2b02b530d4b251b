"""The epilogue of a stage kernel: pointwise ops, channel reductions and normalisation in registers, and
the sink that ends the stage (a store, a store with statistics partials, or atomics of a spatial
reduction).

Pointwise ops are written by emit.pw_expr, the one table of Triton forms every offline writer uses.
"""

from __future__ import annotations

import torch

from kernelwright.providers.offline.emit.emit import Code, ExprContext, Operand, pw_expr
from kernelwright.providers.offline.families.conv.conv_ir import Op
from kernelwright.providers.offline.families.conv.conv_mainloop import Coords
from kernelwright.providers.offline.families.conv.conv_stages import (
    ConvEmitError,
    Stage,
    StagedPlan,
)
from kernelwright.providers.offline.operators import BOOLEAN


def _bshape(a: str, b: str) -> str:
    """The kind of a value computed from values of kinds `a` and `b` (broadcast)."""
    rows = a in "cf" or b in "cf"
    cols = a in "rf" or b in "rf"
    return "f" if rows and cols else ("c" if rows else ("r" if cols else "s"))


class EpilogueWriter:
    """Writes a stage's ops on values in registers and the stage's sink.

    `kinds` maps an op to the shape of its value in the tile: "s" a scalar, "r" one per channel
    ([1, BLOCK_N]), "c" one per pixel ([BLOCK_M, 1]), "f" the full tile."""

    def __init__(self, sp: StagedPlan) -> None:
        self.sp = sp
        self.plan = sp.plan
        self.bools: set[int] = set()  # ops whose value is boolean (comparisons)
        self.tile_shape = "(BLOCK_M, BLOCK_N)"  # the value tile of the stage being written
        self.helpers = ExprContext()  # the @triton.jit helpers (emit.HELPERS) the ops call

    def ops(self, k: Code, st: Stage, ops: list[Op], co: Coords, kinds: dict[int, str]) -> None:
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
                x = Operand(self.float_of(op.args[0], kinds), "f")
                consts = [Operand(f"k{op.id}_{i}", "f") for i in range(len(op.consts))]
                k(f"{v} = " + pw_expr(fn, [x, *consts], torch.float32, {}, self.helpers).text)
                kinds[op.id] = kinds[op.args[0]]
            elif op.kind == "binary":
                fn = op.attrs["fn"]
                a, b = op.args
                if fn in BOOLEAN:
                    # booleans compare as they are; a boolean against a float is widened
                    args = [Operand(f"v{i}", "b" if i in self.bools else "f") for i in (a, b)]
                    self.bools.add(op.id)
                else:
                    args = [Operand(self.float_of(i, kinds), "f") for i in (a, b)]
                k(f"{v} = " + pw_expr(fn, args, torch.float32, {}, self.helpers).text)
                kinds[op.id] = _bshape(kinds[a], kinds[b])
            elif op.kind == "where":
                cnd, a, b = op.args
                cexpr = f"v{cnd}" if cnd in self.bools else f"(v{cnd} != 0.0)"
                k(f"{v} = tl.where({cexpr}, {self.float_of(a, kinds)}, {self.float_of(b, kinds)})")
                kinds[op.id] = _bshape(_bshape(kinds[cnd], kinds[a]), kinds[b])
            elif op.kind == "norm":
                a = op.args[0]
                k("gi = (c // CG)[None, :]")
                k("mu = tl.load(mean_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
                k("rs = tl.load(rstd_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
                k(f"{v} = ({self.full_of(a, kinds)} - mu) * rs")
                kinds[op.id] = "f"
            elif op.kind == "creduce":
                a = op.args[0]
                fn = op.attrs["fn"]
                if kinds[a] == "c":
                    k(f"{v} = v{a}")
                else:
                    full = self.full_of(a, kinds)
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

    def float_of(self, op_id: int, kinds: dict[int, str]) -> str:
        if op_id in self.bools:
            return f"v{op_id}.to(tl.float32)"
        return f"v{op_id}"

    def full_of(self, op_id: int, kinds: dict[int, str]) -> str:
        kind = kinds[op_id]
        v = self.float_of(op_id, kinds)
        if kind == "f":
            return v
        return f"({v} + tl.zeros({self.tile_shape}, dtype=tl.float32))"

    def sink(self, k: Code, st: Stage, kinds: dict[int, str], *, per_sample: bool, phase: bool) -> None:
        v = f"v{st.value}"
        kind = kinds[st.value]
        if kind in ("s", "r"):  # cannot happen for values of the convolution; keep the tile shape honest
            v = self.full_of(st.value, kinds)
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
        elif self.sp.window_split(st):
            # window positions split across programs: each combines its pooled tile into the buffer
            # the launcher filled with -inf (an fp32 buffer: atomic max is exact in any order)
            if kind == "f":
                ptrs, mask = (
                    f"out_ptr + nr64 * son + (c * soc)[None, :] + ({sp})[:, None]",
                    "row_ok[:, None] & col_ok[None, :]",
                )
            else:
                ptrs, mask = f"out_ptr + nr64 * son + ({sp})[:, None]", "row_ok[:, None] & (pid_n == 0)"
            k("if WSPLIT:")
            with k.indent():
                k(f"tl.atomic_max({ptrs}, {v}, mask={mask})")
            k("else:")
            with k.indent():
                k(f"tl.store({ptrs}, {v}.to(out_ptr.dtype.element_ty), mask={mask})")
        elif kind == "f":
            k(
                f"tl.store(out_ptr + nr64 * son + (c * soc)[None, :] + ({sp})[:, None], "
                f"{v}.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])"
            )
        else:
            k(f"tl.store(out_ptr + nr64 * son + ({sp})[:, None], {v}.to(out_ptr.dtype.element_ty), "
              "mask=row_ok[:, None] & (pid_n == 0))")  # fmt: skip
        if st.sink in ("stats", "stats_only"):
            full = self.full_of(st.value, kinds) if kind == "f" else v
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
