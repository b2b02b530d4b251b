"""The state a judge holds across jobs, and the helpers every stage uses: the precision switches and the
device synchronisation. One job's state is not here: it is a `hardware.judge_job.Job`, passed to every
stage.

The judge is built in layers, one module per purpose, each a class over the one before:
JudgeBase -> ReferenceSide (hardware.judge_reference) -> CandidateIO (hardware.judge_exchange) ->
Verification (hardware.judge_verification) -> Timing (hardware.judge_timing) -> Judge (hardware.judge).
"""

from __future__ import annotations

from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any

from kernelwright.hardware.candidate_process import ForkServer
from kernelwright.hardware.judge_records import _TaskState
from kernelwright.hardware.result import Versions


class JudgeBase:
    """The judge's state across jobs (set by Judge.__init__) and the helpers every stage uses."""

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

    def _apply_precision(self, precision: str) -> None:
        """TF32 for matmul and cuDNN conv only where the precision mode allows it, reference included."""
        tf32 = precision != "strict"
        self.torch.set_float32_matmul_precision("high" if tf32 else "highest")
        self.torch.backends.cudnn.allow_tf32 = tf32

    def _sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()
