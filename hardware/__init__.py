"""kernelwright: hardware. What a GPU can do (targets.py, roofline.py) and how candidates are judged on it.

The evaluation harness is in subfolders: judge/ (the judge process and its stages, and `WorkerPool`, the
caller's side), candidate/ (what runs inside a candidate process), isolation/ (fork server, confinement,
what crosses between processes) and compile/ (offline compile feedback). Beside them: config.py
(`EvalConfig`), result.py (`EvalResult`), timing.py (the timing method both sides use), failures.py.

The names below are loaded on first use (PEP 562), so a process that needs one light module (the
judge's entry, which starts its fork server before it imports torch) does not pay for torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelwright import lazy_exports

if TYPE_CHECKING:
    from kernelwright.hardware.compile.feedback import CompileReport, KernelCompileReport, compile_for_target
    from kernelwright.hardware.config import EvalConfig, toolchain_versions
    from kernelwright.hardware.judge.pool import WorkerPool, evaluate
    from kernelwright.hardware.judge.static_check import StaticReport, static_check
    from kernelwright.hardware.result import ErrorKind, EvalResult, PrecisionMode, Stage, Tolerance, Versions
    from kernelwright.hardware.roofline import RooflineFloor, fraction_of_floor, roofline_floor_ms
    from kernelwright.hardware.targets import Target, detect_target, get_target, list_targets, resolve_device

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `hardware`.
if __name__ != "kernelwright.hardware":
    raise ImportError(f"import kernelwright.hardware, not {__name__}: the package has one import name")

_EXPORTS = {
    "config": ("EvalConfig", "toolchain_versions"),
    "result": ("ErrorKind", "EvalResult", "PrecisionMode", "Stage", "Tolerance", "Versions"),
    "roofline": ("RooflineFloor", "fraction_of_floor", "roofline_floor_ms"),
    "judge.pool": ("WorkerPool", "evaluate"),
    "judge.static_check": ("StaticReport", "static_check"),
    "targets": ("Target", "detect_target", "get_target", "list_targets", "resolve_device"),
    "compile.feedback": ("CompileReport", "KernelCompileReport", "compile_for_target"),
}

__all__ = [
    "CompileReport",
    "ErrorKind",
    "EvalConfig",
    "EvalResult",
    "KernelCompileReport",
    "PrecisionMode",
    "RooflineFloor",
    "Stage",
    "StaticReport",
    "Target",
    "Tolerance",
    "Versions",
    "WorkerPool",
    "compile_for_target",
    "detect_target",
    "evaluate",
    "fraction_of_floor",
    "get_target",
    "list_targets",
    "resolve_device",
    "roofline_floor_ms",
    "static_check",
    "toolchain_versions",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
