"""How one evaluation is run: device, per-stage time limits, trials, seed, precision policy, timing.

`EvalConfig` travels from the caller (graph node, CLI, benchmark) to the worker that runs the
candidate, so it holds plain values only. Its time limits are enforced by the parent process, which
kills the worker when a stage runs past its limit; the worker never polices itself.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelwright.hardware.result import PrecisionMode, Versions

DeviceChoice = Literal["auto", "cpu", "cuda"]
WorkerStage = Literal["reference", "compile", "correctness", "timing", "baseline"]
"""Stages the worker reports while it runs a job; each has its own time limit.

`reference` covers loading the task and computing its inputs and outputs (once per worker; running
past the limit there is a harness error, not the candidate's); `compile` covers importing the candidate, building ModelNew and its first forward (where Triton
compiles); `correctness` the verification trials; `timing` the interleaved candidate/eager timing;
`baseline` timing the torch.compile'd reference, once per task (a timeout there is not the candidate's
fault: the verified result is kept and the baseline reported missing).
"""

# Default limits in seconds, relative to a 120 s base that `timeout` replaces. Compiling an autotuned
# kernel on a GPU and torch.compile'ing a reference are the slow steps; verification rarely is.
_BASE_TIMEOUT_S = 120.0
_STAGE_SHARE: dict[str, float] = {
    "reference": 2.5,
    "compile": 1.0,
    "correctness": 1.0,
    "timing": 1.0,
    "baseline": 2.5,
}


class EvalConfig(BaseModel):
    """Settings of one evaluation; every field has a default that suits the agent's search loop."""

    model_config = ConfigDict(extra="forbid")

    device: DeviceChoice = "auto"
    """Where the candidate runs: `cuda` (one worker per GPU), `cpu` (Triton interpreter) or `auto`."""
    timeout: float | None = Field(default=None, gt=0)
    """One override for every stage: compile, correctness and timing get `timeout` seconds each, the
    reference and the torch.compile baseline 2.5x as much. A per-stage field below, when set, wins."""
    reference_timeout_s: float | None = Field(default=None, gt=0)
    compile_timeout_s: float | None = Field(default=None, gt=0)
    correctness_timeout_s: float | None = Field(default=None, gt=0)
    timing_timeout_s: float | None = Field(default=None, gt=0)
    baseline_timeout_s: float | None = Field(default=None, gt=0)
    trials: int = Field(default=3, ge=3)
    """Verification trials on the first input shape, each with fresh inputs (a seed of its own, drawn from
    the OS for the job)."""
    second_shape_trials: int = Field(default=1, ge=1)
    """Trials on the second shape (a shape-specific bug shows on its first call; the cached-result check
    and the train/eval alternation run on the first shape)."""
    seed: int = 0
    """Builds the reference and ModelNew (torch seeded); never the inputs a candidate is verified on nor the
    perturbation of the parameters it is loaded with: those are drawn from the OS for every job (see
    `input_seeds`)."""
    input_seeds: dict[str, list[int]] | None = None
    """Replay only: the seeds of an earlier job's inputs, as its result's `extra["input_seeds"]` lists them
    (per input shape, "recheck" and "parameters"), to reproduce its verdict. None, the default, draws fresh seeds from
    the OS for every job, so no candidate can know or reproduce the inputs it is verified on."""
    precision: PrecisionMode = "strict"
    """`strict`: fp32 outputs held to fp32 tolerance and TF32 off for the reference too; `tf32`
    (--allow-tf32): TF32 matmul/conv on for the reference and fp32 held to a TF32-level tolerance;
    `reduced`: fp32 held to a bf16/fp16-level tolerance."""
    time: bool = True
    """Time the candidate (GPU only; on CPU the result says timing is not meaningful)."""
    atol: float | None = Field(default=None, ge=0)
    """Override of the tolerance table's atol (before scaling by the output's magnitude)."""
    rtol: float | None = Field(default=None, ge=0)
    reference_fp64: bool = True
    """In strict precision, also run the reference in float64 and allow float32 outputs 16x the
    float32 reference's own rounding error (see hardware.judge.compare); False compares against the float32
    reference with the table's tolerance alone (with atol/rtol overrides: exactly those)."""
    second_shape: bool = True
    """Also verify on the task's second input shape where it has one (GPU: full and small inputs)."""
    compile_baseline: bool = True
    """Time the torch.compile'd reference (once per task, cached) and report speedup_vs_compile."""
    warmup_ms: float = Field(default=25.0, gt=0)
    rep_ms: float = Field(default=100.0, gt=0)
    """Target measuring time per timed function; the repetition count is derived from it."""

    def stage_timeout(self, stage: str) -> float:
        """The time limit in seconds for a worker stage (see WorkerStage)."""
        explicit = getattr(self, f"{stage}_timeout_s", None)
        if explicit is not None:
            return float(explicit)
        base = self.timeout if self.timeout is not None else _BASE_TIMEOUT_S
        return base * _STAGE_SHARE.get(stage, 1.0)


def toolchain_versions() -> Versions:
    """Versions of torch, triton and Python as installed, without importing torch or triton."""
    return Versions.installed()
