"""Every package's `__init__.py` exports what its `__all__` names: `from kernelwright.<pkg> import *` works."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["graphs", "nodes", "providers", "providers.offline", "memory", "hardware", "tasks"]


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
