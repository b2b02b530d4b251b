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

from pathlib import Path

__version__ = "0.2.0"

IMPORT_ROOT = str(Path(__file__).resolve().parent.parent)
"""The folder to put on PYTHONPATH so that a child process can `import kernelwright` (judge, workers)."""
