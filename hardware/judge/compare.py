"""Checking a candidate's outputs against the reference's: one tolerance table, one report format.

Runs inside the evaluation worker (it imports torch, never triton). The checks, in order:
1. structure: the same nesting of tuples and lists (a tensor is not a one-element list), the same number
   of outputs, tensors where the reference has tensors, same shape, dtype and device (`shape_mismatch`);
2. values: |out - anchor| <= atol_eff + rtol * |anchor| (+ the reference-error allowance below)
   elementwise, NaN only where the reference has NaN, +-inf only where the reference has the same
   infinity (`mismatch`).

Tolerance table (rtol, atol) per dtype and precision mode, after FlagGems' `assert_close`:

    dtype      strict          tf32            reduced
    float64    1e-7, 1e-7      1e-7, 1e-7      1e-7, 1e-7
    float32    1e-4, 1e-5      1e-3, 5e-3      1.6e-2, 1e-2
    float16    1e-3, 1e-3      1e-3, 1e-3      1e-3, 1e-3
    bfloat16   1.6e-2, 1e-2    1.6e-2, 1e-2    1.6e-2, 1e-2
    integer/bool: exact

atol grows with the size of the numbers: atol_eff = atol * max(1, RMS of the finite reference values).
A reduction over K random terms has outputs (and rounding differences) that grow like sqrt(K), and the
output RMS grows with them, so a K=4096 fp32 matmul gets atol_eff ~ 6e-4 while a TF32 one (errors
~4e-4 of the output scale, tails ~2e-3) still fails in strict mode. Elementwise ops with O(1) outputs
keep the table's atol. The scale used is reported with the tolerance.

The reference's own rounding error (float64-anchored comparison). The output's size is not the only
measure of how much rounding a computation incurs: tanh(sum over 4096 terms) has outputs of size <= 1,
yet two fp32 summation orders differ by ~1.5e-5, over strict's atol of 1e-5. So, in strict precision and
for float32 (and complex64) outputs, the worker also runs the reference in float64 (a copy of the model
with the same parameters, inputs upcast) and passes that output as `ref64`. Then, per element:
- the anchor is ref64 rounded to the output dtype (the best answer an output of that dtype can hold);
- e_i = |ref - anchor_i| is the fp32 reference's own error there, and the reference error scale
  E = the 99.9th percentile (nearest rank: an observed value; the maximum when there are <= 1000
  elements) of e_i over the output;
- the element passes when |out - anchor| <= atol_eff + rtol * |anchor| + C * max(E, e_i), C being
  ALLOWANCE_FACTOR = 16.
Why a percentile: a handful of ill-conditioned elements (cancellation) must not lend their large error
to every other element; they get their own e_i instead. Why C = 16: the fp32 reference is one valid
rounding of the computation, but not the worst: a kernel that accumulates a 4096-term sum one term at a
time (plain fp32, no shortcut) lands up to ~10 E from the exact result where torch's blocked sum lands
within ~1 E, while TF32 on a K=4096 matmul is ~1000 E off and still fails strict (70% of the elements,
the worst ~25x over its bound; ~65x against the fp32 reference alone).
Since C > 1 + rtol, anything that passes against the fp32 reference alone also passes this rule
(|out - anchor| <= |out - ref| + e_i): the allowance only ever widens the check. Elements where the
fp32 and fp64 references disagree beyond the dtype's loosest row (code that depends on the dtype, e.g.
torch.finfo(x.dtype).min, or a value fp32 cannot compute at all) and non-finite ones are judged
against the fp32 reference as before, without allowance, and left out of E. The tolerance record
carries E (`reference_error`) and C (`allowance_factor`); a report names E, where the reference's
error is largest, and how many elements were judged against the fp32 reference instead.
In tf32 and reduced precision the reference itself runs with TF32, so its error measures TF32, not the
computation; those rows are already far wider than any fp32 reordering, and no ref64 is used. Float64
outputs are their own float64 reference.

Half-precision outputs (float16, bfloat16; every precision mode). The reference runs op by op in the
half dtype and rounds after each op, so after a chain (a norm, a weight, an activation, a gate) it can be
several of its ulps from the exact value while the table's row is about two: a kernel that keeps fp32
between ops is closer to the exact value and can be rejected against the half reference alone. So these
outputs are float64-anchored too, with C = 1 + rtol and no E floor: an element passes when
|out - anchor| <= atol_eff + rtol * |anchor| + (1 + rtol) * e_i, i.e. (by the triangle inequality)
whenever it is within the table of the half reference, and also when it is within the table of the exact
value rounded to the dtype; nothing much wider. The two references "agree" (anchor) within HALF_ANCHOR_BAND (rtol 1/8, atol
1/16 x scale: sixteen bf16 ulps), beyond which they are not the same computation.

Buffers a train-mode forward updates (running statistics) are compared by the same rules in strict's row,
anchored on the float64 run's buffers where it ran (hardware.judge.session._check_buffers).

max_abs_error / max_rel_error are taken over elements finite in both outputs, against the anchor (rel:
|out - anchor| / max(|anchor|, atol_eff)); NaN/inf mismatches are counted in `mismatched` and named in
the report.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel, Field

from kernelwright.hardware.judge.output_structure import (
    describe,
    dtype_name,
    flatten_outputs,
    structure_mismatch,
)
from kernelwright.hardware.result import PrecisionMode, Tolerance

# (rtol, atol) per dtype for each precision mode; see the module docstring.
_STRICT: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
}
TOLERANCE_TABLE: dict[PrecisionMode, dict[torch.dtype, tuple[float, float]]] = {
    "strict": _STRICT,
    "tf32": {**_STRICT, torch.float32: (1e-3, 5e-3)},
    "reduced": {**_STRICT, torch.float32: (1.6e-2, 1e-2)},
}
_EXACT = (0.0, 0.0)  # integers and bool must match exactly
_SHOW_MISMATCHES = 5

ALLOWANCE_FACTOR = 16.0
"""C: an element may differ from the float64 anchor by C times the reference's own error scale."""
REFERENCE_ERROR_QUANTILE = 0.999
"""E is this (nearest-rank) quantile of the fp32 reference's per-element error; see the docstring."""
_FLOAT64_ANCHORED = (torch.float32, torch.complex64)
_HALF = (torch.float16, torch.bfloat16)
HALF_ANCHOR_BAND = (0.125, 0.0625)
"""(rtol, atol x scale) within which a half-precision reference and the float64 one count as the same
computation (see the module docstring)."""


def uses_float64_reference(dtype: torch.dtype, precision: PrecisionMode) -> bool:
    """Whether outputs of `dtype` under `precision` are compared against a float64 run of the reference."""
    return (precision == "strict" and dtype in _FLOAT64_ANCHORED) or dtype in _HALF


def needs_float64_reference(ref: Any, precision: PrecisionMode) -> bool:
    """Whether any tensor in the reference's output (a forward's result) would use a float64 reference."""
    return any(
        isinstance(t, torch.Tensor) and uses_float64_reference(t.dtype, precision)
        for t in flatten_outputs(ref)
    )


def tolerance_for(
    dtype: torch.dtype,
    precision: PrecisionMode = "strict",
    *,
    rtol: float | None = None,
    atol: float | None = None,
    scale: float = 1.0,
) -> Tolerance:
    """The table row for `dtype` under `precision`, with optional overrides and the atol scale."""
    row = TOLERANCE_TABLE[precision].get(dtype)
    if row is None:
        row = (1e-6, 1e-6) if dtype.is_complex else _EXACT
    return Tolerance(
        dtype=dtype_name(dtype),
        rtol=row[0] if rtol is None else rtol,
        atol=row[1] if atol is None else atol,
        precision=precision,
        atol_scale=scale,
    )


def _loosest_row(dtype: torch.dtype) -> tuple[float, float]:
    """The widest (rtol, atol) any precision mode gives `dtype`: the fp32/fp64 consistency limit."""
    rows = [table[dtype] for table in TOLERANCE_TABLE.values() if dtype in table]
    if not rows:
        return (1e-6, 1e-6) if dtype.is_complex else _EXACT
    return max(r[0] for r in rows), max(r[1] for r in rows)


def output_scale(ref: torch.Tensor, *, chunk: int = 1 << 22) -> float:
    """max(1, RMS of the finite values of `ref`): the factor atol is multiplied by (summed in float64,
    `chunk` elements at a time)."""
    if not (ref.is_floating_point() or ref.is_complex()) or ref.numel() == 0:
        return 1.0
    flat = ref.detach().reshape(-1)
    wide = torch.complex128 if ref.is_complex() else torch.float64
    total, count = 0.0, 0
    for start in range(0, flat.numel(), chunk):
        values = flat[start : start + chunk].to(wide).abs()
        finite = torch.isfinite(values)
        total += float(
            torch.where(finite, values, torch.zeros((), dtype=values.dtype, device=values.device))
            .square()
            .sum()
        )
        count += int(finite.sum())
    if count == 0:
        return 1.0
    return max(1.0, math.sqrt(total / count))


class Comparison(BaseModel):
    """The outcome of comparing one candidate output structure with the reference's."""

    ok: bool
    error_kind: str | None = None  # "shape_mismatch" | "mismatch"
    report: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    mismatched: int = 0
    tolerances: list[Tolerance] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    """How each output was anchored: the float64 reference's error scale and allowance, or why not."""


def _index(flat: int, shape: Sequence[int]) -> list[int]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return idx[::-1]


def _fmt(x: float) -> str:
    return f"{x:.6g}"


CHUNK_ELEMENTS = 1 << 22
"""Elements compared at a time: the comparison's float64 temporaries are bounded by a few chunks, not by
the output (a 6.4 GB output would otherwise need tens of GB more while it is judged)."""


@dataclass
class _Pieces:
    """Flat views of one output and its references, handed out a chunk at a time in float64."""

    out: torch.Tensor
    ref: torch.Tensor
    ref64: torch.Tensor | None
    wide: torch.dtype
    chunk: int

    def __iter__(self) -> Iterator[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor | None]]:
        n = self.ref.numel()
        for start in range(0, n, self.chunk):
            end = min(n, start + self.chunk)
            a = self.out[start:end].to(self.wide, copy=True)  # a private copy: `out` may be a lent buffer
            b = self.ref[start:end].to(self.wide)
            r = None
            if self.ref64 is not None:
                # Rounded to the output dtype: the best answer an output of that dtype can hold.
                r = self.ref64[start:end].to(self.ref.device).to(self.ref.dtype).to(self.wide)
            yield start, a, b, r


def _real(t: torch.Tensor) -> torch.Tensor:
    return t.real if t.is_complex() else t


class _TopK:
    """The k largest values seen so far over chunks (for a nearest-rank quantile of a large tensor)."""

    def __init__(self, k: int) -> None:
        self.k, self.values = k, torch.empty(0, dtype=torch.float64)

    def add(self, chunk: torch.Tensor) -> None:
        top = chunk.topk(min(self.k, chunk.numel())).values
        both = torch.cat([self.values.to(top.device), top])
        self.values = both.topk(min(self.k, both.numel())).values

    def kth(self, k: int) -> float:
        return float(self.values[k - 1]) if 0 < k <= self.values.numel() else 0.0


def compare_tensor(
    out: torch.Tensor,
    ref: torch.Tensor,
    precision: PrecisionMode = "strict",
    *,
    rtol: float | None = None,
    atol: float | None = None,
    label: str = "output",
    ref64: torch.Tensor | None = None,
    allowance_factor: float = ALLOWANCE_FACTOR,
    chunk: int = CHUNK_ELEMENTS,
) -> Comparison:
    """Values of one output tensor against the reference tensor of the same shape and dtype.

    `ref64`, the same output from a float64 run of the reference, anchors the comparison and adds the
    reference-error allowance where `uses_float64_reference(ref.dtype, precision)`; it is ignored
    otherwise (see the module docstring). The report says how many elements fail, where (index) and by
    how much, NaN/inf included, in the style of Liger's assert_verbose_allclose. Works `chunk` elements
    at a time: the same verdict and report for any chunk size.
    """
    scale = output_scale(ref, chunk=chunk)
    tol = tolerance_for(ref.dtype, precision, rtol=rtol, atol=atol, scale=scale)
    n = ref.numel()
    if n == 0:
        return Comparison(ok=True, tolerances=[tol])
    wide = torch.complex128 if ref.is_complex() else torch.float64
    notes: list[str] = []
    anchor_text = ""
    use64 = ref64 is not None and uses_float64_reference(ref.dtype, precision)
    if use64 and ref64 is not None and ref64.shape != ref.shape:
        notes.append(f"{label}: float64 reference has shape {list(ref64.shape)}; compared to float32 alone")
        use64 = False
    pieces = _Pieces(out.detach().reshape(-1), ref.detach().reshape(-1),
                     ref64.detach().reshape(-1) if use64 and ref64 is not None else None, wide, chunk)  # fmt: skip
    half = ref.dtype in _HALF
    anchoring = _Anchoring(scale, *(HALF_ANCHOR_BAND if half else _loosest_row(ref.dtype)))

    err = 0.0
    if use64 and half:
        # C = 1 + rtol and no E floor: within the table of the half reference, or of the exact value.
        allowance_factor = 1.0 + tol.rtol
        anchor_text = (
            f"an element passes within the table of the {dtype_name(ref.dtype)} reference or of the float64 "
            f"reference rounded to {dtype_name(ref.dtype)}"
        )
        tol.reference_error, tol.allowance_factor = 0.0, allowance_factor
        notes.append(f"{label}: float64-anchored; {anchor_text}")
    elif use64:
        err, anchor_text = _reference_error(pieces, anchoring, list(ref.shape), allowance_factor)
        tol.reference_error, tol.allowance_factor = err, allowance_factor
        notes.append(f"{label}: float64-anchored; {anchor_text}")

    tally = _tally(pieces, anchoring, tol.atol * scale, tol.rtol, err, allowance_factor)
    if tally.n_bad == 0:
        return Comparison(
            ok=True, max_abs_error=tally.max_abs, max_rel_error=tally.max_rel, tolerances=[tol], notes=notes
        )
    return Comparison(
        ok=False,
        error_kind="mismatch",
        report=_mismatch_report(
            label, ref, tol, scale, allowance_factor, anchor_text if use64 else None, tally
        ),
        max_abs_error=tally.max_abs if math.isfinite(tally.max_abs) else 0.0,
        max_rel_error=tally.max_rel if math.isfinite(tally.max_rel) else 0.0,
        mismatched=tally.n_bad,
        tolerances=[tol],
        notes=notes,
    )


@dataclass
class _Anchoring:
    """Where a float64 reference may anchor the comparison: elements where the two references agree within
    the dtype's loosest row. Beyond it the two runs are not the same computation (dtype-dependent code) or
    the value is beyond fp32: judged against the fp32 reference, and left out of E."""

    scale: float
    loose_rtol: float
    loose_atol: float

    def of(self, b: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the fp32 reference's own error, where the two references agree enough to anchor)."""
        zero = torch.zeros((), dtype=torch.float64, device=b.device)
        b_fin, r_fin = torch.isfinite(b), torch.isfinite(r)
        own = _real(torch.where(b_fin & r_fin, (b - r).abs(), zero))
        anchored = b_fin & r_fin & (own <= self.loose_atol * self.scale + self.loose_rtol * _real(r.abs()))
        return own, anchored


def _reference_error(
    pieces: _Pieces, anchoring: _Anchoring, shape: list[int], allowance_factor: float
) -> tuple[float, str]:
    """Pass 1 of compare_tensor: the reference's own error scale E over the anchored elements (a
    nearest-rank quantile), and what the report says about it."""
    n = pieces.ref.numel()
    n_anchored = n_off = 0
    top = _TopK(n - math.ceil(REFERENCE_ERROR_QUANTILE * n - 1e-9) + 1)
    worst_own, worst_own_at = -1.0, 0
    for start, _, b, r in pieces:
        assert r is not None
        own, anchored = anchoring.of(b, r)
        own_anchored = torch.where(anchored, own, torch.zeros((), dtype=torch.float64, device=own.device))
        n_anchored += int(anchored.sum())
        n_off += int((torch.isfinite(b) & ~anchored).sum())
        top.add(own_anchored)
        i = int(torch.argmax(own_anchored))
        if float(own_anchored[i]) > worst_own:
            worst_own, worst_own_at = float(own_anchored[i]), start + i
    err = 0.0
    if n_anchored:
        rank = min(n_anchored, max(1, math.ceil(REFERENCE_ERROR_QUANTILE * n_anchored - 1e-9)))
        err = top.kth(n_anchored - rank + 1)
    anchor_text = (
        f"reference error E {_fmt(err)} (the {REFERENCE_ERROR_QUANTILE:.1%} quantile of "
        f"|float32 reference - float64 reference|; largest {_fmt(max(worst_own, 0.0))} at "
        f"{_index(worst_own_at, shape)}); allowance {allowance_factor:g} x max(E, the element's "
        f"own) >= {_fmt(allowance_factor * err)}"
        + (f"; {n_off} elements judged against the float32 reference (references disagree)" if n_off else "")
    )
    return err, anchor_text


@dataclass
class _Tally:
    """What pass 2 of compare_tensor found."""

    n_bad: int = 0
    n_special: int = 0
    """NaN/inf mismatches."""
    nonfinite_out: int = 0
    """NaN/inf in the output where the reference is finite."""
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst: tuple[float, int, float, float, float] | None = None
    """(diff, index, got, expected, fp32 ref) of the largest finite mismatch."""
    first: list[tuple[int, float, float]] = field(default_factory=list)
    """(index, got, expected) of the first mismatches, up to _SHOW_MISMATCHES."""


def _tally(
    pieces: _Pieces, anchoring: _Anchoring, atol_eff: float, rtol: float, err: float, allowance_factor: float
) -> _Tally:
    """Pass 2 of compare_tensor: every element against its bound."""
    t = _Tally()
    any_both = False
    for start, a, b, r in pieces:
        zero = torch.zeros((), dtype=torch.float64, device=a.device)
        a_fin, b_fin = torch.isfinite(a), torch.isfinite(b)
        both = a_fin & b_fin
        anchor, allowance = b, None
        if r is not None:
            own, anchored = anchoring.of(b, r)
            anchor = torch.where(anchored, r, b)
            allowance = torch.where(anchored, allowance_factor * torch.clamp(own, min=err), zero)
        diff = _real(torch.where(both, (a - anchor).abs(), zero))
        babs = _real(anchor.abs())
        bound = atol_eff + rtol * babs
        if allowance is not None:
            bound = bound + allowance
        bad_finite = both & (diff > bound)
        # Non-finite values: NaN must meet NaN, inf the same inf; anything else against them is a mismatch.
        a_nan, b_nan = torch.isnan(a), torch.isnan(b)
        same_special = (a_nan & b_nan) | (~a_nan & ~b_nan & ~a_fin & ~b_fin & (a == b))
        bad_special = ~both & ~same_special
        bad = bad_finite | bad_special
        t.n_bad += int(bad.sum())
        t.n_special += int(bad_special.sum())
        t.nonfinite_out += int((bad_special & b_fin).sum())
        if bool(both.any()):
            any_both = True
            t.max_abs = max(t.max_abs, float(diff.max()))
            t.max_rel = max(t.max_rel, float((diff / torch.clamp(babs, min=max(atol_eff, 1e-30))).max()))
        if bool(bad_finite.any()):
            i = int(torch.argmax(torch.where(bad_finite, diff, torch.zeros_like(diff))))
            if t.worst is None or float(diff[i]) > t.worst[0]:
                t.worst = (
                    float(diff[i]),
                    start + i,
                    float(a[i].real),
                    float(anchor[i].real),
                    float(b[i].real),
                )
        if len(t.first) < _SHOW_MISMATCHES and bool(bad.any()):
            for i in torch.nonzero(bad).reshape(-1)[: _SHOW_MISMATCHES - len(t.first)].tolist():
                t.first.append((start + i, float(a[i].real), float(anchor[i].real)))
    if not any_both:
        t.max_abs = t.max_rel = 0.0
    return t


def _mismatch_report(
    label: str, ref: torch.Tensor, tol: Tolerance, scale: float, allowance_factor: float,
    anchor_text: str | None, t: _Tally,
) -> str:  # fmt: skip
    """The report of a failed compare_tensor: how many, where, by how much (`anchor_text`: float64-anchored)."""
    n = ref.numel()
    shape = list(ref.shape)
    lines = [
        f"{label} {describe(ref)}: {t.n_bad} of {n} elements ({100.0 * t.n_bad / n:.3g}%) outside "
        f"rtol={tol.rtol:g}, atol={tol.atol:g}"
        + (f" x scale {scale:.4g}" if scale != 1.0 else "")
        + (
            " + the reference's own error at the element"
            if tol.reference_error is not None and ref.dtype in _HALF
            else f" + {allowance_factor:g} x reference error {_fmt(tol.reference_error)}"
            if tol.reference_error is not None
            else ""
        )
        + f" ({tol.precision} precision)"
    ]  # fmt: skip
    if anchor_text is not None:
        lines.append(
            f"  expected = a float64 run of the reference, rounded to {dtype_name(ref.dtype)}; {anchor_text}"
        )
    if t.n_special:
        lines.append(
            f"  {t.n_special} NaN/inf mismatches ({t.nonfinite_out} NaN/inf in the output where the reference "
            f"is finite; unwritten output memory reads as NaN)"
        )
    if t.worst is not None:
        also = f" (float32 reference {_fmt(t.worst[4])})" if anchor_text is not None else ""
        lines.append(
            f"  max abs error {_fmt(t.max_abs)} at {_index(t.worst[1], shape)}: got {_fmt(t.worst[2])}, "
            f"expected {_fmt(t.worst[3])}{also}; max rel error {_fmt(t.max_rel)}"
        )
    shown = ", ".join(
        f"{_index(i, shape)}: got {_fmt(got)} expected {_fmt(want)}" for i, got, want in t.first
    )
    lines.append(f"  first mismatches: {shown}")
    return "\n".join(lines)


def compare_outputs(
    out: Any,
    ref: Any,
    precision: PrecisionMode = "strict",
    *,
    rtol: float | None = None,
    atol: float | None = None,
    ref64: Any = None,
    allowance_factor: float = ALLOWANCE_FACTOR,
) -> Comparison:
    """Structure first (count, types, shapes, dtypes, devices), then values of every output.

    `ref64` is the forward's result from a float64 run of the reference (same structure), or None; an
    output it has no matching tensor for is compared to the float32 reference alone, and a note says so.
    """
    problem = structure_mismatch(out, ref)
    if problem is not None:
        return Comparison(ok=False, error_kind="shape_mismatch", report=problem)
    outs, refs = flatten_outputs(out), flatten_outputs(ref)
    refs64: list[Any] = [None] * len(refs)
    total = Comparison(ok=True)
    if ref64 is not None:
        flat64 = flatten_outputs(ref64)
        if len(flat64) == len(refs):
            refs64 = flat64
        else:
            total.notes.append(
                f"the float64 reference returns {len(flat64)} output(s), not {len(refs)}; "
                "compared to the float32 reference alone"
            )
    if len(outs) != len(refs):
        return Comparison(
            ok=False,
            error_kind="shape_mismatch",
            report=f"forward returned {len(outs)} output(s); the reference returns {len(refs)}: "
            f"got ({', '.join(map(describe, outs))}), expected ({', '.join(map(describe, refs))})",
        )
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        label = f"output {i}"
        if isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return Comparison(
                    ok=False,
                    error_kind="shape_mismatch",
                    report=f"{label}: got {describe(o)}, expected {describe(r)}",
                )
            problems = []
            if o.shape != r.shape:
                problems.append(f"shape {list(o.shape)}, expected {list(r.shape)}")
            if o.dtype != r.dtype:
                problems.append(f"dtype {dtype_name(o.dtype)}, expected {dtype_name(r.dtype)}")
            if o.device.type != r.device.type:
                problems.append(f"device {o.device}, expected {r.device}")
            if problems:
                return Comparison(
                    ok=False, error_kind="shape_mismatch", report=f"{label}: " + "; ".join(problems)
                )
        elif isinstance(o, torch.Tensor) or type(o) is not type(r):
            return Comparison(
                ok=False,
                error_kind="shape_mismatch",
                report=f"{label}: got {describe(o)}, expected {describe(r)}",
            )
    for i, (o, r, r64) in enumerate(zip(outs, refs, refs64, strict=True)):
        if isinstance(r, torch.Tensor):
            if not isinstance(r64, torch.Tensor) or not (r64.is_floating_point() or r64.is_complex()):
                if r64 is not None and uses_float64_reference(r.dtype, precision):
                    total.notes.append(f"output {i}: the float64 reference gave {describe(r64)}; not used")
                r64 = None
            cmp = compare_tensor(
                o, r, precision, rtol=rtol, atol=atol, label=f"output {i}", ref64=r64,
                allowance_factor=allowance_factor,
            )  # fmt: skip
        else:
            cmp = _compare_plain(o, r, precision, rtol=rtol, atol=atol, label=f"output {i}")
        total.tolerances.extend(cmp.tolerances)
        total.notes.extend(cmp.notes)
        total.max_abs_error = max(total.max_abs_error, cmp.max_abs_error)
        total.max_rel_error = max(total.max_rel_error, cmp.max_rel_error)
        if not cmp.ok:
            cmp.tolerances, cmp.notes = total.tolerances, total.notes
            cmp.max_abs_error, cmp.max_rel_error = total.max_abs_error, total.max_rel_error
            return cmp
    return total


def _compare_plain(
    out: Any, ref: Any, precision: PrecisionMode, *, rtol: float | None, atol: float | None, label: str
) -> Comparison:
    """Python numbers (a forward returning a float) compare as 0-d float64 tensors; other values by ==."""
    if isinstance(ref, bool | int | float) and isinstance(out, bool | int | float):
        dtype = torch.float64 if isinstance(ref, float) else torch.int64
        return compare_tensor(
            torch.tensor(out, dtype=dtype),
            torch.tensor(ref, dtype=dtype),
            precision,
            rtol=rtol,
            atol=atol,
            label=label,
        )
    if out == ref:
        return Comparison(ok=True)
    return Comparison(ok=False, error_kind="mismatch", report=f"{label}: got {out!r}, expected {ref!r}")
