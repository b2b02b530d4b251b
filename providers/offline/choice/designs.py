"""The design space: for each family of kernel, its designs, their configuration spaces and defaults.

A *design* is a way to write a kernel (whole row in registers vs a looped two-pass vs an online pass;
grouped vs split-K vs persistent matmul; ...). Its *config* is a point in the design's space of block
sizes, warps, stages, swizzle and precision. Each kind of kernel (kind.KernelKind: rows, matmul,
pointwise; one module each) provides its facts, designs by family, defaults and generator; this module
gathers them into `REGISTRY` (designs by family) and dispatches every question to the kernel's kind.
A family whose designs do not apply to a kernel (today: "conv", whose only design keeps the torch op)
is skipped when choosing. Writing convolutions in Triton plugs in here: register "implicit_gemm"-style
designs for the "conv" family with their own kind and generator.

Adding a kind: a module that builds a `KernelKind`, named in plugins.KERNEL_KINDS. Adding a
design: a `Design` in its kind's `designs()` (with `applies` where it does not fit every kernel) and,
if its defaults differ, a branch in the kind's `default_config`.
"""

from __future__ import annotations

from typing import Any

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.kinds.kind import (
    DEFAULT_ARCH,
    DEFAULT_SM_COUNT,
    DEFAULT_SMEM_BYTES,
    Design,
    KernelInfo,
    KernelKind,
    make_config,
    target_arch,
    target_sm_count,
    target_smem_bytes,
)
from kernelwright.providers.offline.kinds.kind_matmul import BIG_MATMUL, KMAJOR_PRECS
from kernelwright.providers.offline.kinds.kind_rows import PREFETCH_ABOUT, PREFETCH_DESIGN
from kernelwright.providers.offline.plugins import KERNEL_KINDS, KINDS


def _build_registry() -> dict[str, list[Design]]:
    reg: dict[str, list[Design]] = {}
    for kind in KERNEL_KINDS:
        reg.update(kind.designs())
    # Convolutions are kept as torch ops today: the family is registered so that Triton designs
    # (implicit GEMM, direct) can be added here with their own generator.
    reg["conv"] = [Design("torch", "conv", "conv", "torch", {}, lambda i: False, "cuDNN through torch")]
    return reg


REGISTRY: dict[str, list[Design]] = _build_registry()
DESIGN_NAMES: set[str] = {d.name for ds in REGISTRY.values() for d in ds}


def designs_for(info: KernelInfo) -> list[Design]:
    return [d for d in REGISTRY.get(info.family, []) if d.kind == info.kind and d.applies(info)]


def find_design(family: str, name: str) -> Design | None:
    return next((d for d in REGISTRY.get(family, []) if d.name == name), None)


def kernel_info(
    sched: Schedule,
    k: Kernel,
    sm_count: int = DEFAULT_SM_COUNT,
    smem_bytes: int = DEFAULT_SMEM_BYTES,
    arch: int = DEFAULT_ARCH,
) -> KernelInfo:
    """The facts of kernel `k` a design choice reads (no generator is built); `sm_count`, `smem_bytes` and
    `arch` (compute capability): the target's."""
    info = KINDS[k.kind].info(k, k.kind, k.family, sm_count=sm_count, smem_bytes=smem_bytes, arch=arch)
    KINDS[k.kind].facts(sched, k, info)
    return info


def default_design(info: KernelInfo) -> Design:
    ds = designs_for(info)
    if not ds:
        raise ValueError(f"no design for a {info.kind} kernel of family {info.family}")
    by_mode: dict[str, Design] = {}
    for d in ds:
        by_mode.setdefault(d.mode, d)  # the first design of a mode is its default (row_registers)
    return KINDS[info.kind].default_design(info, by_mode)


def default_config(design: Design, info: KernelInfo, tf32: bool = False) -> dict[str, Any]:
    """Hopper defaults for a design on a kernel."""
    return KINDS[design.kind].default_config(design, info, tf32)


def launch_effect(design: Design, info: KernelInfo, values: dict[str, Any]) -> tuple[Any, ...] | None:
    """What a config launches with on this kernel's (traced) sizes, mirroring the launcher its generator
    writes; None where this is not modelled (today only whole rows in registers are). Two configs with
    the same effect run the same kernel (e.g. TILE below the row length changes nothing), so a small
    step between them would spend a candidate on a program already measured."""
    return KINDS[design.kind].launch_effect(design, info, values)


def last_resort(design: Design, info: KernelInfo) -> bool:
    """Whether a large step should reach `design` only after the kernel's other designs (see
    KernelKind.last_resort)."""
    return KINDS[design.kind].last_resort(design, info)


def task_derived_keys(design: Design) -> tuple[str, ...]:
    """Config keys the writer sets from the task's own sizes (a split's write grid follows from its row
    count): starting from a case of another task keeps this task's value for them."""
    return KINDS[design.kind].task_derived


def fits(design: Design, info: KernelInfo, values: dict[str, Any]) -> bool:
    """Whether the kernel a config writes fits the target (today: a matmul's accumulators in registers and its
    pipelined tiles in shared memory); True where this is not modelled. A config that does not fit fails to
    launch or spills, so the writer never spends a candidate on one."""
    return KINDS[design.kind].fits(design, info, values)


def config_space(design: Design, info: KernelInfo, tf32: bool = False) -> dict[str, tuple[Any, ...]]:
    """The values each config key may take for this design on this kernel."""
    return KINDS[design.kind].config_space(design, info, tf32)


__all__ = [
    "BIG_MATMUL",
    "DEFAULT_ARCH",
    "DEFAULT_SM_COUNT",
    "DEFAULT_SMEM_BYTES",
    "DESIGN_NAMES",
    "KINDS",
    "KMAJOR_PRECS",
    "PREFETCH_ABOUT",
    "PREFETCH_DESIGN",
    "REGISTRY",
    "Design",
    "KernelInfo",
    "KernelKind",
    "config_space",
    "default_config",
    "default_design",
    "last_resort",
    "designs_for",
    "find_design",
    "fits",
    "kernel_info",
    "launch_effect",
    "make_config",
    "KERNEL_KINDS",
    "target_arch",
    "target_sm_count",
    "target_smem_bytes",
]
