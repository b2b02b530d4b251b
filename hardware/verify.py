"""Checking a candidate's outputs against the reference's: one tolerance table, one report format.

Runs inside the evaluation worker (it imports torch, never triton). The checks, in order:
1. structure: same number of outputs, tensors where the reference has tensors, same shape, dtype and
   device (`shape_mismatch`);
2. values: |out - ref| <= atol_eff + rtol * |ref| elementwise, NaN only where the reference has NaN,
   +-inf only where the reference has the same infinity (`mismatch`).

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

max_abs_error / max_rel_error are taken over elements finite in both outputs (rel: |out - ref| /
max(|ref|, atol_eff)); NaN/inf mismatches are counted in `mismatched` and named in the report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from pydantic import BaseModel, Field

from hardware.result import PrecisionMode, Tolerance

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


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


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


def output_scale(ref: torch.Tensor) -> float:
    """max(1, RMS of the finite values of `ref`): the factor atol is multiplied by."""
    if not (ref.is_floating_point() or ref.is_complex()) or ref.numel() == 0:
        return 1.0
    values = ref.detach().to(torch.complex128 if ref.is_complex() else torch.float64).abs()
    finite = values[torch.isfinite(values)]
    if finite.numel() == 0:
        return 1.0
    return max(1.0, float(finite.square().mean().sqrt()))


class Comparison(BaseModel):
    """The outcome of comparing one candidate output structure with the reference's."""

    ok: bool
    error_kind: str | None = None  # "shape_mismatch" | "mismatch"
    report: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    mismatched: int = 0
    tolerances: list[Tolerance] = Field(default_factory=list)


def flatten_outputs(value: Any) -> list[Any]:
    """A forward's result as a flat list: tensors and plain values, nested tuples/lists unrolled."""
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in flatten_outputs(item)]
    return [value]


def describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)} {dtype_name(value.dtype)} on {value.device}"
    return type(value).__name__


def _index(flat: int, shape: Sequence[int]) -> list[int]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return idx[::-1]


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def compare_tensor(
    out: torch.Tensor,
    ref: torch.Tensor,
    precision: PrecisionMode = "strict",
    *,
    rtol: float | None = None,
    atol: float | None = None,
    label: str = "output",
) -> Comparison:
    """Values of one output tensor against the reference tensor of the same shape and dtype.

    The report says how many elements fail, where (index) and by how much, NaN/inf included, in the
    style of Liger's assert_verbose_allclose.
    """
    scale = output_scale(ref)
    tol = tolerance_for(ref.dtype, precision, rtol=rtol, atol=atol, scale=scale)
    atol_eff = tol.atol * scale
    if ref.numel() == 0:
        return Comparison(ok=True, tolerances=[tol])
    wide = torch.complex128 if ref.is_complex() else torch.float64
    a = out.detach().to(wide).reshape(-1)
    b = ref.detach().to(wide).reshape(-1)
    a_fin, b_fin = torch.isfinite(a), torch.isfinite(b)
    both = a_fin & b_fin
    diff = torch.where(both, (a - b).abs(), torch.zeros((), dtype=torch.float64, device=a.device))
    diff = diff.real if diff.is_complex() else diff
    babs = b.abs().real if b.is_complex() else b.abs()
    bad_finite = both & (diff > atol_eff + tol.rtol * babs)
    # Non-finite values: NaN must meet NaN, inf the same inf; anything else against them is a mismatch.
    a_nan, b_nan = torch.isnan(a), torch.isnan(b)
    same_special = (a_nan & b_nan) | (~a_nan & ~b_nan & ~a_fin & ~b_fin & (a == b))
    bad_special = ~both & ~same_special
    bad = bad_finite | bad_special
    n_bad = int(bad.sum())
    max_abs = float(diff.max()) if both.any() else 0.0
    rel = diff / torch.clamp(babs, min=max(atol_eff, 1e-30))
    max_rel = float(rel.max()) if both.any() else 0.0
    if n_bad == 0:
        return Comparison(ok=True, max_abs_error=max_abs, max_rel_error=max_rel, tolerances=[tol])

    shape = list(ref.shape)
    lines = [
        f"{label} {describe(ref)}: {n_bad} of {ref.numel()} elements "
        f"({100.0 * n_bad / ref.numel():.3g}%) outside rtol={tol.rtol:g}, atol={tol.atol:g}"
        + (f" x scale {scale:.4g}" if scale != 1.0 else "")
        + f" ({tol.precision} precision)"
    ]
    n_special = int(bad_special.sum())
    if n_special:
        nonfinite_out = int((bad_special & b_fin).sum())
        lines.append(
            f"  {n_special} NaN/inf mismatches ({nonfinite_out} NaN/inf in the output where the reference "
            f"is finite; unwritten output memory reads as NaN)"
        )
    if bool(bad_finite.any()):
        worst = int(torch.argmax(torch.where(bad_finite, diff, torch.zeros_like(diff))))
        lines.append(
            f"  max abs error {_fmt(max_abs)} at {_index(worst, shape)}: got {_fmt(float(a[worst].real))}, "
            f"expected {_fmt(float(b[worst].real))}; max rel error {_fmt(max_rel)}"
        )
    first = torch.nonzero(bad).reshape(-1)[:_SHOW_MISMATCHES].tolist()
    shown = ", ".join(
        f"{_index(i, shape)}: got {_fmt(float(a[i].real))} expected {_fmt(float(b[i].real))}" for i in first
    )
    lines.append(f"  first mismatches: {shown}")
    return Comparison(
        ok=False,
        error_kind="mismatch",
        report="\n".join(lines),
        max_abs_error=max_abs if math.isfinite(max_abs) else 0.0,
        max_rel_error=max_rel if math.isfinite(max_rel) else 0.0,
        mismatched=n_bad,
        tolerances=[tol],
    )


def compare_outputs(
    out: Any,
    ref: Any,
    precision: PrecisionMode = "strict",
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> Comparison:
    """Structure first (count, types, shapes, dtypes, devices), then values of every output."""
    outs, refs = flatten_outputs(out), flatten_outputs(ref)
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
    total = Comparison(ok=True)
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if isinstance(r, torch.Tensor):
            cmp = compare_tensor(o, r, precision, rtol=rtol, atol=atol, label=f"output {i}")
        else:
            cmp = _compare_plain(o, r, precision, rtol=rtol, atol=atol, label=f"output {i}")
        total.tolerances.extend(cmp.tolerances)
        total.max_abs_error = max(total.max_abs_error, cmp.max_abs_error)
        total.max_rel_error = max(total.max_rel_error, cmp.max_rel_error)
        if not cmp.ok:
            cmp.tolerances = total.tolerances
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
