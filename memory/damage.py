"""Telling a damaged memory folder from an empty one, and reading what can still be read from it.

Chroma keeps every record (the JSON document) and its metadata in `chroma.sqlite3`; the UUID-named
segment folders hold only the vector index. So:
- `chroma.sqlite3` missing while segment folders (or this project's generation file) remain: the records
  are gone; the folders cannot bring them back. Opening must say so instead of starting an empty memory.
- `chroma.sqlite3` empty (0 bytes): SQLite would take it for a new database, and Chroma would start an
  empty memory in it; opening refuses it (`empty_database`).
- `chroma.sqlite3` truncated or overwritten: SQLite refuses it. Whatever rows SQLite can still read are
  salvaged by `salvage_documents` (read-only, row by row), which `kernelwright memory export` uses.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

SQLITE_FILE = "chroma.sqlite3"
GENERATION_FILE = ".kernelwright.generation"
_SEGMENT_DIR = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def segment_folders(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and _SEGMENT_DIR.match(p.name))


def missing_database(path: Path) -> str | None:
    """Why a folder that once held a memory has no database left, or None."""
    if not path.is_dir() or (path / SQLITE_FILE).exists():
        return None
    folders = segment_folders(path)
    if not folders and not (path / GENERATION_FILE).exists():
        return None
    left = f"{len(folders)} index folder(s)" if folders else f"its {GENERATION_FILE} file"
    return (
        f"memory at {path} is damaged: {SQLITE_FILE} is missing but {left} remain; the records were kept "
        f"in {SQLITE_FILE} and cannot be recovered from the index folders (they hold only vectors): restore "
        f"{SQLITE_FILE} from a backup, or import an export into an empty folder (kernelwright memory import)"
    )


def empty_database(path: Path) -> str | None:
    """Why a memory folder whose database file is empty (0 bytes: truncated) cannot be opened, or None.

    SQLite would take an empty file for a new database and Chroma would start an empty memory in it,
    silently dropping every record the file held; Chroma never leaves its database empty once made."""
    db = path / SQLITE_FILE
    try:
        if not db.is_file() or db.stat().st_size > 0:
            return None
    except OSError:
        return None
    folders = segment_folders(path)
    left = f"; {len(folders)} index folder(s) remain, but they hold only vectors" if folders else ""
    return (
        f"memory at {path} is damaged: {SQLITE_FILE} is empty (0 bytes), so the records it held are gone{left}: "
        f"restore {SQLITE_FILE} from a backup, import an export into an empty folder (kernelwright memory "
        f"import), or remove {SQLITE_FILE} and its folder's contents to start an empty memory"
    )


def _connect_read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def sqlite_problem(path: Path) -> str | None:
    """SQLite's complaint about the memory's database (truncated, overwritten, malformed), or None."""
    db = path / SQLITE_FILE
    if not db.is_file():
        return None
    try:
        conn = _connect_read_only(db)
        try:
            row = conn.execute("PRAGMA quick_check").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if row and row[0] == "ok" else str(row[0] if row else "quick_check gave nothing")


def salvage_documents(path: Path) -> dict[str, list[str]]:
    """The record documents SQLite can still read, by collection name (empty when none can be)."""
    db = path / SQLITE_FILE
    found: dict[str, list[str]] = {}
    try:
        conn = _connect_read_only(db)
    except sqlite3.DatabaseError:
        return found
    try:
        try:
            segments = conn.execute(
                "SELECT s.id, c.name FROM segments s JOIN collections c ON s.collection = c.id"
            ).fetchall()
        except sqlite3.DatabaseError:
            return found
        for segment_id, collection in segments:
            try:
                ids = [
                    r[0]
                    for r in conn.execute("SELECT id FROM embeddings WHERE segment_id = ?", (segment_id,))
                ]
            except sqlite3.DatabaseError:
                continue
            for rid in ids:
                try:
                    row = conn.execute(
                        "SELECT string_value FROM embedding_metadata WHERE id = ? AND key = 'chroma:document'",
                        (rid,),
                    ).fetchone()
                except sqlite3.DatabaseError:
                    continue  # this row's page is gone; the next may not be
                if row and row[0]:
                    found.setdefault(str(collection), []).append(str(row[0]))
    finally:
        conn.close()
    return found


def damaged_message(path: Path, problem: str) -> str:
    """One line: the memory is damaged, how, and what can be recovered."""
    docs = salvage_documents(path)
    n = sum(len(v) for v in docs.values())
    if n:
        recover = (
            f"{n} record(s) can still be read: `kernelwright memory export FILE --memory {path}` saves them, "
            "`kernelwright memory import FILE --memory NEW_DIR` restores them into a new folder"
        )
    else:
        recover = "no record can be read from it: restore it from a backup or an export"
    return f"memory at {path} is damaged: {SQLITE_FILE} {problem}; {recover}"
