"""kernelwright: hardware. Evaluation harness (sandboxed workers, verification, timing) and targets."""

from hardware.config import EvalConfig, toolchain_versions
from hardware.result import ErrorKind, EvalResult, PrecisionMode, Stage, Tolerance, Versions
from hardware.sandbox import WorkerPool, evaluate, resolve_device
from hardware.static_check import StaticReport, static_check

__all__ = [
    "ErrorKind",
    "EvalConfig",
    "EvalResult",
    "PrecisionMode",
    "Stage",
    "StaticReport",
    "Tolerance",
    "Versions",
    "WorkerPool",
    "evaluate",
    "resolve_device",
    "static_check",
    "toolchain_versions",
]
