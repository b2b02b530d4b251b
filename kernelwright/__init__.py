"""kernelwright: PyTorch reference programs in, fast verified Triton kernels out.

Everything is imported under this one name, so a project that has its own `tasks` or `memory` package
can use kernelwright beside it:

    from kernelwright.graphs.optimize import graph, run_optimize
    from kernelwright.graphs.context import Context
    from kernelwright.hardware import EvalConfig, WorkerPool
    from kernelwright.tasks import load_task

The subpackages live at the repository's top level (graphs/, nodes/, providers/, memory/, hardware/,
tasks/); in a source checkout this folder holds a symbolic link to each, and an installed wheel holds
them here (pyproject.toml maps kernelwright.<name> to <name>/).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__version__ = "0.2.0"

IMPORT_ROOT = str(Path(__file__).resolve().parent.parent)
"""The folder to put on PYTHONPATH so that a child process can `import kernelwright` (judge, workers)."""


def lazy_exports(
    package: str, exports: dict[str, tuple[str, ...]], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level `__getattr__` and `__dir__` (PEP 562) that import each exported name's
    submodule on first use: `exports` maps a submodule to the names it gives, `namespace` is the
    package's globals() (a name, once loaded, is stored there and later lookups skip `__getattr__`).
    The package's `__all__`, written out for linters, must list exactly these names and those it imported
    itself."""
    module_of = {name: module for module, names in exports.items() for name in names}
    listed = set(namespace.get("__all__", ()))
    assert listed == set(module_of) | (listed & set(namespace)), f"{package}.__all__ and its exports differ"

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(module_of))

    return __getattr__, __dir__
