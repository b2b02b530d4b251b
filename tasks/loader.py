"""Loading KernelBench-format task files into typed `Task` records, and finding the bundled suites.

Loading runs the reference (trusted user code) in this process, at the small size only: a task file
that does not define the interface, does not parse, raises in its forward or returns something other
than tensors is refused with a one-line TaskError that says what to fix.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Literal

import torch

from kernelwright.tasks.analysis import MODEL_LOCK, analyze_task
from kernelwright.tasks.errors import TaskError
from kernelwright.tasks.module import exec_task_module, has_small_inputs
from kernelwright.tasks.task import Task

_SUITES_ROOT = Path(__file__).resolve().parent


BundledSuite = Literal["level1", "level2", "published", "level1_bf16", "level2_bf16"]
BUNDLED_SUITES: tuple[BundledSuite, ...] = ("level1", "level2", "published", "level1_bf16", "level2_bf16")


def bundled_suite_dir(level: BundledSuite) -> Path:
    """The folder of a suite shipped with kernelwright: "level1" (single ops), "level2" (fused ops),
    "published" (single ops at the sizes of published benchmark runs, tensors of several GiB), and
    "level1_bf16" / "level2_bf16" (their GEMM, norm, softmax and convolution tasks in bfloat16)."""
    if level not in BUNDLED_SUITES:
        raise TaskError(f"unknown bundled suite {level!r}; choose one of {', '.join(BUNDLED_SUITES)}")
    return _SUITES_ROOT / level


def _check_interface(module: types.ModuleType) -> None:
    where = module.__file__
    model = getattr(module, "Model", None)
    if model is None:
        raise TaskError(f"{where}: no Model class (a task defines class Model(nn.Module))")
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        raise TaskError(f"{where}: Model is not a torch.nn.Module subclass")
    for fn_name in ("get_inputs", "get_init_inputs"):
        fn = getattr(module, fn_name, None)
        if fn is None:
            raise TaskError(f"{where}: no {fn_name}() function")
        if not callable(fn):
            raise TaskError(f"{where}: {fn_name} is not a function")


def _load(source: str, name: str, path: Path | None) -> Task:
    filename = str(path) if path is not None else f"<task {name}>"
    with MODEL_LOCK:  # the task's module may build models as it is executed
        module = exec_task_module(source, name, filename=filename)
        _check_interface(module)
        analysis = analyze_task(module)
    return Task(
        name=name,
        source=source,
        path=path,
        signature=analysis.signature,
        small_signature=analysis.small_signature,
        has_small_inputs=has_small_inputs(module),
        flops=analysis.flops,
        min_bytes=analysis.min_bytes,
        cost_exact=analysis.cost_exact,
        checked_on=analysis.checked_on,
    )


def load_task(path: str | Path) -> Task:
    """Load one task file; its name is the file's stem (e.g. "09_softmax")."""
    p = Path(path)
    if not p.is_file():
        raise TaskError(f"{p}: task file not found")
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{p}: cannot read task file: {exc}") from exc
    return _load(source, p.stem, p)


def load_task_source(source: str, name: str) -> Task:
    """Load a task from its source text (messages refer to it as `<task NAME>`)."""
    return _load(source, name, None)


def load_suite(directory: str | Path) -> list[Task]:
    """Load every `*.py` task in a folder (not `_`-prefixed files), sorted by file name."""
    d = Path(directory)
    if not d.is_dir():
        raise TaskError(f"{d}: suite folder not found")
    files = sorted(p for p in d.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise TaskError(f"{d}: no task files (*.py) in suite folder")
    return [load_task(p) for p in files]
