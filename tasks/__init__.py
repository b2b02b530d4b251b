"""kernelwright tasks: the KernelBench task format, its loader and analysis, and the bundled suites.

The names below load their submodule on first use (PEP 562), so `from kernelwright.tasks.task import
TaskSignature` (the memory's records, the memory commands) does not import torch through the analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelwright import lazy_exports

if TYPE_CHECKING:
    from kernelwright.tasks.analysis import OP_FAMILIES, TaskAnalysis, analyze_task, op_family, trace_forward
    from kernelwright.tasks.errors import TaskError
    from kernelwright.tasks.loader import (
        BUNDLED_SUITES,
        bundled_suite_dir,
        load_suite,
        load_task,
        load_task_source,
    )
    from kernelwright.tasks.module import (
        exec_task_module,
        has_small_inputs,
        task_init_inputs,
        task_inputs,
        task_model,
    )
    from kernelwright.tasks.task import Task, TaskSignature

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `tasks`.
if __name__ != "kernelwright.tasks":
    raise ImportError(f"import kernelwright.tasks, not {__name__}: the package has one import name")

_EXPORTS = {
    "analysis": ("OP_FAMILIES", "TaskAnalysis", "analyze_task", "op_family", "trace_forward"),
    "errors": ("TaskError",),
    "loader": ("BUNDLED_SUITES", "bundled_suite_dir", "load_suite", "load_task", "load_task_source"),
    "module": ("exec_task_module", "has_small_inputs", "task_init_inputs", "task_inputs", "task_model"),
    "task": ("Task", "TaskSignature"),
}

__all__ = [
    "BUNDLED_SUITES",
    "OP_FAMILIES",
    "Task",
    "TaskAnalysis",
    "TaskError",
    "TaskSignature",
    "analyze_task",
    "bundled_suite_dir",
    "exec_task_module",
    "has_small_inputs",
    "load_suite",
    "load_task",
    "load_task_source",
    "op_family",
    "task_init_inputs",
    "task_inputs",
    "task_model",
    "trace_forward",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
