"""Every package's `__init__.py` exports what its `__all__` names: `from kernelwright.<pkg> import *` works."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from kernelwright import SUBPACKAGES

ROOT = Path(__file__).resolve().parents[2]
# Every package below the top-level folders, found as setup.py finds them: a new one is tested unlisted.
PACKAGES = sorted(
    ".".join(init.parent.relative_to(ROOT).parts)
    for name in SUBPACKAGES
    for init in (ROOT / name).rglob("__init__.py")
)


@pytest.mark.parametrize("name", PACKAGES)
def test_star_import_of_every_package(name: str) -> None:
    module = importlib.import_module(f"kernelwright.{name}")
    missing = [n for n in getattr(module, "__all__", []) if not hasattr(module, n)]
    assert not missing, f"kernelwright.{name}.__all__ names what it does not define: {missing}"
    namespace: dict[str, object] = {}
    exec(f"from kernelwright.{name} import *", namespace)  # noqa: S102 - the star import under test
    assert set(getattr(module, "__all__", [])) <= set(namespace)


def test_all_lists_are_free_of_duplicates() -> None:
    for name in PACKAGES:
        names = getattr(importlib.import_module(f"kernelwright.{name}"), "__all__", [])
        assert len(names) == len(set(names)), name


# Which packages each package may import (besides itself): the dependency order the tree keeps. Nodes
# name the graph's runtime Context (graphs.context) in their signatures, and nothing else of graphs/.
ALLOWED = {
    "tasks": set(),
    "hardware": {"tasks"},
    "providers": {"tasks", "hardware"},
    "memory": {"tasks", "hardware", "providers"},
    "nodes": {"tasks", "hardware", "providers", "memory", "graphs.context"},
    "graphs": {"tasks", "hardware", "providers", "memory", "nodes"},
    "bench": {"tasks", "hardware", "providers", "memory", "nodes", "graphs"},
    "cli": {"tasks", "hardware", "providers", "memory", "nodes", "graphs", "bench"},
}


def test_packages_import_only_what_is_below_them() -> None:
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    bad = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            if any(part in ("level1", "level2", "published") for part in path.parts):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                for name in names:
                    parts = name.split(".")
                    if parts[0] == "kernelwright" and len(parts) > 1 and parts[1] in ALLOWED:
                        if parts[1] != package and not {parts[1], ".".join(parts[1:3])} & allowed:
                            bad.append(f"{path.relative_to(root)} imports {name}")
    assert not bad, "\n".join(bad)
