"""The tolerance table, NaN/inf handling and the mismatch report of hardware.verify."""

from __future__ import annotations

import pytest
import torch

from hardware.verify import compare_outputs, compare_tensor, output_scale, tolerance_for


def test_tolerance_table_rows():
    assert (tolerance_for(torch.float32).rtol, tolerance_for(torch.float32).atol) == (1e-4, 1e-5)
    assert tolerance_for(torch.float32, "tf32").rtol == 1e-3
    assert tolerance_for(torch.float32, "reduced").rtol == 1.6e-2
    assert (tolerance_for(torch.float16).rtol, tolerance_for(torch.float16).atol) == (1e-3, 1e-3)
    assert tolerance_for(torch.bfloat16).rtol == 1.6e-2
    assert (tolerance_for(torch.int64).rtol, tolerance_for(torch.int64).atol) == (0.0, 0.0)
    tol = tolerance_for(torch.float32, "strict", rtol=5e-2, atol=0.0)
    assert (tol.rtol, tol.atol, tol.precision, tol.dtype) == (5e-2, 0.0, "strict", "float32")


def _round_to_tf32(x: torch.Tensor) -> torch.Tensor:
    """Round fp32 to TF32's 10 mantissa bits (round to nearest), as tensor cores read their inputs."""
    bits = x.contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF
    return rounded.view(torch.float32)


@pytest.fixture(scope="module")
def matmul_case():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(48, 4096, generator=g)
    b = torch.randn(4096, 40, generator=g)
    ref = (a.double() @ b.double()).float()
    # fp32 with another summation order: 64-long chunks accumulated in fp32, as a tiled kernel does
    chunked = sum((a[:, k : k + 64] @ b[k : k + 64, :] for k in range(0, 4096, 64)), torch.zeros(48, 40))
    tf32 = (_round_to_tf32(a).double() @ _round_to_tf32(b).double()).float()
    return ref, chunked, tf32


def test_fp32_reordered_sum_passes_strict(matmul_case):
    ref, chunked, _ = matmul_case
    cmp = compare_tensor(chunked, ref, "strict")
    assert cmp.ok, cmp.report
    assert cmp.tolerances[0].atol_scale == pytest.approx(64, rel=0.1)  # RMS of a K=4096 product


def test_tf32_matmul_fails_strict_but_passes_tf32(matmul_case):
    ref, _, tf32 = matmul_case
    strict = compare_tensor(tf32, ref, "strict")
    assert not strict.ok and strict.error_kind == "mismatch"
    assert compare_tensor(tf32, ref, "tf32").ok


def test_output_scale_is_rms_of_finite_values():
    assert output_scale(torch.full((10,), 0.5)) == 1.0
    assert output_scale(torch.tensor([3.0, -4.0, float("nan"), float("inf")])) == pytest.approx((12.5) ** 0.5)
    assert output_scale(torch.arange(5)) == 1.0  # integers: exact anyway


def test_nan_where_reference_is_finite_fails():
    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[1, 2] = float("nan")
    cmp = compare_tensor(out, ref)
    assert not cmp.ok and cmp.mismatched == 1
    assert "1 NaN/inf in the output where the reference is finite" in cmp.report
    assert "[1, 2]: got nan expected 0" in cmp.report


def test_matching_nan_and_inf_pass_and_opposite_inf_fails():
    ref = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    assert compare_tensor(ref.clone(), ref).ok
    flipped = ref.clone()
    flipped[1] = -float("inf")
    assert not compare_tensor(flipped, ref).ok
    finite_for_nan = ref.clone()
    finite_for_nan[0] = 0.0
    assert not compare_tensor(finite_for_nan, ref).ok


def test_report_says_where_and_how_much():
    ref = torch.linspace(-1, 1, 35).reshape(5, 7)
    out = ref.clone()
    out[2, 3] += 0.5
    out[4, 6] -= 0.01
    cmp = compare_tensor(out, ref)
    assert not cmp.ok and cmp.mismatched == 2
    assert cmp.max_abs_error == pytest.approx(0.5, rel=1e-6)
    assert "2 of 35 elements" in cmp.report
    assert "max abs error 0.5 at [2, 3]" in cmp.report
    assert "[4, 6]: got" in cmp.report


def test_small_errors_within_tolerance_pass():
    ref = torch.randn(5, 123, 77, generator=torch.Generator().manual_seed(1))
    assert compare_tensor(ref * (1 + 5e-5), ref).ok
    assert not compare_tensor(ref * (1 + 5e-3), ref).ok


@pytest.mark.parametrize(
    ("out", "ref", "text"),
    [
        (torch.zeros(5, 7), torch.zeros(5, 8), "shape [5, 7], expected [5, 8]"),
        (torch.zeros(5, dtype=torch.float64), torch.zeros(5), "dtype float64, expected float32"),
        (
            (torch.zeros(3),),
            (torch.zeros(3), torch.zeros(3)),
            "returned 1 output(s); the reference returns 2",
        ),
        (1.0, torch.zeros(3), "got float, expected tensor[3]"),
    ],
)
def test_structure_is_checked_before_values(out, ref, text):
    cmp = compare_outputs(out, ref)
    assert not cmp.ok and cmp.error_kind == "shape_mismatch"
    assert text in cmp.report


def test_tuple_outputs_compare_each_element():
    ref = (torch.ones(3), torch.zeros(2, dtype=torch.int64))
    assert compare_outputs((torch.ones(3), torch.zeros(2, dtype=torch.int64)), ref).ok
    cmp = compare_outputs((torch.ones(3), torch.tensor([0, 1])), ref)
    assert not cmp.ok and "output 1" in cmp.report


def test_precision_is_stated_in_report_and_tolerance():
    ref = torch.ones(4)
    cmp = compare_tensor(ref + 1, ref, "tf32")
    assert "(tf32 precision)" in cmp.report
    assert cmp.tolerances[0].precision == "tf32"
