"""kernelwright: PyTorch reference programs in, fast verified Triton kernels out.

Everything is imported under this one name, so a project that has its own `tasks` or `memory` package
can use kernelwright beside it:

    from kernelwright.graphs.optimize import graph, run_optimize
    from kernelwright.graphs.context import Context
    from kernelwright.hardware import EvalConfig, WorkerPool
    from kernelwright.tasks import load_task

The subpackages live at the repository's top level (graphs/, nodes/, providers/, memory/, hardware/,
tasks/, as the design card lays the tree out), and nothing maps them by hand beyond the list
`SUBPACKAGES` (pyproject.toml's package-dir names the same folders; tests/unit/test_one_import_name.py
keeps the two equal):
- an installed wheel holds them here, as kernelwright/<folder> (setup.py finds every subpackage below
  each folder);
- in a source checkout (a clone with PYTHONPATH=IMPORT_ROOT, as the judge's children run, or an editable
  install) this folder holds only this file, and `_CheckoutFinder` below loads `kernelwright.<folder>`
  from <folder>/; their own subpackages follow from there as in any package.
No folder loads under a second name: each folder's __init__ refuses to load as anything but
`kernelwright.<folder>` (from the repository root `import nodes` fails), so one file is one module and
`nodes.records.Attempt` cannot exist beside `kernelwright.nodes.records.Attempt`.

Why not src/kernelwright/ (react-agent, open_deep_research, Liger-Kernel, FlagGems): that layout gives
one name by construction and lets static tools (mypy, editors) see the package without help, but it
buries the folders the card puts at the top and moves every file. Here the type checker reads a generated
view instead (`make lint`: build/typecheck/, see the Makefile).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

__version__ = "0.2.0"

SUBPACKAGES = ("graphs", "nodes", "providers", "memory", "hardware", "tasks", "cli", "bench")
"""The top-level folders imported as kernelwright.<folder>."""

_HERE = Path(__file__).resolve().parent

IMPORT_ROOT = str(_HERE.parent)
"""The folder to put on PYTHONPATH so that a child process can `import kernelwright` (judge, workers)."""


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Loads kernelwright.<folder> from a source checkout's top-level <folder>/ (see the module docstring)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.partition(".")
        if package != __name__ or name not in SUBPACKAGES:
            return None
        folder = _HERE.parent / name
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def _in_checkout() -> bool:
    """True where the subpackages are the checkout's top-level folders, not folders beside this file."""
    return not (_HERE / SUBPACKAGES[0]).exists() and all(
        (_HERE.parent / name / "__init__.py").is_file() for name in SUBPACKAGES
    )


if _in_checkout() and not any(type(f).__name__ == "_CheckoutFinder" for f in sys.meta_path):
    sys.meta_path.append(_CheckoutFinder())


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


def __getattr__(name: str) -> Any:
    # `kernelwright.optimize_model(model, example_inputs)`, loaded on first use (graphs/model.py imports torch)
    if name == "optimize_model":
        from kernelwright.graphs.model import optimize_model

        return optimize_model
    raise AttributeError(f"module 'kernelwright' has no attribute {name!r}")
