"""Pointwise kernels (a fused elementwise chain) as a kernel kind: facts, designs, defaults.

The code comes from `PointwiseGen` (emit_pointwise.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.emit.emit_pointwise import PointwiseConfig, PointwiseGen
from kernelwright.providers.offline.kinds.kind import Design, KernelInfo, KernelKind

_BLOCKS = (512, 1024, 2048, 4096, 8192)


@dataclass
class PointwiseInfo(KernelInfo):
    """A pointwise kernel's facts: how many elements it writes."""

    numel: int = 1


def designs() -> dict[str, list[Design]]:
    return {
        "pointwise": [
            Design("flat", "pointwise", "pointwise", "flat",
                   {"BLOCK": _BLOCKS, "num_warps": (2, 4, 8, 16)}, about="one block of elements per program"),
            Design("grid_stride", "pointwise", "pointwise", "grid_stride",
                   {"BLOCK": _BLOCKS, "num_warps": (2, 4, 8, 16), "WAVES": (2, 4, 8, 16)},
                   about="a few programs per SM, each walking many blocks"),
        ]
    }  # fmt: skip


def facts(sched: Schedule, k: Kernel, info: PointwiseInfo) -> None:
    info.numel = sched.graph.numel_hint(k.space)


def cost(info: PointwiseInfo) -> float:
    return float(info.numel)


def default_design(info: PointwiseInfo, by_mode: dict[str, Design]) -> Design:
    return by_mode["flat"]


def default_config(design: Design, info: PointwiseInfo, tf32: bool = False) -> dict[str, Any]:
    if design.mode == "grid_stride":
        return {"BLOCK": 2048, "num_warps": 8, "WAVES": 8}
    # Small blocks (8 elements a thread): many short programs keep the last wave's tail short; on an H200
    # BLOCK=4096 with 8 warps ran elementwise ops at 94-96% of the copy bandwidth, torch.compile's
    # 1024-element blocks at 98%.
    return {"BLOCK": 1024, "num_warps": 4}


def config_space(design: Design, info: PointwiseInfo, tf32: bool = False) -> dict[str, tuple[Any, ...]]:
    return dict(design.space)


POINTWISE = KernelKind(
    info=PointwiseInfo,
    name="pointwise",
    config=PointwiseConfig,
    designs=designs,
    facts=facts,
    cost=cost,
    default_design=default_design,
    default_config=default_config,
    config_space=config_space,
    generator=PointwiseGen,
    simplest_mode="flat",
)
