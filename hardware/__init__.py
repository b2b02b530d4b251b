"""kernelwright: hardware. Evaluation harness (sandboxed workers, verification, timing), targets, roofline."""

import importlib.util

from kernelwright.hardware.config import EvalConfig, toolchain_versions
from kernelwright.hardware.result import ErrorKind, EvalResult, PrecisionMode, Stage, Tolerance, Versions
from kernelwright.hardware.roofline import RooflineFloor, fraction_of_floor, roofline_floor_ms
from kernelwright.hardware.sandbox import WorkerPool, evaluate
from kernelwright.hardware.static_check import StaticReport, static_check
from kernelwright.hardware.targets import Target, detect_target, get_target, list_targets, resolve_device

__all__ = [
    "ErrorKind",
    "EvalConfig",
    "EvalResult",
    "PrecisionMode",
    "RooflineFloor",
    "Stage",
    "StaticReport",
    "Target",
    "Tolerance",
    "Versions",
    "WorkerPool",
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

# Offline compile feedback is optional at this level: exported when its module is present.
if importlib.util.find_spec("kernelwright.hardware.compile_feedback") is not None:
    from kernelwright.hardware.compile_feedback import CompileReport, KernelCompileReport, compile_for_target

    __all__ += ["CompileReport", "KernelCompileReport", "compile_for_target"]
