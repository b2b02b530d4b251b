"""Which device files a candidate process gets (hardware/isolation/dev_nodes): its own GPU's node and the
driver's shared ones, never another GPU's, on fake /dev listings and a fake driver listing."""

from __future__ import annotations

from pathlib import Path

from kernelwright.hardware.isolation.dev_nodes import ALL_GPUS, choose, gpu_minor

HOST_DEV = ["null", "zero", "full", "random", "urandom", "kmsg", "mem", "sda", "shm", "dri", "nvidiactl",
            "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps"] + [f"nvidia{i}" for i in range(8)]  # fmt: skip
BASIC = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]
SHARED = ["/dev/nvidia-caps", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl"]


def test_a_gpu_candidate_gets_its_own_gpus_node_and_the_drivers_shared_ones():
    got = choose(HOST_DEV, 3)
    assert got == BASIC + sorted(["/dev/nvidia3", *SHARED]), got
    assert not {"/dev/nvidia0", "/dev/nvidia7", "/dev/dri", "/dev/kmsg", "/dev/nvidia-modeset"} & set(got)


def test_a_cpu_candidate_gets_no_gpu_node_and_absent_nodes_are_not_made_up():
    assert choose(HOST_DEV, None) == BASIC
    assert choose(["null", "urandom", "nvidia0"], 5) == ["/dev/null", "/dev/urandom"]
    assert choose(HOST_DEV, ALL_GPUS) == BASIC + sorted([f"/dev/nvidia{i}" for i in range(8)] + SHARED)


def _driver(tmp_path: Path, gpus: list[tuple[str, int, str]]) -> str:
    for bus, minor, uuid in gpus:
        d = tmp_path / bus
        d.mkdir()
        (d / "information").write_text(
            f"Model: \t\t NVIDIA H200\nDevice Minor: \t {minor}\nGPU UUID: \t {uuid}\n"
        )
    return str(tmp_path)


def test_the_gpu_is_found_from_cuda_visible_devices(tmp_path):
    # minors need not follow the bus order: the index counts GPUs in bus order, the node is the minor's
    driver = _driver(
        tmp_path,
        [("0000:c3:00.0", 0, "GPU-c3"), ("0000:1b:00.0", 6, "GPU-1b"), ("0000:45:00.0", 2, "GPU-45")],
    )
    assert [gpu_minor(str(i), driver) for i in range(3)] == [6, 2, 0]
    assert gpu_minor("GPU-45", driver) == 2 and gpu_minor("1,2", driver) == 2
    assert gpu_minor(None, driver) is None and gpu_minor("", driver) is None
    assert gpu_minor("MIG-0123", driver) == ALL_GPUS  # nothing here resolves it: every GPU, not none
    # no driver listing: the index counts the GPU nodes /dev holds (a container's may be nvidia3, nvidia5)
    assert gpu_minor("1", str(tmp_path / "absent"), present=[5, 3]) == 5
    assert gpu_minor("4", str(tmp_path / "absent")) == 4
