"""A KernelBench-format task's model built for analysis only: its shapes without its weights filled, and fake
inputs. What splitting a model into regions at its published sizes needs (tasks/regions.py
`split_model(..., measure=False)`), at any size, in an analysis process."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torch import nn


@contextlib.contextmanager
def _no_weight_init() -> Iterator[None]:
    """torch.nn.init's initializers as no-ops: a model built for its shapes alone skips filling its
    weights (a 2 GB Linear is allocated, never touched). Process-wide while it lasts: for analysis
    processes, not for an agent whose other threads build models."""
    names = [n for n in dir(nn.init) if n.endswith("_") and not n.startswith("_")]
    saved = {n: getattr(nn.init, n) for n in names}
    try:
        for n in names:
            setattr(nn.init, n, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for n, f in saved.items():
            setattr(nn.init, n, f)


def analysis_model(task: Any) -> tuple[nn.Module, list[Any]]:
    """A KernelBench-format task module's model with uninitialised weights, and fake inputs (shapes and
    dtypes, no data) from its get_inputs: what `split_model(..., measure=False)` needs, at any size."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with _no_weight_init():
        model = task.Model(*task.get_init_inputs())
    with FakeTensorMode(allow_non_fake_inputs=True):
        inputs = list(task.get_inputs())
    return model, inputs
