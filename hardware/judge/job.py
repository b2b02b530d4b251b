"""One job in the judge: the request as the pool sends it (`JobRequest`, validated on arrival) and the
state the judge keeps while it runs (`JobState`): its config and result, the stage and its deadline, the
candidate process, where the time went, the float64 reference's time budget, the job's seeds and the
ops its reference dispatches.

A `JobState` is made per request and passed explicitly to every part (hardware.judge.server, hardware.judge.session,
judge_verification, judge_timing); nothing of one job is kept on the judge, so nothing has to be reset
between jobs. `JobState.fail` ends the job with a verdict (raising `Stop`, which Judge.run_job catches).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, get_args

from pydantic import BaseModel, ConfigDict

from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.failures import tail
from kernelwright.hardware.result import ErrorKind, EvalResult

if TYPE_CHECKING:
    from kernelwright.hardware.isolation.candidate_process import CandidateProcess
    from kernelwright.hardware.judge.inputs import JobSeeds

_ERROR_KINDS = set(get_args(ErrorKind))
_REPLY_STAGES = ("parse", "compile", "run", "correctness", "timing")


class Stop(Exception):
    """Ends a job early; the result it carries is already filled in."""


class Unverifiable(Exception):
    """The task itself cannot be verified (its reference is random, or it does not fit): no candidate's fault."""


class JobRequest(BaseModel):
    """What the pool sends for one evaluation (hardware.judge.pool.WorkerPool builds it as a dict)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: int
    task_name: str
    task_source: str
    candidate_source: str
    config: EvalConfig
    torch_ops_remaining: list[str] = []


@dataclass
class TimeBudget:
    """Seconds left for some optional work within one job (the float64 reference runs)."""

    seconds: float

    def spend(self, seconds: float) -> None:
        self.seconds = max(0.0, self.seconds - seconds)


@dataclass
class JobState:
    """One job's state, passed to every stage (see the module docstring)."""

    request: JobRequest
    result: EvalResult
    send: Callable[[tuple[Any, ...]], None]
    """Sends a message to the pool (the judge's connection)."""
    fp64_budget: TimeBudget
    proc: CandidateProcess | None = None
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds spent per phase (the result's extra["phases_s"])."""
    peaks: dict[str, int] = field(default_factory=dict)
    """The candidate process's reported peak device memory per request kind."""
    stage_name: str = "reference"
    stage_deadline: float = 0.0
    seeds: JobSeeds | None = None
    """The job's input seeds, drawn from the OS once its shapes are known (hardware.judge.inputs)."""
    ref_ops: dict[str, int] = field(default_factory=dict)
    """The compute ops the task's reference dispatches (judged against every recorded forward)."""
    restart: bool = False
    """The judge's own work hit a CUDA error or ran out of memory: the pool replaces the judge."""

    @property
    def cfg(self) -> EvalConfig:
        return self.request.config

    @property
    def job_id(self) -> int:
        return self.request.job_id

    @property
    def notes(self) -> list[str]:
        notes: list[str] = self.result.extra.setdefault("notes", [])
        return notes

    def stage(self, stage: str) -> None:
        """A stage change: told to the pool, and its time limit applied to the candidate process too."""
        self.send(("stage", self.job_id, stage))
        self.stage_name = stage
        self.stage_deadline = time.monotonic() + self.cfg.stage_timeout(stage)
        if self.proc is not None:
            self.proc.limit_s = self.cfg.stage_timeout(stage)

    def remaining(self) -> float:
        return self.stage_deadline - time.monotonic()

    def fail(self, stage: str, kind: str, error: str) -> NoReturn:
        res = self.result
        res.correct = False
        res.stage = stage  # type: ignore[assignment]
        res.error_kind = kind if kind in _ERROR_KINDS else "runtime_error"  # type: ignore[assignment]
        res.error = tail(error)
        raise Stop

    def check_reply(self, reply: dict[str, Any], expected: str) -> None:
        """The candidate process's reply is `expected`; a failure it reports ends the job with its verdict."""
        op = reply.get("op")
        if op == "failed":
            stage = reply.get("stage") if reply.get("stage") in _REPLY_STAGES else "run"
            kind = str(reply.get("kind"))
            if (
                kind == "harness_error"
            ):  # the candidate side cannot blame the harness on the candidate's behalf
                kind = "runtime_error"
            self.fail(str(stage), kind, str(reply.get("text", ""))[-2000:])
        if op != expected:
            self.fail("run", "forbidden", f"the candidate process answered {op!r} where {expected!r} was due")
