"""Target profiles: sane numbers, forgiving names, detection without a GPU."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kernelwright.hardware.targets import (
    detect_target,
    generic_target_from_properties,
    get_target,
    list_targets,
    load_ceilings,
    match_device_name,
)

GPU_NAMES = ["nvidia-h100", "nvidia-h200", "nvidia-a100", "nvidia-l4", "nvidia-rtx-4090"]


def test_every_gpu_profile_is_complete_and_plausible():
    names = [t.name for t in list_targets()]
    assert set(GPU_NAMES) | {"cpu-interpreter"} == set(names)
    for name in GPU_NAMES:
        t = get_target(name)
        assert t.arch == "cuda" and t.vendor == "nvidia" and t.warp_size == 32
        assert t.compute_capability in (80, 89, 90)
        assert 50 <= t.sm_count <= 200
        assert 100 <= t.memory_bandwidth_gbs <= 10_000
        assert 64 * 1024 < t.shared_memory_per_block_bytes <= 228 * 1024
        assert t.registers_per_sm == 65536 and t.l2_bytes >= 32 * 2**20
        # tensor cores beat CUDA cores, and half precision beats TF32
        assert t.peak_tflops["fp16"] > t.peak_tflops["fp32"]
        assert t.peak_tflops["bf16"] >= t.peak_tflops["tf32"] >= t.peak_tflops["fp32"]
        assert t.sources


def test_hopper_numbers():
    h100, h200 = get_target("h100"), get_target("h200")
    assert h100.compute_capability == h200.compute_capability == 90
    assert h200.memory_bandwidth_gbs > h100.memory_bandwidth_gbs
    assert h200.memory_bandwidth_gbs == 4800.0 and h100.memory_bandwidth_gbs == 3350.0
    assert h200.shared_memory_per_block_bytes == 232448
    assert h200.peak_tflops["bf16"] == pytest.approx(989.4)


def test_h200_keeps_datasheet_and_measured_apart():
    h200 = get_target("h200")
    assert h200.measured_copy_bandwidth_gbs == 4159.0 and h200.measured_tflops["bf16"] == 734.3
    assert h200.bandwidth_bytes_per_s() == 4159e9 and h200.bandwidth_source() == "measured"
    assert h200.bandwidth_bytes_per_s(measured=False) == 4800e9
    assert h200.peak_flops("bf16") == 734.3e12 and h200.peak_source("bf16") == "measured"
    assert h200.peak_flops("bf16", measured=False) == pytest.approx(989.4e12)
    assert h200.peak_source("fp32") == "measured" and h200.peak_source("fp64") == "datasheet"
    assert "measured" in h200.measured_note
    assert get_target("h100").measured_copy_bandwidth_gbs is None


@pytest.mark.parametrize(
    "alias",
    ["h200", "H200", "nvidia-h200", "NVIDIA_H200", "nvidia h200", " H200-SXM ", "NVIDIA H200 SXM 141GB"],
)
def test_aliases(alias):
    assert get_target(alias).name == "nvidia-h200"


def test_other_aliases():
    assert get_target("A100").name == "nvidia-a100"
    assert get_target("rtx4090").name == get_target("RTX-4090").name == "nvidia-rtx-4090"
    assert get_target("L4").name == "nvidia-l4"
    assert get_target("cpu").name == get_target("cpu-interpreter").name == "cpu-interpreter"
    t = get_target("h100")
    assert get_target(t) is t


def test_unknown_name_is_a_one_line_error_listing_known_names():
    with pytest.raises(ValueError) as info:
        get_target("v100")
    msg = str(info.value)
    assert "\n" not in msg and "'v100'" in msg
    for name in GPU_NAMES + ["cpu-interpreter"]:
        assert name in msg


def test_cpu_interpreter_has_no_meaningful_peaks():
    t = get_target("cpu-interpreter")
    assert t.arch == "cpu" and not t.meaningful_peaks and not t.is_gpu
    assert t.peak_flops("fp32") is None
    with pytest.raises(ValueError, match="not a CUDA GPU target"):
        t.gpu_target_spec()
    assert get_target("h200").gpu_target_spec() == ("cuda", 90, 32)


def test_detect_target_on_cpu_gives_interpreter():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert detect_target().name == "cpu-interpreter"
    assert detect_target("auto").name == "cpu-interpreter"
    assert detect_target("cpu").name == "cpu-interpreter"
    with pytest.raises(ValueError, match="no CUDA device"):
        detect_target("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        detect_target("tpu")


def test_one_device_resolver_for_context_planner_and_worker_pool():
    import torch

    from kernelwright.graphs.context import Context
    from kernelwright.hardware import WorkerPool
    from kernelwright.hardware.targets import resolve_device

    auto = "cuda" if torch.cuda.is_available() else "cpu"
    assert [resolve_device(d) for d in ("auto", "cpu", "cuda", "cuda:1")] == [auto, "cpu", "cuda", "cuda:1"]
    for bad in ("tpu", "gpu", "cuda:", "cuda:x", "CPU", ""):
        with pytest.raises(ValueError, match="unknown device"):
            resolve_device(bad)
        with pytest.raises(ValueError, match="unknown device"):
            Context(device=bad)
    assert Context(device="cuda:1").device == "cuda:1"
    with pytest.raises(ValueError, match="worker pool"):
        WorkerPool("cuda:1")


@pytest.mark.parametrize(
    "device_name,cc,expected",
    [
        ("NVIDIA H200", 90, "nvidia-h200"),
        ("NVIDIA H100 80GB HBM3", 90, "nvidia-h100"),
        ("NVIDIA A100-SXM4-80GB", 80, "nvidia-a100"),
        ("NVIDIA L4", 89, "nvidia-l4"),
        ("NVIDIA GeForce RTX 4090", 89, "nvidia-rtx-4090"),
        # different products that share a substring must not borrow a profile
        ("NVIDIA GH200 480GB", 90, None),
        ("NVIDIA H100 PCIe", 90, None),
        ("NVIDIA H200 NVL", 90, None),
        ("NVIDIA A100-SXM4-40GB", 80, None),
        ("NVIDIA L40S", 89, None),
        # a name that matches but a capability that does not
        ("NVIDIA H200", 80, None),
    ],
)
def test_match_device_name(device_name, cc, expected):
    found = match_device_name(device_name, cc)
    assert (found.name if found else None) == expected


def test_generic_profile_from_device_properties_is_flagged_and_estimated():
    # properties of an H100 SXM as torch reports them (clock in kHz, bus width in bits)
    props = SimpleNamespace(
        name="NVIDIA H100 Mystery",
        multi_processor_count=132,
        clock_rate=1_830_000,
        memory_clock_rate=2_619_000,
        memory_bus_width=5120,
        total_memory=80 * 10**9,
        L2_cache_size=50 * 2**20,
        shared_memory_per_block_optin=232448,
        regs_per_multiprocessor=65536,
        warp_size=32,
    )
    t = generic_target_from_properties(props, (9, 0))
    assert t.generic and t.name == "generic-sm90" and t.compute_capability == 90
    assert t.memory_bandwidth_gbs == pytest.approx(3352.3, rel=1e-3)
    assert t.peak_tflops["fp32"] == pytest.approx(61.8, rel=1e-2)
    assert t.peak_tflops["bf16"] == pytest.approx(989.5, rel=1e-2)
    assert t.shared_memory_per_block_bytes == 232448
    assert "generic" in t.summary()


def test_load_ceilings(tmp_path):
    path = tmp_path / "ceilings.json"
    path.write_text(
        json.dumps({"device": "NVIDIA H200", "copy_bandwidth_gbs": 4111.0, "matmul_tflops": {"fp32": 50.5}})
    )
    t = load_ceilings(get_target("h200"), path)
    assert t.measured_copy_bandwidth_gbs == 4111.0
    assert t.measured_tflops == {**get_target("h200").measured_tflops, "fp32": 50.5}
    assert "NVIDIA H200" in t.measured_note
    assert get_target("h200").measured_copy_bandwidth_gbs == 4159.0  # the bundled profile is untouched
    (tmp_path / "empty.json").write_text("{}")
    with pytest.raises(ValueError, match="neither"):
        load_ceilings(get_target("h200"), tmp_path / "empty.json")
    with pytest.raises(ValueError, match="cannot read"):
        load_ceilings(get_target("h200"), tmp_path / "missing.json")
