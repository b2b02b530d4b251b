"""The roofline floor of a task: the least time any kernel could take on a target.

A forward must move `task.min_bytes` through DRAM and do `task.flops` of math, so it takes at least
max(bytes / bandwidth, flops / peak). The peak is the one of the fastest math that keeps the precision
asked for:

- fp32 matmuls and convolutions under strict precision: PyTorch runs them on CUDA cores (the fp32 peak;
  the harness turns cuDNN's TF32 off), but split-precision tensor-core dots (3xTF32: three TF32 products
  per fp32 one) keep fp32 accuracy, so a third of the TF32 peak bounds them where that is higher (on an
  H200: 365.1 / 3 = 121.7 against 50.7 TFLOP/s measured). Under the CUDA-core peak alone the writer's
  3xTF32 kernels reached 133-153% of "the floor", and the search's roofline stop ended at once;
- a caller timing cuDNN's default math passes precision="tf32" (the floor's `note` says which);
- fp16/bf16/fp8 inputs use their tensor-core peaks; `precision="tf32"` or `"reduced"` lets fp32
  matmul use the TF32 or bf16 tensor-core peak.

Measured ceilings (copy bandwidth, matmul rate) are used when the target has them, since a floor
nothing can reach says little.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from kernelwright.hardware.targets import Target, get_target

if TYPE_CHECKING:
    from kernelwright.tasks.task import Task

Precision = Literal["strict", "tf32", "reduced"]

# Op families whose FLOPs run on tensor cores when the dtype allows (flop_counter counts mm, bmm,
# addmm, convolution and attention, so any counted FLOPs belong to one of these).
_MATMUL_FAMILIES = {"matmul", "bmm", "linear", "gemm", "attention", "gemv", "mm"}
_CONV_FAMILIES = {"conv", "conv1d", "conv2d", "conv3d", "conv_transpose", "convolution"}

_DTYPE_TO_MODE = {
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float64": "fp64",
    "double": "fp64",
    "fp64": "fp64",
}


class RooflineFloor(BaseModel):
    """The floor of one task on one target, and how it was derived."""

    floor_ms: float | None = Field(
        description="max(memory_ms, compute_ms); None when the target has no peaks"
    )
    memory_ms: float | None = None
    compute_ms: float | None = None
    bound: Literal["memory", "compute"] | None = None
    bytes: float = 0.0
    flops: float = 0.0
    math_mode: str = Field(default="fp32", description="the math mode whose peak was used")
    peak_used: float | None = Field(default=None, description="FLOP/s")
    peak_source: Literal["measured", "datasheet", "none"] = "none"
    bandwidth_used: float | None = Field(default=None, description="bytes/s")
    bandwidth_source: Literal["measured", "datasheet", "none"] = "none"
    precision: Precision = "strict"
    target: str = ""
    note: str = ""

    def summary(self) -> str:
        if self.floor_ms is None:
            return f"no roofline floor on {self.target}: {self.note}"
        return (
            f"floor {self.floor_ms:.4g} ms on {self.target} ({self.bound}-bound; memory {self.memory_ms:.4g} ms, "
            f"compute {self.compute_ms:.4g} ms in {self.math_mode})"
        )


def dtype_math_mode(dtype: str) -> str | None:
    """'torch.bfloat16' -> 'bf16', 'float8_e4m3fn' -> 'fp8'; None for integer and bool dtypes."""
    d = dtype.strip().lower().removeprefix("torch.")
    if d.startswith("float8"):
        return "fp8"
    return _DTYPE_TO_MODE.get(d)


def _input_mode(dtypes: list[str]) -> tuple[str, str]:
    """The math mode the inputs imply, and a note when they disagree or are not floating point."""
    modes = [m for m in (dtype_math_mode(d) for d in dtypes) if m is not None]
    if not modes:
        return "fp32", "no floating-point inputs; fp32 assumed"
    distinct = sorted(set(modes), key=modes.index)
    if len(distinct) == 1:
        return distinct[0], ""
    # Mixed inputs: the most frequent dtype sets the mode (weights usually follow activations).
    best = max(distinct, key=modes.count)
    return best, f"mixed input dtypes {distinct}; {best} assumed"


def select_math_mode(task: Task, target: Target, precision: Precision = "strict") -> tuple[str, list[str]]:
    """The math mode whose peak bounds the task's FLOPs on `target`, with notes on why."""
    notes: list[str] = []
    families = {f.lower() for f in task.signature.op_families}
    mode, why = _input_mode(task.signature.input_dtypes)
    if why:
        notes.append(why)
    is_conv = bool(families & _CONV_FAMILIES)
    is_matmul = bool(families & _MATMUL_FAMILIES)
    if mode == "fp32":
        if precision == "reduced":
            mode = "bf16"
            notes.append("reduced precision: fp32 math bounded by the bf16 tensor-core peak")
        elif precision == "tf32" and (is_conv or is_matmul):
            mode = "tf32"
            notes.append("tf32 precision: fp32 matmul/conv bounded by the TF32 tensor-core peak")
        elif (is_conv or is_matmul) and _split_tf32_faster(target):
            mode = "tf32x3"
            notes.append("strict fp32 matmul/conv: 3xTF32 tensor-core dots keep fp32 accuracy; a third of the "
                         "TF32 peak, above the CUDA cores' fp32 peak")  # fmt: skip
        elif is_conv:
            notes.append("strict fp32 convolution (cuDNN's TF32 off, as the harness runs it): fp32 peak")
        elif is_matmul:
            notes.append("strict fp32 matmul runs on CUDA cores: fp32 peak")
    if target.meaningful_peaks and mode_peak(target, mode) is None:
        # e.g. fp8 on A100 or fp64 on an Ada part: fall back to the nearest mode the part has.
        for alt in {"fp8": ["fp16", "bf16"], "fp64": ["fp32"], "tf32": ["fp32"], "bf16": ["fp16"]}.get(
            mode, []
        ):
            if target.peak_flops(alt) is not None:
                notes.append(f"{target.name} lists no {mode} peak; {alt} used")
                mode = alt
                break
        else:
            if target.peak_flops("fp32") is not None:
                notes.append(f"{target.name} lists no {mode} peak; fp32 used")
                mode = "fp32"
    return mode, notes


SPLIT_TF32 = 3
"""TF32 tensor-core products per fp32 product in a 3xTF32 dot (hi*hi + hi*lo + lo*hi)."""


def mode_peak(target: Target, mode: str, *, measured: bool = True) -> float | None:
    """FLOP/s of a math mode on `target`; "tf32x3" (3xTF32) is the TF32 peak / SPLIT_TF32."""
    if mode == "tf32x3":
        tf32 = target.peak_flops("tf32", measured=measured)
        return tf32 / SPLIT_TF32 if tf32 else None
    return target.peak_flops(mode, measured=measured)


def _split_tf32_faster(target: Target) -> bool:
    fp32, split = mode_peak(target, "fp32"), mode_peak(target, "tf32x3")
    return bool(split and (not fp32 or split > fp32))


def roofline_floor_ms(
    task: Task,
    target: Target | str,
    precision: Precision = "strict",
    *,
    measured: bool = True,
) -> RooflineFloor:
    """The roofline floor of one forward of `task` (full size) on `target`.

    `measured=False` uses datasheet figures only. On a target without meaningful peaks (the
    interpreter) the floor is None, with a note; this never raises for a valid target.
    """
    tgt = get_target(target)
    flops = float(task.flops or 0.0)
    nbytes = float(task.min_bytes or 0.0)
    if not tgt.meaningful_peaks:
        return RooflineFloor(
            floor_ms=None,
            bytes=nbytes,
            flops=flops,
            precision=precision,
            target=tgt.name,
            note=f"{tgt.name} has no meaningful peaks",
        )
    mode, notes = select_math_mode(task, tgt, precision)
    peak = mode_peak(tgt, mode, measured=measured)
    bw = tgt.bandwidth_bytes_per_s(measured=measured)
    memory_ms = nbytes / bw * 1e3 if bw > 0 else 0.0
    compute_ms = flops / peak * 1e3 if peak else 0.0
    if flops > 0 and not peak:
        notes.append(f"{tgt.name} has no peak for {mode}; compute time not counted")
    if nbytes <= 0 and flops <= 0:
        notes.append("task reports neither bytes nor FLOPs")
    if not getattr(task, "cost_exact", True):
        notes.append(
            "the task's bytes/FLOPs are lower bounds (its forward could not run at full size), so is the floor"
        )
    floor = max(memory_ms, compute_ms)
    return RooflineFloor(
        floor_ms=floor,
        memory_ms=memory_ms,
        compute_ms=compute_ms,
        bound="compute" if compute_ms > memory_ms else "memory",
        bytes=nbytes,
        flops=flops,
        math_mode=mode,
        peak_used=peak,
        peak_source=tgt.peak_source("tf32" if mode == "tf32x3" else mode, measured=measured),
        bandwidth_used=bw,
        bandwidth_source=tgt.bandwidth_source(measured=measured),
        precision=precision,
        target=tgt.name,
        note="; ".join(notes),
    )


def fraction_of_floor(floor_ms: float | None, runtime_ms: float | None) -> float | None:
    """floor / runtime: 1.0 means at the roofline; None when either is missing or not positive."""
    if floor_ms is None or runtime_ms is None or floor_ms <= 0 or runtime_ms <= 0:
        return None
    return floor_ms / runtime_ms
