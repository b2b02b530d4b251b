"""Turning a task file's source into a live module, and making its inputs and model.

These helpers also run inside the evaluation workers, so this module imports only torch and the
standard library. A task module is never put in `sys.modules`: two tasks that both define `Model`
cannot see each other, and a candidate cannot import the reference by name.

Input conventions (KernelBench format plus one optional pair):
- `get_inputs()` / `get_init_inputs()`: the full-size forward inputs and constructor arguments.
- `get_small_inputs()` (optional): small, odd-shaped inputs that run in well under a second on CPU.
- `get_small_init_inputs()` (optional): constructor arguments that go with `get_small_inputs()` when the
  small inputs need a smaller model (e.g. a Linear with fewer features). Without it the small inputs
  must fit the model built from `get_init_inputs()`.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from kernelwright.tasks.errors import TaskError, describe_exception

_phase_reporter: Callable[[str], None] | None = None


def set_phase_reporter(reporter: Callable[[str], None] | None) -> None:
    """Have `reporter` told, in words, each step of the task's own code about to run ("importing the
    file", "get_inputs()", "building Model"): the task loader's child process reports them to its parent,
    which names the step in its message when a task does not finish (tasks/loader.py)."""
    global _phase_reporter
    _phase_reporter = reporter


def report_phase(what: str) -> None:
    if _phase_reporter is not None:
        _phase_reporter(what)


def exec_task_module(source: str, name: str, *, filename: str | None = None) -> types.ModuleType:
    """Compile and run `source` in a fresh module called `name`, registered nowhere global.

    `filename` is what tracebacks and error messages show (the task's path when it has one).
    A syntax error, or an exception while the module's top level runs, raises TaskError.
    """
    filename = filename or f"<task {name}>"
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = f":{exc.lineno}" if exc.lineno else ""
        raise TaskError(f"{filename}{line}: syntax error: {exc.msg}") from None
    module = types.ModuleType(name)
    module.__file__ = filename
    report_phase("importing the file")
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        raise TaskError(f"{filename}: running the module raised {describe_exception(exc, filename)}") from exc
    return module


def has_small_inputs(module: types.ModuleType) -> bool:
    """Whether the task defines `get_small_inputs()`."""
    return callable(getattr(module, "get_small_inputs", None))


def _call(module: types.ModuleType, fn_name: str) -> list[Any]:
    fn: Callable[[], Any] | None = getattr(module, fn_name, None)
    if not callable(fn):
        raise TaskError(f"{module.__file__}: no {fn_name}() function")
    report_phase(f"{fn_name}()")
    try:
        values = fn()
    except Exception as exc:
        raise TaskError(
            f"{module.__file__}: {fn_name}() raised {describe_exception(exc, module.__file__)}"
        ) from exc
    if not isinstance(values, list | tuple):
        raise TaskError(f"{module.__file__}: {fn_name}() returned {type(values).__name__}; expected a list")
    return list(values)


def _to_device(value: Any, device: torch.device | str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(_to_device(v, device) for v in value)
    return value


def task_inputs(
    module: types.ModuleType,
    *,
    small: bool,
    seed: int | None,
    device: torch.device | str = "cpu",
    on_device: bool = False,
) -> list[Any]:
    """Forward inputs for one run: torch's RNG seeded with `seed`, tensors moved to `device`. `seed=None`
    leaves the RNG as it is: for the meta device, whose tensors hold no numbers (a seeding costs about a
    millisecond, and a writer's size checks run hundreds of meta forwards).

    `small=True` uses `get_small_inputs()` when the task defines it, else `get_inputs()`. Inputs are made
    on the default device and then moved, so the same seed gives the same numbers on CPU and GPU; with
    `on_device` they are made on `device` itself (seeded as well, but other numbers than on CPU): for
    large inputs, whose generation on CPU takes seconds.
    """
    if seed is not None:
        torch.manual_seed(seed)
    fn_name = "get_small_inputs" if small and has_small_inputs(module) else "get_inputs"
    if on_device:
        with torch.device(device):
            return [_to_device(v, device) for v in _call(module, fn_name)]
    return [_to_device(v, device) for v in _call(module, fn_name)]


def task_init_inputs(module: types.ModuleType, *, small: bool = False) -> list[Any]:
    """Constructor arguments for `Model` (and a candidate's `ModelNew`).

    Pass the same `small` as to `task_inputs`: with `small=True` a task's `get_small_init_inputs()` is
    used when both it and `get_small_inputs()` are defined; otherwise `get_init_inputs()`.
    """
    use_small = (
        small and has_small_inputs(module) and callable(getattr(module, "get_small_init_inputs", None))
    )
    return _call(module, "get_small_init_inputs" if use_small else "get_init_inputs")


def task_model(
    module: types.ModuleType,
    *,
    small: bool = False,
    seed: int | None = 0,
    device: torch.device | str = "cpu",
    cls: type[torch.nn.Module] | None = None,
) -> torch.nn.Module:
    """Build `cls` (default: the task's `Model`) from the task's init inputs with torch seeded first.

    A failing `Model` constructor raises TaskError; a failing `cls` constructor raises its own exception.

    Building the reference and a candidate with the same seed gives them the same initial parameters
    when they create them in the same order, as KernelBench does.
    """
    init_inputs = task_init_inputs(module, small=small)
    model_cls = cls if cls is not None else getattr(module, "Model", None)
    if not isinstance(model_cls, type):
        raise TaskError(f"{module.__file__}: no Model class")
    if seed is not None:  # None: the meta device's, as task_inputs
        torch.manual_seed(seed)
    if cls is None:
        report_phase(f"building {model_cls.__name__}")
    if cls is not None:
        # A candidate's constructor failing is the candidate's fault: the caller reports it as such.
        return cls(*init_inputs).to(device)
    try:
        model = model_cls(*init_inputs)
    except Exception as exc:
        raise TaskError(
            f"{module.__file__}: {model_cls.__name__}(*init_inputs) raised "
            f"{describe_exception(exc, module.__file__)}"
        ) from exc
    return model.to(device)
