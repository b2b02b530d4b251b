"""Roofline floors of synthetic tasks: which bound, which peak, exact numbers."""

from __future__ import annotations

import pytest

from kernelwright.hardware.roofline import dtype_math_mode, fraction_of_floor, roofline_floor_ms
from kernelwright.tasks.task import Task, TaskSignature

N = 4096
MM_FLOPS = 2.0 * N**3
MM_BYTES = 3.0 * N * N * 4


def make_task(families, dtypes, flops, nbytes, name="synthetic"):
    sig = TaskSignature(op_families=families, input_dtypes=dtypes)
    return Task(name=name, source="", signature=sig, flops=flops, min_bytes=nbytes)


def test_pointwise_is_memory_bound_at_measured_copy_bandwidth():
    nbytes = 2.0 * N * N * 4  # read x, write y
    f = roofline_floor_ms(make_task(["pointwise"], ["torch.float32"], 0.0, nbytes), "h200")
    assert f.bound == "memory"
    assert f.floor_ms == f.memory_ms == pytest.approx(nbytes / 4159e9 * 1e3, rel=1e-12)
    assert f.compute_ms == 0.0
    assert f.bandwidth_used == 4159e9 and f.bandwidth_source == "measured"
    assert f.bytes == nbytes and f.flops == 0.0 and f.target == "nvidia-h200"


def test_strict_fp32_matmul_is_bounded_by_split_tf32_where_that_beats_the_cuda_cores():
    task = make_task(["matmul"], ["torch.float32", "torch.float32"], MM_FLOPS, MM_BYTES)
    f = roofline_floor_ms(task, "h200")
    # 3xTF32 keeps fp32 accuracy: a third of the measured TF32 rate (121.7) beats the CUDA cores (50.7)
    assert f.math_mode == "tf32x3" and f.bound == "compute"
    assert f.peak_used == pytest.approx(365.1e12 / 3) and f.peak_source == "measured"
    assert f.compute_ms == pytest.approx(MM_FLOPS / (365.1e12 / 3) * 1e3, rel=1e-12)
    assert f.memory_ms == pytest.approx(MM_BYTES / 4159e9 * 1e3, rel=1e-12)
    assert f.floor_ms == f.compute_ms
    assert "3xTF32" in f.note
    # where a third of TF32 is below the fp32 peak (an RTX 4090: 82.6 / 3 < 82.6), the CUDA cores bound it
    g = roofline_floor_ms(task, "nvidia-rtx-4090")
    assert g.math_mode == "fp32" and g.peak_used == pytest.approx(82.6e12) and "CUDA cores" in g.note


def test_fp32_conv_uses_the_peak_of_the_fastest_math_at_its_precision():
    task = make_task(["conv", "pointwise"], ["float32"], MM_FLOPS, MM_BYTES)
    strict = roofline_floor_ms(task, "h200")
    assert strict.math_mode == "tf32x3" and strict.peak_used == pytest.approx(365.1e12 / 3)
    assert "3xTF32" in strict.note
    on_4090 = roofline_floor_ms(task, "nvidia-rtx-4090")  # cuDNN's TF32 off: CUDA cores
    assert on_4090.math_mode == "fp32" and "cuDNN" in on_4090.note and "fp32 peak" in on_4090.note
    tf32 = roofline_floor_ms(task, "h200", "tf32")  # cuDNN's default math
    assert tf32.math_mode == "tf32"
    assert tf32.peak_used == pytest.approx(365.1e12)
    assert tf32.compute_ms == pytest.approx(MM_FLOPS / 365.1e12 * 1e3, rel=1e-12)


@pytest.mark.parametrize(
    "precision,mode,peak",
    [("strict", "tf32x3", 365.1e12 / 3), ("tf32", "tf32", 365.1e12), ("reduced", "bf16", 734.3e12)],
)
def test_precision_mode_changes_the_fp32_matmul_peak(precision, mode, peak):
    f = roofline_floor_ms(make_task(["matmul"], ["torch.float32"], MM_FLOPS, MM_BYTES), "h200", precision)
    assert f.math_mode == mode and f.peak_used == pytest.approx(peak) and f.precision == precision


def test_bf16_matmul_prefers_the_measured_rate_and_can_ignore_it():
    task = make_task(["matmul"], ["torch.bfloat16", "torch.bfloat16"], MM_FLOPS, MM_BYTES / 2)
    f = roofline_floor_ms(task, "h200")
    assert f.math_mode == "bf16" and f.peak_used == 734.3e12 and f.peak_source == "measured"
    assert f.floor_ms == pytest.approx(MM_FLOPS / 734.3e12 * 1e3, rel=1e-12)
    d = roofline_floor_ms(task, "h200", measured=False)
    assert d.peak_used == pytest.approx(989.4e12) and d.peak_source == "datasheet"
    assert d.bandwidth_used == 4800e9 and d.bandwidth_source == "datasheet"
    assert d.floor_ms < f.floor_ms


def test_fp16_matmul_on_a_target_without_measurements_uses_datasheet():
    f = roofline_floor_ms(make_task(["matmul"], ["torch.float16"], MM_FLOPS, MM_BYTES / 2), "a100")
    assert f.math_mode == "fp16" and f.peak_used == pytest.approx(312e12)
    assert f.bandwidth_used == 2039e9 and f.bandwidth_source == "datasheet"


def test_small_matmul_is_memory_bound():
    # a matrix-vector product: 2*N*N FLOPs over N*N*4 bytes is far below the ridge point
    flops, nbytes = 2.0 * N * N, (N * N + 2 * N) * 4.0
    f = roofline_floor_ms(make_task(["matmul"], ["torch.float32"], flops, nbytes), "h100")
    assert f.bound == "memory"
    assert f.floor_ms == pytest.approx(nbytes / 3350e9 * 1e3, rel=1e-12)


def test_mode_missing_on_target_falls_back_with_a_note():
    f = roofline_floor_ms(make_task(["matmul"], ["torch.float8_e4m3fn"], MM_FLOPS, MM_BYTES / 4), "a100")
    assert f.math_mode == "fp16" and "no fp8 peak" in f.note
    g = roofline_floor_ms(make_task(["matmul"], ["torch.float8_e4m3fn"], MM_FLOPS, MM_BYTES / 4), "h100")
    assert g.math_mode == "fp8" and g.peak_used == pytest.approx(1978.9e12)


def test_interpreter_target_has_no_floor():
    f = roofline_floor_ms(make_task(["matmul"], ["torch.float32"], MM_FLOPS, MM_BYTES), "cpu-interpreter")
    assert f.floor_ms is None and f.bound is None and "no meaningful peaks" in f.note


def test_unknown_target_name_raises_one_line():
    with pytest.raises(ValueError, match="unknown target"):
        roofline_floor_ms(make_task(["pointwise"], ["torch.float32"], 0.0, 1.0), "v100")


def test_dtype_math_mode():
    assert dtype_math_mode("torch.float32") == "fp32"
    assert dtype_math_mode("bfloat16") == "bf16"
    assert dtype_math_mode("torch.float16") == "fp16"
    assert dtype_math_mode("torch.float8_e5m2") == "fp8"
    assert dtype_math_mode("torch.int64") is None


def test_fraction_of_floor():
    assert fraction_of_floor(0.5, 2.0) == 0.25
    assert fraction_of_floor(1.0, 1.0) == 1.0
    assert fraction_of_floor(None, 1.0) is None
    assert fraction_of_floor(1.0, None) is None
    assert fraction_of_floor(1.0, 0.0) is None
