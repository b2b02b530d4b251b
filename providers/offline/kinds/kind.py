"""The interface every kind of Triton kernel the writer schedules (rows, matmul, pointwise) provides.

A `KernelKind` says, for the kernels of its kind: which facts a design choice looks at (`facts`, filled
into a `KernelInfo` without building a generator), which designs it has per family (`designs`), a
design's default and space of configs, and the generator that writes the code. Each kind's module
(kind_rows.py, kind_matmul.py, kind_pointwise.py) defines its KernelKind and the KernelInfo subclass that
holds its own facts; plugins.KERNEL_KINDS lists the kinds and designs.py dispatches through plugins.KINDS.

Target facts: `KernelInfo.sm_count` is the target's SM count (the prompt's <target> section carries
`sm_count: N`); `DEFAULT_SM_COUNT` (132, an H100/H200) when no target names it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kernelwright.providers.offline.choice.schedule import Kernel, Schedule
from kernelwright.providers.offline.emit.emit import ExprContext

if TYPE_CHECKING:
    from kernelwright.providers.offline.emit.kernel_gen import KernelGen

DEFAULT_SM_COUNT = 132
"""SMs of the GPU the defaults aim at (H100/H200) when the prompt's target does not say."""


DEFAULT_SMEM_BYTES = 227 * 1024
"""Shared memory one program may use on the GPU the defaults aim at (H100/H200) when the target does not say."""


DEFAULT_ARCH = 90
"""The compute capability the defaults aim at (an H100/H200: sm_90) when the target does not say."""


_SMEM_RE = re.compile(r"smem/block\s+(\d+)\s*KiB")
_ARCH_RE = re.compile(r"\bsm_(\d+)")
_SM_COUNT_RE = re.compile(r"\bsm_count\s*[:=]\s*(\d+)")
"""The target's limits as a <target> section states them (Target.summary, context_builder.target_facts)."""


def target_smem_bytes(target: str | None) -> int:
    """The shared memory per block a <target> section names (`smem/block N KiB`, as Target.summary writes
    it), or DEFAULT_SMEM_BYTES when it names none."""
    m = _SMEM_RE.search(target or "")
    n = int(m.group(1)) * 1024 if m else 0
    return n if n > 0 else DEFAULT_SMEM_BYTES


def without_target_limits(prompt: str) -> str:
    """`prompt` with the target's shared memory per block and SM count taken out, so that the writer
    falls back to DEFAULT_SMEM_BYTES and DEFAULT_SM_COUNT (an H100/H200) whatever GPU it is asked to
    write for: a writer with one GPU's habits, as a model trained on H100 kernels is, that learns another
    GPU's limits only from the failures its rules record."""
    for pattern in (_SMEM_RE, _SM_COUNT_RE):
        prompt = pattern.sub("", prompt)
    return prompt


def target_arch(target: str | None) -> int:
    """The compute capability a <target> section names (`sm_90`, as Target.summary writes it), or DEFAULT_ARCH
    when it names none."""
    m = _ARCH_RE.search(target or "")
    return int(m.group(1)) if m else DEFAULT_ARCH


def target_sm_count(target: str | None) -> int:
    """The SM count a <target> section names (`sm_count: N`, as nodes/context_builder.target_facts
    writes it), or DEFAULT_SM_COUNT when it names none."""
    m = _SM_COUNT_RE.search(target or "")
    n = int(m.group(1)) if m else 0
    return n if n > 0 else DEFAULT_SM_COUNT


@dataclass
class KernelInfo:
    """What a design choice looks at: the kernel, its kind and family, and the target. Each kind extends it
    with the facts of its own kernels (kind_rows.RowsInfo, kind_matmul.MatmulInfo,
    kind_pointwise.PointwiseInfo), filled by its `facts` from the sizes seen while tracing."""

    kernel: Kernel
    kind: str  # rows | matmul | pointwise
    family: str
    sm_count: int = DEFAULT_SM_COUNT
    """The target's SM count: how many programs fill the GPU."""
    smem_bytes: int = DEFAULT_SMEM_BYTES
    """The target's shared memory per program: which configs can launch at all (KernelKind.fits)."""
    arch: int = DEFAULT_ARCH
    """The target's compute capability (90 for sm_90): designs that only one architecture runs."""

    @property
    def cost(self) -> float:
        """A rough work estimate: which kernel of a program is its main one."""
        return _kind(self.kind).cost(self)


@dataclass(frozen=True)
class Design:
    name: str
    family: str
    kind: str
    mode: str
    space: dict[str, tuple[Any, ...]]
    applies: Callable[[Any], bool] = field(default=lambda info: True, compare=False)
    """Whether the design can be written for a kernel of its kind, given that kind's KernelInfo (designs_for
    checks the kind first)."""
    about: str = ""


InfoT = TypeVar("InfoT", bound=KernelInfo)


@dataclass(frozen=True)
class KernelKind(Generic[InfoT]):
    """One kind of kernel: its facts (a KernelInfo of its own class), designs, defaults and generator."""

    name: str
    info: type[InfoT]
    """The KernelInfo class of its kernels: the common facts and the kind's own."""
    config: type
    """The config dataclass of its designs, built as `config(mode=design.mode)`."""
    designs: Callable[[], dict[str, list[Design]]]
    """Its designs by family, in the order a family's defaults and neighbours read them."""
    facts: Callable[[Schedule, Kernel, InfoT], None]
    """Fill the kind's own fields of its KernelInfo (sizes from the traced hints)."""
    cost: Callable[[InfoT], float]
    default_design: Callable[[InfoT, dict[str, Design]], Design]
    """The default among the applicable designs (given by mode, the first design of each mode)."""
    default_config: Callable[[Design, InfoT, bool], dict[str, Any]]
    """(design, info, tf32 allowed) -> the default config values."""
    config_space: Callable[[Design, InfoT, bool], dict[str, tuple[Any, ...]]]
    generator: Callable[[Schedule, Kernel, Any, ExprContext], KernelGen]
    simplest_mode: str
    """The design mode a repair falls back to: the one known to compile and be correct."""
    launch_effect: Callable[[Design, InfoT, dict[str, Any]], tuple[Any, ...] | None] = field(
        default=lambda design, info, values: None
    )
    """What a config launches with on the traced sizes, where modelled (see designs.launch_effect)."""
    fits: Callable[[Design, InfoT, dict[str, Any]], bool] = field(default=lambda design, info, values: True)
    """Whether a config's kernel fits the target (registers, shared memory), where modelled (see designs.fits)."""
    last_resort: Callable[[Design, InfoT], bool] = field(default=lambda design, info: False)
    """Designs a large step reaches only after the others for this kernel (measured to lose there), where
    modelled (see designs.last_resort)."""
    task_derived: tuple[str, ...] = ()
    """Config keys whose default follows from the task's sizes alone (not a tuning choice): a case from
    another task does not carry its value over (see designs.task_derived_keys)."""


def _kind(name: str) -> KernelKind[Any]:
    # the kind modules import this one; plugins.KINDS is their list
    from kernelwright.providers.offline.plugins import KINDS

    return KINDS[name]


def make_config(design: Design, values: dict[str, Any]) -> Any:
    """The design's config object with `values` set (keys the config does not have are ignored)."""
    cfg = _kind(design.kind).config(mode=design.mode)
    for k, v in values.items():
        if hasattr(cfg, k):
            setattr(cfg, k, v)
    return cfg
