"""The state a judge holds across its stages, and the helpers every stage uses: stage changes and their
deadlines (told to the pool), ending a job with a verdict, the precision switches, reading the
candidate process's replies.

The judge is built in layers, one module per purpose, each a class over the one before:
JudgeBase -> ReferenceSide (hardware.judge_reference) -> CandidateIO (hardware.judge_exchange) ->
Verification (hardware.judge_verification) -> Timing (hardware.judge_timing) -> Judge (hardware.judge).
They share one object's state (the job's config, the candidate process, the stage deadline), which is
declared here.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any, NoReturn, get_args

from kernelwright.hardware.candidate_process import CandidateProcess, ForkServer
from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.failures import tail
from kernelwright.hardware.judge_inputs import JobSeeds
from kernelwright.hardware.judge_records import _TaskState
from kernelwright.hardware.result import ErrorKind, EvalResult, Versions

_ERROR_KINDS = set(get_args(ErrorKind))


class _Stop(Exception):
    """Ends a job early; the result it carries is already filled in."""


class _Unverifiable(Exception):
    """The task itself cannot be verified (its reference is random): no candidate's fault."""


class JudgeBase:
    """The judge's state (set by Judge.__init__ and Judge.run_job) and the helpers every stage uses."""

    conn: Connection
    torch: Any
    """The torch module (imported in the judge process only)."""
    device: str
    device_name: str
    tmpdir: str
    tasks: OrderedDict[str, _TaskState]
    interpret: bool
    versions: Versions
    target: str
    target_profile: dict[str, Any] | None
    forkserver: ForkServer
    ipc_usable: bool
    ipc_worked: bool
    _flush_buf: Any
    # One job's state (set by run_job):
    _cfg: EvalConfig
    _restart: bool
    _proc: CandidateProcess | None
    _phases: dict[str, float]
    _peaks: dict[str, int]
    _fp64_budget_s: float
    _stage_name: str
    _stage_deadline: float
    _seeds: JobSeeds | None
    """The job's input seeds, drawn from the OS once its shapes are known (hardware.judge_inputs)."""
    _ref_ops: set[str]
    """The compute ops the task's reference dispatches (judged against every recorded forward)."""

    def _stage(self, job_id: int, stage: str) -> None:
        self.conn.send(("stage", job_id, stage))
        self._stage_name = stage
        self._stage_deadline = time.monotonic() + self._cfg.stage_timeout(stage)
        if self._proc is not None:
            self._proc.limit_s = self._cfg.stage_timeout(stage)

    def _remaining(self) -> float:
        return self._stage_deadline - time.monotonic()

    def _fail(self, res: EvalResult, stage: str, kind: str, error: str) -> NoReturn:
        res.correct = False
        res.stage = stage  # type: ignore[assignment]
        res.error_kind = kind if kind in _ERROR_KINDS else "runtime_error"  # type: ignore[assignment]
        res.error = tail(error)
        raise _Stop

    def _apply_precision(self, precision: str) -> None:
        """TF32 for matmul and cuDNN conv only where the precision mode allows it, reference included."""
        tf32 = precision != "strict"
        self.torch.set_float32_matmul_precision("high" if tf32 else "highest")
        self.torch.backends.cudnn.allow_tf32 = tf32

    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def _check_reply(self, reply: dict[str, Any], expected: str, res: EvalResult) -> None:
        op = reply.get("op")
        if op == "failed":
            stage = reply.get("stage") if reply.get("stage") in ("parse", "compile", "run", "correctness",
                                                                  "timing") else "run"  # fmt: skip
            kind = str(reply.get("kind"))
            if (
                kind == "harness_error"
            ):  # the candidate side cannot blame the harness on the candidate's behalf
                kind = "runtime_error"
            self._fail(res, str(stage), kind, str(reply.get("text", ""))[-2000:])
        if op != expected:
            self._fail(
                res, "run", "forbidden", f"the candidate process answered {op!r} where {expected!r} was due"
            )
