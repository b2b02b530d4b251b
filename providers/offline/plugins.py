"""The offline writer's plug-ins, named in one place: the lowering handlers of each kind of op, the kernel
kinds (their designs, configs and generators) and the whole-task writers.

Nothing registers itself on import: a handler module fills its own `HANDLERS` table, a kind module defines
its `KernelKind`, a task writer is a function, and this module lists them. To add one, write the module
and name it here (providers/offline/README.md says where each kind of change goes).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from kernelwright.providers.offline.frontend import lowering_pointwise, lowering_rows, lowering_views
from kernelwright.providers.offline.frontend.lowering import HandlerTable
from kernelwright.providers.offline.kinds import kind_matmul, kind_pointwise, kind_rows
from kernelwright.providers.offline.kinds.kind import KernelKind

if TYPE_CHECKING:
    from kernelwright.providers.offline.writer import TaskWriter

# aten op name -> handler, by kind of op: elementwise ops and constants; reductions, norms, losses and
# scans; matmuls, views and convolutions. An op is handled by one module only (lowering_handlers checks).
LOWERINGS: tuple[HandlerTable, ...] = (
    lowering_pointwise.HANDLERS,
    lowering_rows.HANDLERS,
    lowering_views.HANDLERS,
)

# The kernel kinds a schedule's kernels are written by, in the order REGISTRY lists their designs.
KERNEL_KINDS: tuple[KernelKind, ...] = (kind_rows.ROWS, kind_pointwise.POINTWISE, kind_matmul.MATMUL)
KINDS: dict[str, KernelKind] = {kind.name: kind for kind in KERNEL_KINDS}

# Writers of whole programs, asked before the generic writer in this order, as (family, "module:function"):
# Triton convolutions (in turn with the generic path's cuDNN + fused-epilogue programs; see
# conv_writer.takes_turn) and standalone pooling. Named rather than imported: each imports the generic
# writer's pieces itself.
TASK_WRITERS: tuple[tuple[str, str], ...] = (
    ("conv", "kernelwright.providers.offline.families.conv.conv_writer:conv_task_writer"),
    ("pool", "kernelwright.providers.offline.families.pool_writer:pool_task_writer"),
)


@cache
def lowering_handlers() -> dict[str, Callable[..., Any]]:
    """Every lowering handler by aten op name; an op claimed by two modules is an error."""
    table: dict[str, Callable[..., Any]] = {}
    for handlers in LOWERINGS:
        for name, fn in handlers.items():
            if name in table:
                raise ValueError(
                    f"aten op {name!r} has two lowering handlers: {table[name].__module__} and {fn.__module__}"
                )
            table[name] = fn
    return table


def task_writers() -> tuple[tuple[str, TaskWriter], ...]:
    """TASK_WRITERS resolved to (family, writer function) (each module is imported once; a look-up after)."""
    out = []
    for family, target in TASK_WRITERS:
        module, _, attr = target.partition(":")
        out.append((family, getattr(importlib.import_module(module), attr)))
    return tuple(out)
