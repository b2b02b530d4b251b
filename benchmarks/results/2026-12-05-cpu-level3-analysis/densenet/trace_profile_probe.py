"""cProfile of the writer's symbolic trace (frontend/analysis.py `_trace`) over every region signature of a
level-3 model, after one warm-up trace: where a region's analysis time goes.

Usage (KernelBench at /work/kb): trace_profile_probe.py MODEL_NUMBER [SORT [RESTRICTION ...]]
e.g. `trace_profile_probe.py 15 cumulative "dropout|cat_width|batch_norm" 40`."""

import cProfile
import glob
import io
import pstats
import sys
import time
import types
from pathlib import Path

from kernelwright.providers.offline.frontend import analysis
from kernelwright.tasks import exec_task_module
from kernelwright.tasks.regions import analysis_model, split_model

path = glob.glob(f"/work/kb/KernelBench/level3/{sys.argv[1]}_*.py")[0]
task = types.ModuleType("task")
exec(compile(Path(path).read_text(), path, "exec"), task.__dict__)
model, inputs = analysis_model(task)
split = split_model(model, inputs, measure=False)
sources = [regions[0].source for regions in split.unique().values() if regions[0].source]
m, ins = analysis._build(exec_task_module(sources[0], "warm"))
analysis._trace(m, ins, "symbolic")
built = [analysis._build(exec_task_module(s, f"region{i}")) for i, s in enumerate(sources)]
profile = cProfile.Profile()
t = time.perf_counter()
profile.enable()
for m, ins in built:
    analysis._trace(m, ins, "symbolic")
profile.disable()
print(sys.argv[1], "traces", len(built), "s", round(time.perf_counter() - t, 2))
out = io.StringIO()
limits = [int(a) if a.isdigit() else a for a in sys.argv[3:]] or [35]
pstats.Stats(profile, stream=out).sort_stats(sys.argv[2] if len(sys.argv) > 2 else "cumulative").print_stats(
    *limits
)
print(out.getvalue())
