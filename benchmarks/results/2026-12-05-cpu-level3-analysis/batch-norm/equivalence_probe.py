"""The writer's symbolic trace of every region signature of level-3 models, with and without
frontend/batch_norm_stats.py's direct BatchNorm results and frontend/size_equalities.py's direct size
replacements: the graph, every node's shape, strides and dtype, and the trace's ShapeEnv (guards in order,
replacements as resolved, ranges, symbols and their values, axioms) compared; how many BatchNorms and size
equalities took the direct path, and the two traces' times.

Usage (KernelBench at /work/kb): equivalence_probe.py MODEL_NUMBER [MODEL_NUMBER ...]"""

import glob
import itertools
import sys
import time
import types
from pathlib import Path

import torch

from kernelwright.providers.offline.frontend import analysis, batch_norm_stats, cat_width, size_equalities
from kernelwright.tasks import exec_task_module
from kernelwright.tasks.regions import analysis_model, split_model


def state(gm: torch.fx.GraphModule) -> dict:
    env = gm.shape_env
    nodes = []
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor):
            nodes.append((n.name, str(tuple(v.shape)), str(v.stride()), str(v.dtype)))
        else:
            nodes.append((n.name, str(v)))
    return {
        "code": gm.code,
        "nodes": nodes,
        "guards": [str(g.expr) for g in env.guards],
        "replacements": {str(k): str(env.replace(k)) for k in env.replacements},
        "ranges": {str(k): str(v) for k, v in env.var_to_range.items()},
        "values": {str(k): str(v) for k, v in env.backed_var_to_val.items()},
        "axioms": sorted(str(a) for a in env.axioms),
    }


def traced(m, ins, direct: bool) -> tuple[dict, float, int, int]:
    made = pairs = 0
    plain, pair = batch_norm_stats.plain_result, size_equalities._plain_pair

    def counting(*a, **k):
        nonlocal made
        out = plain(*a, **k)
        made += out is not None
        return out

    def counting_pairs(*a, **k):
        nonlocal pairs
        out = pair(*a, **k)
        pairs += out is not None
        return out

    batch_norm_stats.plain_result = counting if direct else (lambda *a, **k: None)
    size_equalities._plain_pair = counting_pairs if direct else (lambda *a, **k: None)
    # A concatenation's width symbol is named from a process-wide count (its source): the same names in both.
    cat_width._counter = itertools.count()
    try:
        t = time.perf_counter()
        gm, _ = analysis._trace(m, ins, "symbolic")
        return state(gm), time.perf_counter() - t, made, pairs
    finally:
        batch_norm_stats.plain_result, size_equalities._plain_pair = plain, pair


for number in sys.argv[1:]:
    path = glob.glob(f"/work/kb/KernelBench/level3/{number}_*.py")[0]
    task = types.ModuleType("task")
    exec(compile(Path(path).read_text(), path, "exec"), task.__dict__)
    model, inputs = analysis_model(task)
    split = split_model(model, inputs, measure=False)
    sources = [regions[0].source for regions in split.unique().values() if regions[0].source]
    differ, direct_n, pairs_n, t_off, t_on, failed = [], 0, 0, 0.0, 0.0, 0
    for i, s in enumerate(sources):
        try:
            m, ins = analysis._build(exec_task_module(s, f"r{number}_{i}"))
            a, ta, _, _ = traced(m, ins, False)
        except Exception:  # a region the symbolic trace cannot follow: the writer traces it otherwise
            failed += 1
            continue
        b, tb, made, pairs = traced(m, ins, True)
        t_off += ta
        t_on += tb
        direct_n += made
        pairs_n += pairs
        if a != b:
            differ.append((i, [k for k in a if a[k] != b[k]]))
    print(f"{Path(path).stem}: {len(sources)} regions ({failed} not traced symbolically), {direct_n} direct "
          f"BatchNorms, {pairs_n} direct size equalities, differ {len(differ)} {differ[:5]}, trace s without {t_off:.2f} with {t_on:.2f}",
          flush=True)  # fmt: skip
