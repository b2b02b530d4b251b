"""The run's append-only evaluation log (evaluations.jsonl in the run directory).

Every worker evaluation of a candidate is appended (and fsynced) the moment it returns, before the
graph checkpoints the step. If the process dies in between, the resumed step finds the entry and reuses
it instead of evaluating the same code again; a program another node of the run already evaluated
(the same text) reuses that node's result too. The log is the record that no program was evaluated
twice. A line cut short by a crash is ignored.

A log that cannot be written (the run folder's filesystem full, a quota, a file size limit) raises
RunFolderError, one line that names the file, the cause and the verdict that could not be logged: the
run stops at its last checkpoint, and `--resume` runs that evaluation again once there is room.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelwright.hardware.result import EvalResult
from kernelwright.nodes.records import utc_now

Phase = Literal["verify", "time", "target_compile"]
LOG_NAME = "evaluations.jsonl"

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class RunFolderError(ValueError):
    """The run folder cannot be written; the run stops at its last checkpoint (the message says how to go
    on). A ValueError, like the other locations a user gives that cannot be used (the memory's)."""


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}
_SQLITE_WRITE_FAILURES = ("disk is full", "disk I/O error", "readonly database")


def write_failure(exc: BaseException, run_dir: str | os.PathLike[str] | None = None) -> str | None:
    """One line for an exception that says the disk would not take a write (full, a quota, a file size
    limit, read-only, an I/O error), from any of the run folder's writers (this log, the checkpoints, the
    outputs); None for any other exception."""
    if isinstance(exc, RunFolderError):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
        what = f"cannot write {exc.filename}" if exc.filename else "cannot write the run folder"
        cause = exc.strerror or str(exc)
    elif isinstance(exc, sqlite3.OperationalError) and any(s in str(exc) for s in _SQLITE_WRITE_FAILURES):
        what, cause = "cannot write the run's checkpoints", str(exc)
    else:
        return None
    resume = f" --resume {run_dir}" if run_dir else " --resume RUN_DIR"
    return (
        f"{what}: {cause}; the run stopped at its last checkpoint: make room, then continue with "
        f"kernelwright optimize{resume}"
    )


def code_sha(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


class EvaluationEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    run_id: str
    node_id: str
    phase: Phase
    code_sha256: str
    pid: int = Field(default_factory=os.getpid)
    at: str = Field(default_factory=utc_now)
    result: EvalResult


class EvaluationLog:
    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOG_NAME
        with _locks_guard:
            self._lock = _locks.setdefault(str(self.path.resolve()), threading.Lock())

    def entries(self) -> list[EvaluationEntry]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                out.append(EvaluationEntry.model_validate_json(line))
            except ValueError:
                continue  # a line the crash cut short
        return out

    def find(self, run_id: str, node_id: str, phase: Phase, sha: str) -> EvalResult | None:
        """The logged result of this run's evaluation of this code for this node, if any."""
        logged = self.find_program(run_id, node_id, phase, sha)
        return logged[1] if logged is not None and logged[0] == node_id else None

    def find_program(
        self, run_id: str, node_id: str, phase: Phase, sha: str
    ) -> tuple[str, EvalResult] | None:
        """(node id, result) of this run's evaluation of this exact code in this phase: the node's own
        entry when it has one (a step re-run after a crash), else the first other node's (a program
        written again need not run again). One read of the log."""
        first: tuple[str, EvalResult] | None = None
        with self._lock:
            for entry in self.entries():
                if entry.run_id == run_id and entry.phase == phase and entry.code_sha256 == sha:
                    if entry.node_id == node_id:
                        return entry.node_id, entry.result
                    first = first or (entry.node_id, entry.result)
        return first

    def append(self, entry: EvaluationEntry) -> None:
        line = json.dumps(entry.model_dump(mode="json"), separators=(",", ":")) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    # a previous crash may have left a partial line; start on a fresh one
                    if fh.tell() > 0 and not self._ends_with_newline():
                        fh.write("\n")
                    fh.write(line)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:  # a line cut short here is skipped when the log is read
                cause = exc.strerror or str(exc)
                raise RunFolderError(
                    f"cannot write {self.path}: {cause}; the run stopped at its last checkpoint, and the "
                    f"evaluation of {entry.node_id} ({entry.result.summary()}) was not logged: make room, then "
                    f"continue with kernelwright optimize --resume {self.path.parent}"
                ) from None

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"
