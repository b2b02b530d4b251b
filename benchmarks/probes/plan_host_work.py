"""Host work per forward of a stitched model's plan (tasks/region_runtime.py), before and after a change to it.

    python benchmarks/probes/plan_host_work.py OLD_RUNTIME.py KERNELBENCH_LEVEL3 NUMBER [NUMBER ...]

OLD_RUNTIME.py is another copy of tasks/region_runtime.py (e.g. `git show REV:tasks/region_runtime.py > old.py`:
the file is self-contained). For each level-3 file at its published sizes (shapes only: the model is split on
fake inputs, nothing is computed), the model's graph is traced once and every operation is made a stub (call
functions and methods return None, leaf modules' forwards return None), so the time left is the plan's own
machinery plus a module call per leaf module, the same for both runtimes. Twice: with every region run as its
torch operations, then with every region that has a task file given a stub kernel (the region's own module,
its forward a stub), so that binding the model's parameters and buffers to it is timed too. Least of 7 rounds
of 200 forwards, best of two tries. Specialized models (traced per input size) are skipped.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import sys
import time
import types
from pathlib import Path
from typing import Any

from kernelwright.tasks import exec_task_module
from kernelwright.tasks import region_runtime as new_runtime
from kernelwright.tasks.region_analysis import analysis_model
from kernelwright.tasks.regions import split_model


def _best(fn: Any, n: int = 200, rounds: int = 7) -> float:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n)
    return min(out)


def _stub(*args: Any, **kwargs: Any) -> None:
    return None


def _both(old: Any, new: Any, model: Any, inputs: tuple[Any, ...]) -> tuple[float, float]:
    t_old = min(_best(lambda: old.run(model, inputs)) for _ in range(2))
    t_new = min(_best(lambda: new.run(model, inputs)) for _ in range(2))
    return t_old, t_new


def probe(old_runtime: Any, path: str) -> str:
    task = types.ModuleType("task")
    exec(compile(Path(path).read_text(), path, "exec"), task.__dict__)
    model, fake = analysis_model(task)
    split = split_model(model, fake, measure=False)
    stem = Path(path).stem
    if split.specialized:
        return f"{stem}: specialized, skipped"
    graph = new_runtime.trace(model, set(split.leaves), split.constant_args)
    regions = [r.plan() for r in split.regions]
    for node in graph.nodes:
        if node.op in ("call_function", "call_method"):
            node.op, node.target = "call_function", _stub
        elif node.op == "call_module":
            model.get_submodule(str(node.target)).forward = _stub
    nodes = sum(1 for n in graph.nodes if n.op not in ("placeholder", "output"))
    inputs = tuple(fake)
    old, new = old_runtime.RegionPlan(graph, regions), new_runtime.RegionPlan(graph, regions)
    t_old, t_new = _both(old, new, model, inputs)
    line = (f"{stem}: {nodes} nodes, {len(regions)} regions; torch regions {t_old * 1e6:.0f} -> {t_new * 1e6:.0f} us "
            f"({t_old / nodes * 1e6:.2f} -> {t_new / nodes * 1e6:.2f} us/node)")  # fmt: skip
    old, new = old_runtime.RegionPlan(graph, regions), new_runtime.RegionPlan(graph, regions)
    kernels = bindings = 0
    for region, plan in zip(split.regions, regions, strict=True):
        if not region.source:
            continue
        module = exec_task_module(region.source, f"region{region.index}")
        kernel = module.Model(*module.get_init_inputs())
        outputs = len(plan["outputs"])
        kernel.forward = _stub if outputs == 1 else (lambda *a, n=outputs: (None,) * n)
        old.attach(region.index, kernel)
        new.attach(region.index, kernel)
        kernels += 1
        bindings += len(plan["bindings"])
    if kernels:
        t_old, t_new = _both(old, new, model, inputs)
        line += f"; {kernels} stub kernels ({bindings} bindings) {t_old * 1e6:.0f} -> {t_new * 1e6:.0f} us"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old_runtime")
    parser.add_argument("level3")
    parser.add_argument("numbers", nargs="+")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("old_region_runtime", args.old_runtime)
    assert spec is not None and spec.loader is not None
    old_runtime = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old_runtime)
    for number in args.numbers:
        print(probe(old_runtime, glob.glob(f"{args.level3}/{number}_*.py")[0]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
