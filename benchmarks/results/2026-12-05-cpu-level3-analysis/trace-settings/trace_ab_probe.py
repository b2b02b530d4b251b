"""Time only the writer's symbolic trace (frontend/analysis.py `_trace`) over a level-3 model's region
signatures A..B-1, after one warm-up trace; run once per checkout to compare (PYTHONPATH picks it).

Usage (KernelBench at /work/kb): trace_ab_probe.py MODEL_NUMBER A B"""

import glob
import sys
import time
import types
from pathlib import Path

from kernelwright.providers.offline.frontend import analysis
from kernelwright.tasks import exec_task_module
from kernelwright.tasks.regions import analysis_model, split_model

number, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
path = glob.glob(f"/work/kb/KernelBench/level3/{number}_*.py")[0]
task = types.ModuleType("task")
exec(compile(Path(path).read_text(), path, "exec"), task.__dict__)
model, inputs = analysis_model(task)
split = split_model(model, inputs, measure=False)
sources = [regions[0].source for regions in split.unique().values() if regions[0].source]
m, ins = analysis._build(exec_task_module(sources[0], "warm"))
analysis._trace(m, ins, "symbolic")
total = 0.0
for i in range(first, min(last, len(sources))):
    m, ins = analysis._build(exec_task_module(sources[i], f"region{i}"))
    t = time.perf_counter()
    analysis._trace(m, ins, "symbolic")
    total += time.perf_counter() - t
print(number, round(total, 2))
