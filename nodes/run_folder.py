"""One run, one folder: which run a run folder holds, and claiming a folder for a run.

A run claims its folder when it starts by writing its run id to `.run-id` there, created exclusively, so
two runs starting at once (two Studio threads, two `kernelwright optimize`) cannot both take one folder.
A folder that holds another run is never written into by a new run: a default folder name moves on to
the next free name, a folder the caller named is refused (the caller may resume that run instead).

Folders written before the marker existed are recognized by their files: run.json (its thread id is the
run id of a `kernelwright optimize` run) or any file a run writes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RUN_ID_FILE = ".run-id"
"""The run id of the run a folder holds, one line."""
RUN_JSON = "run.json"
RUN_OUTPUTS = ("result.json", "evaluations.jsonl", "kernel.py", "report.html")
"""Files only a run that did some work writes."""
UNKNOWN_RUN = "an earlier run"
"""What `folder_owner` returns for a folder holding run files that name no run id."""


class RunFolderTaken(ValueError):
    """The folder holds another run; the message is one line."""


def folder_owner(path: str | Path) -> str | None:
    """The run id of the run `path` holds; UNKNOWN_RUN for run files naming none; None when it holds no run."""
    folder = Path(path)
    marker = folder / RUN_ID_FILE
    try:
        if marker.is_file():
            return marker.read_text(encoding="utf-8").strip() or UNKNOWN_RUN
        if (folder / RUN_JSON).is_file():
            return str(json.loads((folder / RUN_JSON).read_text(encoding="utf-8"))["thread_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return UNKNOWN_RUN
    if any((folder / name).exists() for name in RUN_OUTPUTS):
        return UNKNOWN_RUN
    return None


def taken_message(path: str | Path, owner: str) -> str:
    who = owner if owner == UNKNOWN_RUN else f"run {owner}"
    return f"{path} already holds {who}; one folder holds one run: give the new run another folder"


def claim(path: str | Path, run_id: str) -> bool:
    """Make `path` this run's folder; False when it holds another run (nothing is written then)."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    owner = folder_owner(folder)
    if owner not in (None, run_id):
        return False
    marker = folder / RUN_ID_FILE
    if owner == run_id and marker.is_file():
        return True
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # another run claimed it between the look and the claim
        return folder_owner(folder) == run_id
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(run_id + "\n")
    return True


def claim_run_folder(path: str | Path, run_id: str, *, named: bool) -> Path:
    """The folder this run writes to, claimed: `path` itself, or for a default name (`named=False`) taken
    by another run the first free `<path>-2`, `<path>-3`, ...; a named folder holding another run raises
    RunFolderTaken."""
    folder = Path(path)
    if claim(folder, run_id):
        return folder
    if named:
        raise RunFolderTaken(taken_message(folder, folder_owner(folder) or UNKNOWN_RUN))
    for n in range(2, 1000):
        other = folder.with_name(f"{folder.name}-{n}")
        if claim(other, run_id):
            return other
    raise RunFolderTaken(f"{folder}: no free folder name next to it")
