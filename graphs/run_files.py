"""A run folder's files: run.json (what `--resume` needs) and the LangGraph SQLite checkpoints, with the
serializer that revives the state's records from them; whether a folder already holds a run.

Kept apart from the optimize graph so that reading a run (`kernelwright show`) does not build the graph,
whose nodes import torch and Triton.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel, ValidationError

from kernelwright.nodes.run_folder import (
    RUN_ID_FILE,
    RUN_OUTPUTS,
    UNKNOWN_RUN,
    RunFolderTaken,
    claim,
    folder_owner,
    taken_message,
)
from kernelwright.nodes.state import CHECKPOINT_TYPES

RUN_FILE = "run.json"
CHECKPOINT_FILE = "checkpoints.sqlite"


_OLD_MODULE = re.compile(rb"(?<![\w.])(?:graphs|nodes|providers|memory|hardware|tasks)\.\w+")
"""A module name from before kernelwright imported under one name (0.1: `nodes.records`, `tasks.task`)."""
_OLD_PREFIXES = tuple(f"{name}." for name in ("graphs", "nodes", "providers", "memory", "hardware", "tasks"))
_TYPE_EXTS = frozenset(range(6))
"""langgraph's msgpack extension codes whose payload starts with (module, name, ...)."""


_RENAMED_TYPES = {("kernelwright.nodes.records", "Design"): "RepresentativeDesign"}
"""Record classes renamed since they were written to checkpoints: (module, old name) -> new name."""
_OLD_NAME = re.compile(rb"(?<![A-Za-z])Design(?![A-Za-z])")


def _renamed(payload: bytes, code: int | None = None) -> bytes:
    """A msgpack payload with every record's 0.1 module name moved under kernelwright and every renamed
    record class under its new name (nested ones too)."""
    value = ormsgpack.unpackb(
        payload, ext_hook=lambda c, d: ormsgpack.Ext(c, _renamed(d, c)), option=ormsgpack.OPT_NON_STR_KEYS
    )
    if code in _TYPE_EXTS and isinstance(value, list) and len(value) > 1:
        if str(value[0]).startswith(_OLD_PREFIXES):
            value = ["kernelwright." + value[0], *value[1:]]
        new = _RENAMED_TYPES.get((str(value[0]), str(value[1])))
        if new is not None:
            value = [value[0], new, *value[2:]]
    return ormsgpack.packb(value, option=ormsgpack.OPT_NON_STR_KEYS)


class _Serializer(JsonPlusSerializer):
    """JsonPlusSerializer that also reads checkpoints written by kernelwright 0.1, whose records were
    named `nodes.records.Job` and so on, and records whose class was renamed since (`Design`): they load
    as the same types, so such runs resume."""

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind == "msgpack" and (_OLD_MODULE.search(payload) or _OLD_NAME.search(payload)):
            payload = _renamed(payload)
        return super().loads_typed((kind, payload))


def serializer() -> JsonPlusSerializer:
    """A serializer that revives exactly the state's record types from checkpoints."""
    return _Serializer(allowed_msgpack_modules=[(t.__module__, t.__name__) for t in CHECKPOINT_TYPES])


def open_checkpointer(run_dir: str | Path) -> SqliteSaver:
    path = Path(run_dir) / CHECKPOINT_FILE
    conn = sqlite3.connect(str(path), check_same_thread=False)
    return SqliteSaver(conn, serde=serializer())


class RunFile(BaseModel):
    """run.json: what `--resume RUN_DIR` needs to continue a run."""

    thread_id: str
    input: dict[str, str]
    context: dict[str, Any]
    created_by: str = "kernelwright optimize"


def write_run_file(run_dir: str | Path, run: RunFile) -> None:
    """Claim `run_dir` for `run` (its `.run-id`, created exclusively: nodes/run_folder.claim), then write
    its run.json; RunFolderTaken (one line) when another run claimed the folder first, in which case
    nothing is written. Two runs started into one folder at once: one gets it, the other is told."""
    rd = Path(run_dir)
    if not claim(rd, run.thread_id):
        raise RunFolderTaken(taken_message(rd, folder_owner(rd) or UNKNOWN_RUN))
    tmp = rd / f".{RUN_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(run.model_dump(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, rd / RUN_FILE)  # whole or not at all


def read_run_file(run_dir: str | Path) -> RunFile:
    """The run.json of a run directory; a ValueError with one line when it is missing or damaged."""
    rd = Path(run_dir)
    path = rd / RUN_FILE
    if not rd.is_dir():
        raise ValueError(f"{rd}: no such run directory")
    if not path.is_file():
        raise ValueError(f"{rd}: not a run directory (no {RUN_FILE})")
    try:
        return RunFile.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise ValueError(f"{path} is damaged, not a run file kernelwright wrote ({detail})") from exc


def held_run(run_dir: str | Path) -> str | None:
    """The run id of a run `run_dir` holds that started (it has a checkpoint or wrote results), else None.

    A folder whose run.json names a run that never reached its first checkpoint holds nothing worth
    keeping (a run stopped while it started): a new run may take it over."""
    rd = Path(run_dir)
    owner = folder_owner(rd)
    if owner is None:
        return None
    if any((rd / name).exists() for name in RUN_OUTPUTS) or not (rd / RUN_FILE).is_file():
        return owner
    try:
        saved = read_run_file(rd)
    except ValueError:
        return UNKNOWN_RUN
    if not (rd / CHECKPOINT_FILE).is_file():
        return None
    saver = open_checkpointer(rd)
    try:
        started = saver.get_tuple({"configurable": {"thread_id": saved.thread_id}}) is not None
    except sqlite3.DatabaseError:
        started = True
    finally:
        saver.conn.close()
    return owner if started else None


def check_new_run_folder(run_dir: str | Path, what: str = "") -> None:
    """A new run may write to `run_dir`: RunFolderTaken (one line, naming how to continue the run there)
    when it holds another run; a stale claim of a run that never started is removed."""
    rd = Path(run_dir)
    owner = held_run(rd)
    name = f"{what} {rd}" if what else str(rd)
    if owner is not None:
        how = (
            f"continue it with kernelwright optimize --resume {rd}, or give another folder"
            if (rd / RUN_FILE).is_file()
            else "give another folder"
        )
        who = owner if owner == UNKNOWN_RUN else f"run {owner}"
        raise RunFolderTaken(f"{name} already holds {who}: {how}")
    # A run that never started (or no run): its claim and run.json go, so the new run can claim the folder.
    (rd / RUN_ID_FILE).unlink(missing_ok=True)
    if folder_owner(rd) is not None:
        (rd / RUN_FILE).unlink(missing_ok=True)
