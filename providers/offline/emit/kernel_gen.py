"""What the three generators (rows, matmul, pointwise) share: indices, offsets and expressions.

`KernelGen` turns a kernel's values into Triton expressions over its broadcast groups: a group's index
from a flat index (`_decompose`), a tensor's element offset (`offset`), a value's expression with its
operands emitted first (`emit`), and `generate`, which returns the kernel and launcher sources. Each
generator adds how it loads a tensor (`_emit_load`), its kernel and its launcher; the row generator also
its statistics and scans (`_stat_value`, `_scan_value`).
"""

from __future__ import annotations

import re
from typing import Any

import sympy
import torch

from kernelwright.providers.offline.emit.emit import (
    TL_DTYPE,
    Code,
    ExprContext,
    Operand,
    as_float,
    cat_of,
    literal,
    pw_expr,
)
from kernelwright.providers.offline.frontend.ir import SymScalar, Value, is_one
from kernelwright.providers.offline.kinds.kernel_plan import KernelPlan, Load, RowPlanError


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


class KernelGen(KernelPlan):
    """Code-writing helpers over a kernel plan; subclasses set `cfg` and `ctx` and write the kernel."""

    const_shape = "[1, 1]"
    launch_device = False
    """The launcher takes the device as an argument after the scalars (pointwise: it may read no tensor)."""
    cfg: Any
    ctx: ExprContext
    kname: str
    const_sizes: set[str]
    kidx: dict[int, str]
    ridx: dict[int, str]
    row_memo: dict[int, Operand]
    full_memo: dict[int, Operand]
    stat_names: dict[int, Operand]
    out_names: dict[int, str]
    single: bool
    shape_arg: tuple | None

    def generate(
        self, name: str, symmap: dict[sympy.Symbol, str]
    ) -> tuple[str, str, list[Value], list[SymScalar]]:
        """(kernel source, launcher source, launcher tensor arguments, launcher scalar arguments)."""
        self.kname = name
        self.const_sizes: set[str] = set()
        ksrc = self.kernel_source(name)
        if getattr(self.cfg, "STATIC", 0):  # matmul and pointwise configs have no STATIC
            # The row length, the group sizes and every stride: address arithmetic and masks fold.
            self.const_sizes |= set(re.findall(r"^    (NR|G\d+|\w+_s\d+),$", ksrc, flags=re.M))
        ksrc = constexpr_sizes(ksrc, self.const_sizes)
        lsrc, tensors, syms = self.launcher_source(name, symmap)
        return ksrc, lsrc, tensors, syms

    def kernel_source(self, name: str) -> str:
        raise NotImplementedError

    def launcher_source(
        self, name: str, symmap: dict[sympy.Symbol, str]
    ) -> tuple[str, list[Value], list[SymScalar]]:
        raise NotImplementedError

    def vclass(self, v: Value) -> str:
        """ "full" (one value per element) or "row" (one per row); every value is full but in row kernels."""
        return "full"

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

    def load_strides(self, ld: Load) -> list[str]:
        return [f"{ld.name}_s{gi}" for gi in ld.groups]

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
        raise NotImplementedError

    def _stat_value(self, c: Code, s: Value) -> Operand:
        raise RowPlanError(f"cannot compute reduce {s.op} in this kernel")

    def _scan_value(self, c: Code, v: Value) -> Operand:
        raise RowPlanError(f"cannot compute scan {v.op} in this kernel")

    def _widen(self, text: str, v: Value) -> str:
        """A load of `v` as the kernels compute with it: half-precision floats widened to fp32, whether the
        value is half precision itself or stored that way (Schedule.stored)."""
        dt = self.s.store_dtype(v)
        return f"{text}.to(tl.float32)" if cat_of(dt) == "f" and dt != torch.float32 else text

    def _store_cast(self, text: str, v: Value) -> str:
        """A value as written to `v`'s memory: narrowed to its stored dtype where that is not fp32."""
        dt = self.s.store_dtype(v)
        return f"({text}).to({TL_DTYPE[dt]})" if cat_of(dt) == "f" and dt != torch.float32 else text
