"""What a judge keeps per task: the shapes it verifies on, the reference models and their cached samples,
the device buffers lent to candidate processes, and the per-task decisions (modes, lean, fit).

Plain records; the judge's stages (hardware.judge.reference, judge_session, judge_verification,
judge_timing) fill and read them. Nothing here is sent to a candidate process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Shape:
    """One input shape a candidate is verified on."""

    label: str
    """"full", "small" or "derived"; the key of the model built for it on both sides."""
    module: Any
    small: bool
    """Use the module's get_small_inputs() / get_small_init_inputs()."""
    note: str = ""
    transform: Any = None
    """Applied to the module's inputs (a sliced shape, for tasks whose sizes are not constants)."""


@dataclass
class Sample:
    """One trial's pristine inputs and the reference's outputs, float32 and (where used) float64."""

    inputs: list[Any]
    out: Any
    inputs_after: list[Any] | None = None
    """The inputs as the reference left them, when its forward changed them; None when it did not."""
    out64: Any = None
    fp64_status: str | None = None
    """None: not tried; "used"; "not used: ..." (not applicable); "unavailable: ..." (it failed)."""
    buffers: dict[str, Any] = field(default_factory=dict)
    """Every buffer of the reference after this forward (running stats updated in train mode)."""
    buffers64: dict[str, Any] = field(default_factory=dict)
    """The float64 run's buffers after its forward (where that run was used): the buffers' anchor."""
    forward_seed: int = 0
    """torch's RNG is seeded with this before the reference's forward and before the candidate's on these
    inputs: a forward that draws random numbers (`h0 = torch.randn(...)`, level3/35) draws the same ones on
    both sides when it makes the same calls."""


@dataclass
class Reference:
    """One shape of one task: the reference model (perturbed) and its cached samples per seed."""

    shape: Shape
    init_inputs: list[Any]
    model: Any
    samples: dict[tuple[int, str, str], Sample] = field(default_factory=dict)
    """Per (seed, precision, mode)."""
    fp64_s: float | None = None
    fp64_failure: str | None = None
    exchange: Exchange | None = None
    """On a GPU with CUDA IPC: the device buffers lent to candidate processes for this shape."""
    state0: dict[str, Any] = field(default_factory=dict)
    """The perturbed state_dict every forward starts from (a train-mode forward updates running stats)."""
    lean: bool = False
    """Hold one sample at a time (the task is large; see TaskState.lean)."""
    lean_float64: bool = False
    """A lean shape that still gets its float64 reference (see lean_float64_fits)."""
    perturbed_with: int | None = None
    """The seed the model's parameters and buffers were perturbed with (a job's own: JobSeeds.parameters)."""
    built_modes: dict[str, bool] = field(default_factory=dict)
    """Each submodule's `training` flag as the task's constructor left it (a task may build a module in
    eval mode on purpose)."""

    def restore(self, mode: str) -> None:
        """Put the model back in its starting state, in `mode`: "train" is the modes the constructor left
        (train, unless the task chose otherwise for a module), "eval" is model.eval()."""
        if self.state0:
            self.model.load_state_dict(self.state0)
        if mode == "eval":
            self.model.eval()
        else:
            for name, module in self.model.named_modules():
                module.training = self.built_modes.get(name, True)


@dataclass
class Exchange:
    """Device buffers for one shape, exported to candidate processes (hardware.isolation.cuda_ipc)."""

    inputs: list[Any]
    outputs: list[Any]

    def descriptions(self) -> dict[str, Any]:
        return {
            "inputs": [b.description() for b in self.inputs],
            "outputs": [b.description() for b in self.outputs],
        }


@dataclass
class TaskState:
    module: Any
    name: str
    digest: str
    shapes: dict[tuple[bool, bool], list[Shape]] = field(default_factory=dict)
    """Per (device is CUDA, second shape wanted): the shapes verified, primary first."""
    refs: dict[tuple[str, int], Reference] = field(default_factory=dict)
    reference_ops: dict[str, int] | None = None
    baseline: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    """torch.compile baselines by key: (its median ms, its speedup over eager in paired rounds), or None."""
    modes: list[str] | None = None
    """The modules' modes a candidate is verified in: ["train"], ["eval"] or ["train", "eval"]."""
    modes_note: str = ""
    stateful: bool = False
    """Forward changes the reference's buffers (running stats): each call starts from the loaded state and
    the candidate's buffers are compared after it."""
    lean: bool = False
    """A large task: one trial's inputs and outputs held at a time (recomputed per candidate), no float64
    reference unless it fits (lean_float64), no copies the judge can do without, other tasks' state dropped
    (see ReferenceCache.fits in hardware.judge.reference)."""
    lean_float64: bool = False
    """A lean task whose float64 reference fits the free device memory (see lean_float64_fits)."""
    footprint_checked: bool = False
    unfit: str | None = None
    """Why the task does not fit this GPU, once found (every later job is told the same)."""
