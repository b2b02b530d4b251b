"""The bench folder on disk: what a bench is, which tasks it holds, and what has finished (the resume log).

The bench folder (--out DIR) holds:

    bench.json       what the bench is: the folders given, the task list (fixed when it starts), the
                     settings (the optimize Context every task runs with)
    tasks.jsonl      append-only: one TaskRow (bench/report.py) per task as it finishes, fsynced;
                     a later line for the same task replaces an earlier one (an `error` retried)
    sessions.json    start, end and elapsed seconds of each session (a start or a --resume)
    runs/<suite>/<task>/   each task's own run directory (run_optimize: kernel.py, result.json,
                     report.html, checkpoints, evaluation log), so a task cut off mid-search continues
                     where it stopped and no candidate is evaluated twice
    logs/<worker>.log      each worker's stderr
    bench.lock       held (flock) by the process running the bench: one at a time
    suite.json, suite.md, suite.html   the report, rewritten after every finished task

This module reads and writes those files (the coordinator, bench/coordinator.py, is the only writer while a
bench runs; its workers, bench/worker.py, only read bench.json) and finds a bench's tasks.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from kernelwright.bench.render import write_suite, write_text_atomic
from kernelwright.bench.report import TaskRow, build_suite

if TYPE_CHECKING:
    from kernelwright.nodes.run_context import Context

BENCH_FILE, LEDGER_FILE, SESSIONS_FILE, LOCK_FILE = "bench.json", "tasks.jsonl", "sessions.json", "bench.lock"
RUNS_DIR, LOGS_DIR = "runs", "logs"


class BenchError(ValueError):
    """Bad input or a bench folder that cannot be used; the message is one line."""


class BenchTask(BaseModel):
    id: str
    suite: str
    name: str
    path: str

    def run_dir(self, bench_dir: Path) -> Path:
        return bench_dir / RUNS_DIR / self.suite / self.name


class BenchFile(BaseModel):
    """bench.json."""

    schema_version: int = 1
    created_by: str = "kernelwright bench"
    created_at: str
    paths: list[str]
    context: dict[str, Any]
    tasks: list[BenchTask]
    unseen: int = 0
    """--unseen K: each task's best kernel judged at K sizes its search never saw (bench/unseen.py);
    0 in benches made before the option."""


def utc_now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


# -- tasks ------------------------------------------------------------------------------------------------------


def _natural(name: str) -> tuple[int, str]:
    """KernelBench numbers its files 1_..., 2_..., 10_...: order by that number, then by name."""
    m = re.match(r"(\d+)", name)
    return (int(m.group(1)) if m else sys.maxsize, name)


def discover(paths: Sequence[str]) -> list[BenchTask]:
    """The tasks of the folders (every *.py not starting with "_") and task files given, in order."""
    tasks: list[BenchTask] = []
    seen: set[Path] = set()
    suites: dict[str, Path] = {}
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.exists():
            raise BenchError(f"{raw}: no such folder or task file")
        folder = p.resolve() if p.is_dir() else p.resolve().parent
        if p.is_dir():
            files = sorted(
                (f for f in p.glob("*.py") if not f.name.startswith("_")), key=lambda f: _natural(f.stem)
            )
            if not files:
                raise BenchError(f"{raw}: no task files (*.py) in this folder")
        elif p.suffix == ".py":
            files = [p]
        else:
            raise BenchError(f"{raw}: not a folder or a task file (*.py)")
        # a suite is named by its folder; two different folders of one name get -2, -3, ...
        suite, n = folder.name or "tasks", 1
        while suites.get(suite, folder) != folder:
            n += 1
            suite = f"{folder.name}-{n}"
        suites[suite] = folder
        for f in files:
            rf = f.resolve()
            if rf in seen:
                continue
            seen.add(rf)
            tasks.append(BenchTask(id=f"{suite}/{f.stem}", suite=suite, name=f.stem, path=str(rf)))
    return tasks


# -- the bench folder -----------------------------------------------------------------------------------------


def read_bench_file(bench_dir: Path) -> BenchFile:
    path = bench_dir / BENCH_FILE
    if not bench_dir.is_dir():
        raise BenchError(f"{bench_dir}: no such bench folder")
    if not path.is_file():
        raise BenchError(f"{bench_dir}: not a bench folder (no {BENCH_FILE})")
    try:
        return BenchFile.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        raise BenchError(f"{path} is damaged, not a file kernelwright bench wrote") from exc


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def read_ledger(bench_dir: Path) -> dict[str, TaskRow]:
    """The latest row per task in tasks.jsonl; a line cut short by a crash is ignored."""
    rows: dict[str, TaskRow] = {}
    path = bench_dir / LEDGER_FILE
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = TaskRow.model_validate_json(line)
        except ValidationError:
            continue
        rows[row.id] = row
    return rows


def append_ledger(bench_dir: Path, row: TaskRow) -> None:
    with open(bench_dir / LEDGER_FILE, "a", encoding="utf-8") as f:
        f.write(row.model_dump_json() + "\n")
        f.flush()
        os.fsync(f.fileno())


def pending_row(t: BenchTask) -> TaskRow:
    return TaskRow(id=t.id, suite=t.suite, task=t.name, path=t.path, run_dir=f"{RUNS_DIR}/{t.suite}/{t.name}")


def error_row(t: BenchTask, error: str, verdict: str, worker: str = "") -> TaskRow:
    """The row of a task whose run ended without a result (its worker died, it raised): `error`, which
    the next --resume runs again."""
    update = {"status": "error", "error": error, "verdict": verdict, "finished_at": utc_now()}
    if worker:
        update["worker"] = worker
    return pending_row(t).model_copy(update=update)


def settings_of(context: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "model",
        "base_url",
        "budget",
        "device",
        "target",
        "memory",
        "rules",
        "seed",
        "allow_tf32",
        "roofline_stop",
    )
    s = {k: context.get(k) for k in keys}
    s["precision"] = "tf32" if context.get("allow_tf32") else "strict"
    return s


def write_reports(
    bench_dir: Path, bench: BenchFile, ledger: dict[str, TaskRow], extra: dict[str, Any]
) -> Path:
    rows = [ledger.get(t.id) or pending_row(t) for t in bench.tasks]
    info = {
        "out": str(bench_dir),
        "paths": bench.paths,
        "created_at": bench.created_at,
        "updated_at": utc_now(),
        "settings": {**settings_of(bench.context), "unseen": bench.unseen},
        **extra,
    }
    write_suite(build_suite(rows, info), bench_dir)
    return bench_dir / "suite.html"


def create(
    bench_dir: Path, paths: Sequence[str], tasks: list[BenchTask], context: Context, unseen: int = 0
) -> BenchFile:
    bench_dir.mkdir(parents=True, exist_ok=True)
    bench = BenchFile(
        created_at=utc_now(),
        paths=[str(Path(p).expanduser().resolve()) for p in paths],
        context=context.to_json(),
        tasks=tasks,
        unseen=unseen,
    )
    write_json_atomic(bench_dir / BENCH_FILE, bench.model_dump(mode="json"))
    return bench
