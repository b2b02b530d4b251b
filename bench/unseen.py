"""Unseen configurations (`kernelwright bench --unseen K`): a task's best kernel judged again at K sizes its
search never saw.

A search verifies every candidate at the task's own size and at a second one (hardware/judge/inputs.py),
so a kernel can still hold only at those two: a size copied from a trace into a view, a block that must
cover a whole row. After a task's search, its best kernel is judged once more at K other sizes of the task:
its module-level size constants (tasks/resize.py) scaled down and up in turn (x0.75, x1.25, x0.5, x1.5,
...), every other one made odd (odd sizes find masking bugs that powers of two hide). Constants below 8
(kernel sizes, strides, small counts) and constants only the small inputs read are left alone; a scaling that breaks the task (a divisibility) is
retried constant by constant, keeping the ones that stay valid (checked on the meta device).

- On a GPU the sizes scale the task's own; one whose tensors, with the judge's copies and float64
  reference, would not fit the GPU's free memory is skipped. The kernel is timed there as in the search.
- On the CPU (the Triton interpreter) the sizes scale a small form of the task (its small inputs dropped,
  its constants shrunk), at most `CPU_UNSEEN_ELEMENTS` elements, which the CPU judge runs as given.
- A size whose input shapes the search already verified is skipped.

The task row reports each size's verdict and speedups, whether the kernel holds at every one, the geomean
speedup there and its ratio to the searched speedup (bench/report.py).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kernelwright.tasks.pyast import parse_python

if TYPE_CHECKING:
    from kernelwright.nodes.run_context import Context

FACTORS = (0.75, 1.25, 0.5, 1.5, 0.625, 1.375, 0.375, 1.75, 0.875, 1.125)
MIN_SCALED = 8
"""Constants smaller than this are not scaled (kernel sizes, strides, group counts)."""
CPU_UNSEEN_ELEMENTS = 60_000
"""Largest CPU size (elements of inputs, outputs and parameters): below a quarter of the CPU judge's
primary size, so the judge neither shrinks nor replaces it (hardware/judge/inputs.derived)."""
CPU_BASE_ELEMENTS = 30_000
"""The CPU sizes scale a form of the task shrunk to about this many elements."""
GPU_MEMORY_FACTOR = 8
"""A GPU size is used when this many times its tensors' bytes fit the free memory (the judge keeps
pristine copies, the outputs and a float64 reference beside the candidate's own)."""


@dataclass
class UnseenSize:
    source: str
    sizes: dict[str, int]
    """The constants changed from the task's own, with their values here."""
    input_shapes: list[list[int]]


def names_read(source: str) -> set[str]:
    """Names the module reads somewhere (a size constant no code reads sizes nothing)."""
    return {
        n.id
        for n in ast.walk(parse_python(source))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _measure(source: str, name: str) -> tuple[list[list[int]], int, int] | None:
    """(input shapes, elements, bytes) of the task's tensors at its constants (meta device), or None
    when it does not build or run there."""
    from kernelwright.tasks.module import exec_task_module
    from kernelwright.tasks.resize import footprint, meta_run

    try:
        module = exec_task_module(source, name)
    except Exception:
        return None
    got = meta_run(module)
    fp = footprint(module)
    if got is None or fp is None:
        return None
    return got[0], got[1], fp.total


def _scaled(value: int, factor: float, odd: bool) -> int:
    n = max(2, round(value * factor))
    if odd and n % 2 == 0:
        n = n + 1 if factor > 1 else max(3, n - 1)
    if n == value:
        n = value + 1 if factor > 1 else max(2, value - 1)
    return n


def seen_shapes(source: str, name: str, device: str) -> list[list[list[int]]]:
    """Input shapes the search's judge verifies (its own size, its small inputs, the derived sizes it
    makes by halving constants: hardware/judge/inputs.verified_shapes), as far as they can be told."""
    from kernelwright.tasks.module import exec_task_module
    from kernelwright.tasks.resize import (
        CPU_PRIMARY_ELEMENTS,
        CPU_SECOND_ELEMENTS,
        first_input_shapes,
        shrink,
    )

    out: list[list[list[int]]] = []
    try:
        module = exec_task_module(source, name)
    except Exception:
        return out
    for small in (False, True):
        got = first_input_shapes(module, small=small)
        if got is not None:
            out.append(got)
    full = _measure(source, name)
    budgets = {CPU_PRIMARY_ELEMENTS, CPU_SECOND_ELEMENTS, 1024, 4096}
    if full is not None and device != "cpu":
        budgets.add(max(4096, full[1] // 8))
    for b in sorted(budgets):
        for x in (b, b // 4, b * 4):
            resized = shrink(source, f"{name}_seen", max(x, 16))
            if resized is not None:
                out.append(resized.input_shapes)
    return out


def unseen_sizes(
    source: str, name: str, k: int, device: str, free_bytes: int | None = None
) -> tuple[list[UnseenSize], str]:
    """Up to k sizes of the task its search did not verify, and a note when fewer could be made."""
    from kernelwright.tasks.resize import (
        shrink,
        size_constants,
        variable_of,
        with_sizes,
        without_small_inputs,
    )

    if k <= 0:
        return [], ""
    base_source = source
    if device == "cpu":
        base_source = without_small_inputs(source)
        small = shrink(base_source, f"{name}_base", CPU_BASE_ELEMENTS, odd=False)
        if small is not None:
            base_source = small.source
    own = {c.name: c.value for c in size_constants(source)}
    base = {c.name: c.value for c in size_constants(base_source)}
    used = names_read(without_small_inputs(source))  # small_* constants only size the small inputs
    scalable = [
        n
        for n, v in sorted(base.items(), key=lambda nv: -nv[1])
        if v >= MIN_SCALED and variable_of(n) in used
    ]
    if not scalable:
        return [], "no size constant of 8 or more to change"
    seen = seen_shapes(source, name, device)
    picked: list[UnseenSize] = []

    def fits(elements: int, nbytes: int) -> bool:
        if device == "cpu":
            return elements <= CPU_UNSEEN_ELEMENTS
        return free_bytes is None or nbytes * GPU_MEMORY_FACTOR <= free_bytes

    for i, factor in enumerate(FACTORS):
        if len(picked) >= k:
            break
        odd = i % 2 == 0
        values = dict(base)
        trial = {**values, **{n: _scaled(base[n], factor, odd) for n in scalable}}
        got = _measure(with_sizes(base_source, trial), f"{name}_unseen")
        if got is None:  # one constant at a time, keeping those the task accepts
            for n in scalable:
                one = {**values, n: _scaled(base[n], factor, odd)}
                if _measure(with_sizes(base_source, one), f"{name}_unseen") is not None:
                    values = one
            trial = values
            got = _measure(with_sizes(base_source, trial), f"{name}_unseen") if trial != base else None
        if got is None:
            continue
        shapes, elements, nbytes = got
        if not fits(elements, nbytes) or shapes in seen or any(p.input_shapes == shapes for p in picked):
            continue
        changed = {n: v for n, v in trial.items() if v != own.get(n)}
        picked.append(UnseenSize(with_sizes(base_source, trial), changed, shapes))
    note = "" if len(picked) >= k else f"{len(picked)} of {k} unseen sizes could be made within the limits"
    return picked, note


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def judge_unseen(
    task_path: str,
    name: str,
    code: str,
    ctx: Context,
    k: int,
    searched_speedup: float | None,
) -> dict[str, Any]:
    """The best kernel judged at k unseen sizes: what a task row records (see the module docstring)."""
    from kernelwright.hardware.config import EvalConfig
    from kernelwright.hardware.targets import resolve_device
    from kernelwright.nodes import resources
    from kernelwright.tasks.loader import load_task_source

    device: Literal["cpu", "cuda"] = "cuda" if resolve_device(ctx.device).startswith("cuda") else "cpu"
    free = None
    if device == "cuda":
        import torch

        free = int(torch.cuda.mem_get_info()[0])
    with open(task_path, encoding="utf-8") as fh:
        source = fh.read()
    sizes, note = unseen_sizes(source, name, k, device, free)
    pool = resources.worker_pool(device, ctx.workers)
    cfg = EvalConfig(
        device=device,
        time=device == "cuda",
        second_shape=False,
        seed=ctx.seed,
        precision="tf32" if ctx.allow_tf32 else "strict",
        timeout=ctx.eval_timeout_s,
    )
    configs: list[dict[str, Any]] = []
    for i, size in enumerate(sizes):
        try:
            task = load_task_source(size.source, f"{name}_unseen{i + 1}")
        except Exception as exc:  # the task does not load at this size: not the kernel's doing
            configs.append({"sizes": size.sizes, "input_shapes": size.input_shapes, "correct": None,
                            "error_kind": "load_error", "error": str(exc).splitlines()[0][:300]})  # fmt: skip
            continue
        res = pool.evaluate(task, code, cfg)
        configs.append(
            {
                "sizes": size.sizes,
                "input_shapes": size.input_shapes,
                "correct": res.correct,
                "error_kind": res.error_kind,
                "error": (res.error or "").strip().splitlines()[-1][:300] if res.error else "",
                "speedup_vs_eager": res.speedup_vs_eager if res.correct else None,
                "speedup_vs_compile": res.speedup_vs_compile if res.correct else None,
                "runtime_ms": res.runtime_ms if res.correct else None,
            }
        )
    judged = [c for c in configs if c["correct"] is not None]
    holds = all(c["correct"] for c in judged) if judged else None
    speedup = _geomean([c["speedup_vs_eager"] for c in judged if c.get("speedup_vs_eager")])
    return {
        "unseen": configs,
        "holds_unseen": holds,
        "unseen_speedup_vs_eager": speedup,
        "unseen_vs_searched": speedup / searched_speedup if speedup and searched_speedup else None,
        "unseen_note": note,
    }
