"""The typed form of a KernelBench-format task (a module with Model, get_inputs, get_init_inputs)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class TaskSignature(BaseModel):
    """What a task computes, in the terms memory and the writer match on.

    `op_families` are coarse kinds such as "matmul", "conv", "reduction", "softmax", "norm",
    "pointwise", "scan", "loss"; `ops` are the aten op names the reference ran.
    """

    op_families: list[str] = Field(default_factory=list)
    ops: list[str] = Field(default_factory=list)
    input_shapes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)
    output_shapes: list[list[int]] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)

    def key(self) -> str:
        """A short text form, used as the embedding/matching text for this task's shape of work."""
        fam = "+".join(self.op_families) or "unknown"
        shapes = ";".join("x".join(map(str, s)) for s in self.input_shapes)
        return f"{fam} | {' '.join(self.ops)} | in {shapes} | {','.join(sorted(set(self.input_dtypes)))}"


class Task(BaseModel):
    """A loaded reference program."""

    name: str
    source: str
    path: Path | None = None
    signature: TaskSignature = Field(default_factory=TaskSignature)
    small_signature: TaskSignature | None = None
    has_small_inputs: bool = False
    flops: float = 0.0
    """FLOPs of one forward at the full size (torch.utils.flop_counter), 0 when it counts none."""
    min_bytes: float = 0.0
    """Bytes one forward must move at the full size: inputs and parameters read once, outputs written once."""
    cost_exact: bool = True
    """False when the forward could not run on the meta device at the full size: then `flops` is 0 and
    `min_bytes` counts only inputs and parameters (both lower bounds), and `signature` has no output shapes."""
    checked_on: str = ""
    """Where loading ran the forward for real: "cpu-small" (get_small_inputs), "cpu-full" (the full size
    was cheap enough), or "meta" (too large for CPU, no get_small_inputs: checked on the meta device only)."""
    cpu_resizable: bool | None = None
    """For a task checked on "meta": whether the CPU judge can verify it at a smaller size found by changing
    its module-level size constants (tasks/resize.py); False means only at its full size. None otherwise."""
