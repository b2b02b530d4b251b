"""No two classes of the package share a name: a reader (or a traceback) naming one never means another.
The bundled suites' task files are left out: each defines `Model` by the task format."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from kernelwright import SUBPACKAGES

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("level1", "level1_bf16", "level2", "level2_bf16", "published")


def test_no_two_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for package in SUBPACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if any(part in SUITES for part in path.relative_to(ROOT).parts):
                continue
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(str(path.relative_to(ROOT)))
    shared = {name: files for name, files in where.items() if len(files) > 1}
    assert not shared, shared
