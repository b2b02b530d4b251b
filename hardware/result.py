"""The one record every evaluation returns, whatever happened to the candidate.

`EvalResult` is never None and never replaced by an exception: a candidate that does not parse, hangs,
segfaults or computes wrong numbers still yields an `EvalResult`, with `stage` telling how far it got
and `error_kind` naming what stopped it.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Stage = Literal["parse", "compile", "run", "correctness", "timing", "done"]
"""How far the candidate got. `done` means verified (and timed, where timing is meaningful)."""

ErrorKind = Literal[
    "static_check",  # rejected before running: no ModelNew, no Triton kernel, calls the reference, ...
    "syntax_error",  # the candidate source does not parse
    "import_error",  # importing the candidate module failed
    "compile_error",  # Triton failed to compile a kernel
    "runtime_error",  # an exception while running forward (not a compile error)
    "shape_mismatch",  # output shape, dtype or count differs from the reference
    "mismatch",  # values outside tolerance (NaN/inf mismatches included)
    "timeout",  # a stage ran past its time limit; the worker was killed
    "crash",  # the worker process died (segfault, abort, CUDA error, out of memory)
    "harness_error",  # the reference itself could not run; not the candidate's fault
    "torch_fallback",  # runtime evidence: the output was computed by torch ops, not by the Triton kernels
    "forbidden",  # did what the judge forbids at run time: threads, tensor subclasses, writing its inputs,
    # switching off poisoning, tampering with the recorder or the timers, breaking the protocol
]

PrecisionMode = Literal["strict", "tf32", "reduced"]
"""`strict`: fp32 held to fp32 tolerance; `tf32`: TF32 matmul/conv allowed; `reduced`: bf16/fp16-level."""


class Tolerance(BaseModel):
    """The tolerance a result was checked against (one row of the per-dtype table)."""

    dtype: str
    rtol: float
    atol: float
    precision: PrecisionMode = "strict"
    atol_scale: float = 1.0
    """atol was applied as atol * atol_scale, the scale being max(1, RMS of the reference output)."""
    reference_error: float | None = None
    """E, the reference's own rounding error scale: the 99.9th percentile of |float32 reference - float64
    reference| over the output, when values were compared against a float64 run of the reference
    (strict precision, float32 outputs); None when they were compared against the reference alone."""
    allowance_factor: float | None = None
    """C: each element was also allowed C * max(E, its own reference error) beyond atol and rtol."""


class Versions(BaseModel):
    """Toolchain a result was produced with; memory entries carry the same fields."""

    torch: str = ""
    triton: str = ""
    python: str = ""
    cuda: str | None = None

    @classmethod
    def installed(cls) -> Versions:
        """torch, triton and Python as installed here, read from package metadata (imports neither)."""

        def version_of(dist: str) -> str:
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                return ""

        return cls(torch=version_of("torch"), triton=version_of("triton"), python=platform.python_version())


class EvalResult(BaseModel):
    """Outcome of evaluating one candidate against one task."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = 1
    correct: bool = False
    stage: Stage = "parse"
    error_kind: ErrorKind | None = None
    error: str | None = Field(default=None, description="tail of the error message or mismatch report")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    tolerance: Tolerance | None = None
    precision: PrecisionMode = "strict"
    trials: int = 0
    shapes_checked: list[list[list[int]]] = Field(default_factory=list)
    runtime_ms: float | None = None
    runtime_ci_ms: tuple[float, float] | None = None
    """95% bootstrap confidence interval of the candidate's median runtime."""
    runtime_p20_ms: float | None = None
    runtime_p80_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    """torch.compile's time at this candidate's session: eager_ms over torch.compile's speedup on eager, which the
    judge timed in paired rounds once per task (its own median is extra["compile_ms_measured"])."""
    speedup_vs_eager: float | None = None
    """Median of the per-round eager/candidate time ratios (alternating rounds)."""
    speedup_vs_compile: float | None = None
    """speedup_vs_eager over torch.compile's paired speedup on eager (extra["compile_speedup_vs_eager"])."""
    speedup_vs_eager_ci: tuple[float, float] | None = None
    """95% bootstrap interval of the median of paired (interleaved) eager/candidate time ratios."""
    timing_reps: int = 0
    timing_meaningful: bool = False
    timing_note: str | None = None
    roofline_floor_ms: float | None = None
    fraction_of_floor: float | None = None
    torch_ops_remaining: list[str] = Field(default_factory=list)
    target: str = ""
    device: str = ""
    versions: Versions = Field(default_factory=Versions)
    mismatched: int | None = None
    """Elements outside tolerance (NaN/inf included) in the output that failed, for a mismatch."""
    kernel_launches: int | None = None
    """Triton kernel launches counted during one forward of the candidate."""
    wall_s: float = 0.0
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return not self.correct

    def summary(self) -> str:
        """One line for logs and the CLI: the verdict, and the first line of the error or the timing."""
        if not self.correct:
            first = next((line.strip() for line in (self.error or "").splitlines() if line.strip()), "")
            return f"FAIL at {self.stage}: {self.error_kind}: {first}"
        if self.timing_meaningful and self.runtime_ms is not None:
            s = f"correct, {self.runtime_ms:.4f} ms"
            if self.speedup_vs_eager:
                s += f", {self.speedup_vs_eager:.2f}x vs eager"
            if self.speedup_vs_compile:
                s += f", {self.speedup_vs_compile:.2f}x vs torch.compile"
            return s
        if self.error_kind:  # verified, but timing failed (e.g. ran past its limit)
            return f"correct, not timed: {self.error_kind}: {(self.error or '').splitlines()[0] if self.error else ''}"
        return f"correct ({self.timing_note or 'not timed'})"
