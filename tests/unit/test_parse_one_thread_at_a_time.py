"""Every parse into `ast` objects in kernelwright goes through tasks/pyast.py's lock: CPython 3.11 fails
("SystemError: AST constructor recursion depth mismatch") when two threads parse at once, and a LangGraph
server runs several runs on threads of one process (two Studio runs of the writer failed so). A direct
`ast.parse` (or `compile` asked for an AST) anywhere else in the package is a place that can fail."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FOLDERS = ("kernelwright", "graphs", "nodes", "providers", "memory", "hardware", "tasks", "cli", "bench")  # fmt: skip
DIRECT = re.compile(r"\bast\.parse\(|PyCF_ONLY_AST")


def test_no_module_parses_outside_the_locked_helper() -> None:
    found = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "tasks" / "pyast.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if DIRECT.search(code) and not code.lstrip().startswith(('"', "'")):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "parse through kernelwright.tasks.pyast.parse_python:\n" + "\n".join(found)
