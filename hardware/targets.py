"""Hardware targets: what a GPU can do, as numbers the roofline and the compile feedback use.

A `Target` holds datasheet figures (dense peaks per math mode, memory bandwidth, on-chip limits) and,
kept apart, figures measured on a real device (copy bandwidth, matmul rates). Datasheet numbers are
what the vendor promises; measured numbers are what a kernel can actually reach, and the roofline
prefers them when present. Every field says which it is.

`get_target(name)` finds a bundled profile by a forgiving name ("h200", "NVIDIA-H200", "H200 SXM");
`detect_target()` matches the running CUDA device to a profile, builds a flagged generic profile for an
unknown GPU, and returns the `cpu-interpreter` target when there is no GPU.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Arch = Literal["cuda", "hip", "cpu"]
MathMode = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8"]
MATH_MODES: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")

KIB = 1024
MIB = 1024 * 1024


class Target(BaseModel):
    """One piece of hardware a kernel is written for.

    Peaks are dense (no structured sparsity) and in TFLOP/s (1e12); bandwidths in GB/s (1e9 bytes/s).
    `peak_tflops` and `memory_bandwidth_gbs` are datasheet values; `measured_tflops` and
    `measured_copy_bandwidth_gbs` were measured on a device (copy bandwidth counts bytes read plus
    bytes written). Tensor-core peaks (tf32/fp16/bf16/fp8) assume fp32 accumulation.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="canonical profile name, e.g. 'nvidia-h200'")
    display_name: str
    vendor: str
    arch: Arch
    compute_capability: int | None = Field(default=None, description="e.g. 90 for sm_90; None on cpu")
    sm_count: int = 0
    warp_size: int = 32
    memory_bytes: int = 0
    memory_bandwidth_gbs: float = Field(default=0.0, description="datasheet DRAM bandwidth, GB/s")
    measured_copy_bandwidth_gbs: float | None = Field(
        default=None, description="measured device-to-device copy, (bytes read + bytes written) / time, GB/s"
    )
    peak_tflops: dict[str, float] = Field(
        default_factory=dict, description="datasheet dense peak per math mode, TFLOP/s"
    )
    measured_tflops: dict[str, float] = Field(
        default_factory=dict, description="measured matmul rate per math mode, TFLOP/s"
    )
    shared_memory_per_block_bytes: int = Field(default=0, description="max shared memory per block (opt-in)")
    registers_per_sm: int = 0
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    l2_bytes: int = 0
    generic: bool = Field(
        default=False, description="built from device properties of an unknown GPU; peaks are estimates"
    )
    meaningful_peaks: bool = Field(default=True, description="False for the interpreter: no roofline")
    aliases: tuple[str, ...] = ()
    device_name_patterns: tuple[str, ...] = Field(
        default=(), description="regexes over the lower-cased torch.cuda.get_device_name()"
    )
    sources: str = Field(default="", description="where the datasheet numbers come from")
    measured_note: str = Field(default="", description="how and where the measured numbers were taken")

    def peak_flops(self, mode: str, *, measured: bool = True) -> float | None:
        """Peak FLOP/s for a math mode: the measured rate when `measured` and one exists, else datasheet."""
        if measured and mode in self.measured_tflops:
            return self.measured_tflops[mode] * 1e12
        if mode in self.peak_tflops:
            return self.peak_tflops[mode] * 1e12
        return None

    def peak_source(self, mode: str, *, measured: bool = True) -> Literal["measured", "datasheet", "none"]:
        if measured and mode in self.measured_tflops:
            return "measured"
        return "datasheet" if mode in self.peak_tflops else "none"

    def bandwidth_bytes_per_s(self, *, measured: bool = True) -> float:
        """DRAM bandwidth in bytes/s: the measured copy rate when `measured` and one exists."""
        if measured and self.measured_copy_bandwidth_gbs:
            return self.measured_copy_bandwidth_gbs * 1e9
        return self.memory_bandwidth_gbs * 1e9

    def bandwidth_source(self, *, measured: bool = True) -> Literal["measured", "datasheet"]:
        return "measured" if measured and self.measured_copy_bandwidth_gbs else "datasheet"

    @property
    def is_gpu(self) -> bool:
        return self.arch in ("cuda", "hip")

    def gpu_target_spec(self) -> tuple[str, int | str, int]:
        """(backend, arch, warp_size) for triton's GPUTarget; ValueError for a target with no GPU."""
        if self.arch == "cuda" and self.compute_capability:
            return ("cuda", self.compute_capability, self.warp_size)
        raise ValueError(f"target {self.name!r} is not a CUDA GPU target; offline compilation needs one")

    def with_ceilings(
        self,
        *,
        copy_bandwidth_gbs: float | None = None,
        matmul_tflops: dict[str, float] | None = None,
        note: str = "",
    ) -> Target:
        """A copy of this target with measured ceilings replaced (those given) and a note on their origin."""
        update: dict[str, Any] = {}
        if copy_bandwidth_gbs:
            update["measured_copy_bandwidth_gbs"] = float(copy_bandwidth_gbs)
        if matmul_tflops:
            update["measured_tflops"] = {
                **self.measured_tflops,
                **{k: float(v) for k, v in matmul_tflops.items()},
            }
        if note:
            update["measured_note"] = note
        return self.model_copy(update=update)

    def summary(self) -> str:
        """One line for prompts and logs."""
        if not self.meaningful_peaks:
            return f"{self.display_name} (no meaningful peaks)"
        peaks = ", ".join(f"{m} {v:g}" for m, v in self.peak_tflops.items() if m != "fp64")
        bw = f"{self.memory_bandwidth_gbs:g} GB/s"
        if self.measured_copy_bandwidth_gbs:
            bw += f" (measured copy {self.measured_copy_bandwidth_gbs:g})"
        smem = self.shared_memory_per_block_bytes // KIB
        flag = " [generic, estimated peaks]" if self.generic else ""
        return (
            f"{self.display_name}: sm_{self.compute_capability}, {self.sm_count} SMs, {bw}, "
            f"dense TFLOP/s {peaks}, smem/block {smem} KiB{flag}"
        )


# Hopper H100 and H200 SXM share the GH100 die and clocks; H200 adds HBM3e (141 GB, 4.8 TB/s).
_HOPPER_PEAKS = {"fp64": 66.9, "fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}

_PROFILES: list[Target] = [
    Target(
        name="nvidia-h100",
        display_name="NVIDIA H100 SXM5 80GB",
        vendor="nvidia",
        arch="cuda",
        memory_bytes=80 * 10**9,
        memory_bandwidth_gbs=3350.0,
        peak_tflops=_HOPPER_PEAKS,
        aliases=("h100", "h100-sxm", "h100-sxm5", "h100-80gb"),
        device_name_patterns=(r"\bh100\b(?!.*(pcie|nvl))",),
        sources="NVIDIA H100 Tensor Core GPU datasheet (SXM5 column, dense = half of the sparsity figure)",
        compute_capability=90,
        sm_count=132,
        warp_size=32,
        shared_memory_per_block_bytes=227 * KIB,
        registers_per_sm=65536,
        l2_bytes=50 * MIB,
    ),
    Target(
        name="nvidia-h200",
        display_name="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        arch="cuda",
        memory_bytes=141 * 10**9,
        memory_bandwidth_gbs=4800.0,
        measured_copy_bandwidth_gbs=4159.0,
        peak_tflops=_HOPPER_PEAKS,
        measured_tflops={"fp32": 50.7, "tf32": 365.1, "bf16": 734.3, "fp16": 714.5},
        aliases=("h200", "h200-sxm", "h200-141gb"),
        device_name_patterns=(r"(?<![a-z0-9])h200\b(?!.*nvl)",),
        sources="NVIDIA H200 Tensor Core GPU datasheet (SXM column, dense = half of the sparsity figure)",
        measured_note=(
            "measured by benchmarks/ceilings.py on one H200 SXM, 2026-11-30 (torch 2.11, CUDA 13.0): 2 GiB "
            "device-to-device copy 4159 GB/s (read + write, median); 8192^3 torch.matmul medians on random "
            "data fp32 50.7, tf32 365.1, bf16 734.3, fp16 714.5 TFLOP/s"
        ),
        compute_capability=90,
        sm_count=132,
        warp_size=32,
        shared_memory_per_block_bytes=227 * KIB,
        registers_per_sm=65536,
        l2_bytes=50 * MIB,
    ),
    Target(
        name="nvidia-a100",
        display_name="NVIDIA A100 SXM4 80GB",
        vendor="nvidia",
        arch="cuda",
        compute_capability=80,
        sm_count=108,
        warp_size=32,
        memory_bytes=80 * 10**9,
        memory_bandwidth_gbs=2039.0,
        peak_tflops={"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
        shared_memory_per_block_bytes=163 * KIB,
        registers_per_sm=65536,
        l2_bytes=40 * MIB,
        aliases=("a100", "a100-sxm", "a100-sxm4", "a100-80gb", "a100-sxm4-80gb"),
        device_name_patterns=(r"\ba100\b.*sxm.*80\s*gb",),
        sources="NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column; fp64 is the tensor-core rate)",
    ),
    Target(
        name="nvidia-l4",
        display_name="NVIDIA L4 24GB",
        vendor="nvidia",
        arch="cuda",
        compute_capability=89,
        sm_count=58,
        warp_size=32,
        memory_bytes=24 * 10**9,
        memory_bandwidth_gbs=300.0,
        peak_tflops={"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5},
        shared_memory_per_block_bytes=99 * KIB,
        registers_per_sm=65536,
        l2_bytes=48 * MIB,
        aliases=("l4",),
        device_name_patterns=(r"\bl4\b",),
        sources="NVIDIA L4 Tensor Core GPU datasheet (dense = half of the sparsity figure)",
    ),
    Target(
        name="nvidia-rtx-4090",
        display_name="NVIDIA GeForce RTX 4090",
        vendor="nvidia",
        arch="cuda",
        compute_capability=89,
        sm_count=128,
        warp_size=32,
        memory_bytes=24 * 1024**3,
        memory_bandwidth_gbs=1008.0,
        # GeForce Ada runs tensor cores at half rate with fp32 accumulation (what torch uses).
        peak_tflops={"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2, "fp8": 330.3},
        shared_memory_per_block_bytes=99 * KIB,
        registers_per_sm=65536,
        l2_bytes=72 * MIB,
        aliases=("rtx4090", "4090", "geforce-rtx-4090", "rtx-4090"),
        device_name_patterns=(r"rtx 4090(?!\s*d\b)(?!.*laptop)",),
        sources="NVIDIA Ada GPU architecture whitepaper, RTX 4090 (dense, fp32 accumulate)",
    ),
    Target(
        name="cpu-interpreter",
        display_name="Triton interpreter on CPU",
        vendor="triton",
        arch="cpu",
        compute_capability=None,
        sm_count=0,
        warp_size=1,
        meaningful_peaks=False,
        aliases=("cpu", "interpreter", "triton-interpreter", "cpu-interpret"),
        sources="kernels run through TRITON_INTERPRET=1; times say nothing about any GPU",
    ),
]

_BY_NAME: dict[str, Target] = {t.name: t for t in _PROFILES}


def _norm(name: str) -> str:
    """'NVIDIA_H200 SXM' -> 'nvidiah200sxm': case, separators and spaces do not matter."""
    return re.sub(r"[\s_\-./]+", "", name.strip().lower())


def _alias_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for t in _PROFILES:
        keys = {t.name, t.display_name, *t.aliases}
        if t.vendor == "nvidia":
            keys |= {f"nvidia-{a}" for a in t.aliases}
        for k in keys:
            table[_norm(k)] = t.name
    return table


_ALIASES = _alias_table()


def list_targets() -> list[Target]:
    """Every bundled profile, GPUs first."""
    return list(_PROFILES)


def get_target(name: str | Target) -> Target:
    """The bundled profile for `name` (case, spaces, '-' and '_' ignored); ValueError listing known names."""
    if isinstance(name, Target):
        return name
    key = _norm(str(name))
    if key in _ALIASES:
        return _BY_NAME[_ALIASES[key]]
    known = ", ".join(t.name for t in _PROFILES)
    raise ValueError(f"unknown target {name!r}; known targets: {known}")


def match_device_name(device_name: str, compute_capability: int | None = None) -> Target | None:
    """The profile whose name patterns match a CUDA device name (and capability, when given), else None."""
    low = device_name.lower()
    for t in _PROFILES:
        if any(re.search(p, low) for p in t.device_name_patterns):
            if compute_capability is None or t.compute_capability == compute_capability:
                return t
    return None


# Dense FLOPs per clock per SM: fp32 from CUDA cores (2 x FMA units), fp16 from tensor cores with fp32
# accumulation. Used only to estimate peaks of a GPU that has no profile.
_FP32_FLOPS_PER_CLK_SM = {70: 128, 75: 128, 80: 128, 86: 256, 87: 256, 89: 256, 90: 256, 100: 256, 120: 256}
_FP16_TC_FLOPS_PER_CLK_SM = {70: 1024, 75: 1024, 80: 2048, 86: 512, 87: 1024, 89: 512, 90: 4096, 100: 8192}


def generic_target_from_properties(props: Any, capability: tuple[int, int]) -> Target:
    """A flagged profile for a GPU with no bundled profile, from torch.cuda.get_device_properties()."""
    cc = capability[0] * 10 + capability[1]
    sms = int(getattr(props, "multi_processor_count", 0))
    clock_hz = float(getattr(props, "clock_rate", 0) or 0) * 1e3  # torch reports kHz
    mem_clock_hz = float(getattr(props, "memory_clock_rate", 0) or 0) * 1e3
    bus_bits = float(getattr(props, "memory_bus_width", 0) or 0)
    bandwidth_gbs = 2.0 * mem_clock_hz * bus_bits / 8 / 1e9  # double data rate
    peaks: dict[str, float] = {}
    base = max((k for k in _FP32_FLOPS_PER_CLK_SM if k <= cc), default=None)
    if base is not None and clock_hz > 0:
        peaks["fp32"] = round(_FP32_FLOPS_PER_CLK_SM[base] * sms * clock_hz / 1e12, 1)
    tc = max((k for k in _FP16_TC_FLOPS_PER_CLK_SM if k <= cc), default=None)
    if tc is not None and clock_hz > 0:
        fp16 = _FP16_TC_FLOPS_PER_CLK_SM[tc] * sms * clock_hz / 1e12
        peaks["fp16"] = round(fp16, 1)
        if cc >= 80:
            peaks["bf16"] = round(fp16, 1)
            peaks["tf32"] = round(fp16 / 2, 1)
        if cc >= 89:
            peaks["fp8"] = round(fp16 * 2, 1)
    name = str(getattr(props, "name", "unknown GPU"))
    smem = int(
        getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 0)
    )
    return Target(
        name=f"generic-sm{cc}",
        display_name=name,
        vendor="nvidia",
        arch="cuda",
        compute_capability=cc,
        sm_count=sms,
        warp_size=int(getattr(props, "warp_size", 32) or 32),
        memory_bytes=int(getattr(props, "total_memory", 0)),
        memory_bandwidth_gbs=round(bandwidth_gbs, 1),
        peak_tflops=peaks,
        shared_memory_per_block_bytes=smem,
        registers_per_sm=int(getattr(props, "regs_per_multiprocessor", 65536) or 65536),
        l2_bytes=int(getattr(props, "L2_cache_size", 0)),
        generic=True,
        sources="estimated from torch.cuda device properties (clock x SMs x per-SM rate); not a datasheet",
    )


DEVICE_RE = re.compile(r"auto|cpu|cuda(?::\d+)?")
"""The device values kernelwright accepts everywhere (Context.device, --device, WorkerPool, detect_target)."""


def check_device(device: str) -> str:
    """`device` itself when it is one of auto, cpu, cuda or cuda:N; else ValueError."""
    if not isinstance(device, str) or not DEVICE_RE.fullmatch(device):
        raise ValueError(f"unknown device {device!r}; expected auto, cpu, cuda or cuda:N")
    return device


def resolve_device(device: str) -> str:
    """The device a value names: the one resolver for `Context.device`, `--device` and `WorkerPool`.

    Accepted: "auto" (a CUDA GPU when torch sees one, else the CPU), "cpu" (the Triton interpreter),
    "cuda" (the current GPU) and "cuda:N" (GPU N). "auto" resolves to "cuda" or "cpu" ("cpu" without
    torch); every other accepted value comes back as given. Anything else raises ValueError.
    """
    if check_device(device) != "auto":
        return device
    try:
        import torch
    except ImportError:  # a planner-only install may lack torch; nothing can run kernels then
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def detect_target(device: str = "auto") -> Target:
    """The target for `device` ("auto", "cpu", "cuda" or "cuda:N").

    "auto" and "cuda" look at the CUDA device: a known name and capability give its profile, an unknown
    GPU a generic profile (flagged `generic`); without CUDA, "auto" gives `cpu-interpreter` and "cuda"
    raises ValueError.
    """
    if check_device(device) == "cpu":
        return get_target("cpu-interpreter")
    try:
        import torch
    except ImportError:  # a planner-only install may lack torch; nothing can run kernels then
        torch = None  # type: ignore[assignment]
    if torch is None or not torch.cuda.is_available() or getattr(torch.version, "hip", None):
        if device == "auto":
            return get_target("cpu-interpreter")
        raise ValueError(f"device {device!r} requested but no CUDA device is available")
    index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
    name = torch.cuda.get_device_name(index)
    major, minor = torch.cuda.get_device_capability(index)
    found = match_device_name(name, major * 10 + minor)
    if found is not None:
        return found
    return generic_target_from_properties(torch.cuda.get_device_properties(index), (major, minor))


def load_ceilings(target: Target, path: str | Path) -> Target:
    """`target` with the measured ceilings from a benchmarks/ceilings.py JSON file applied.

    The file's `copy_bandwidth_gbs` and `matmul_tflops` replace the target's measured figures; raises
    ValueError with one line when the file is unreadable or has neither.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read ceilings file {path}: {e}") from None
    copy_bw = data.get("copy_bandwidth_gbs")
    mm = data.get("matmul_tflops") or {}
    if not copy_bw and not mm:
        raise ValueError(f"ceilings file {path} has neither copy_bandwidth_gbs nor matmul_tflops")
    note = f"measured by benchmarks/ceilings.py on {data.get('device', 'unknown device')} ({data.get('date', '?')})"
    return target.with_ceilings(copy_bandwidth_gbs=copy_bw, matmul_tflops=mm, note=note)
