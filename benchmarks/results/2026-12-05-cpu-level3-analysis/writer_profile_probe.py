"""The offline writer's time on one level-3 model's region signatures, profiled (kept as it ran, reformatted):
split the model on fake tensors, one warm-up write_program call (imports, first use), then cProfile over
the next COUNT signatures. Usage: writer_profile_probe.py MODEL_NUMBER COUNT (KernelBench at /work/kb)."""

import cProfile
import glob
import io
import pstats
import sys
import time
import types

from kernelwright.providers.offline import write_program
from kernelwright.providers.protocol import render_section
from kernelwright.tasks.regions import analysis_model, split_model

number, count = sys.argv[1], int(sys.argv[2])
path = glob.glob(f"/work/kb/KernelBench/level3/{number}_*.py")[0]
task = types.ModuleType("task")
exec(compile(open(path).read(), path, "exec"), task.__dict__)
model, inputs = analysis_model(task)
split = split_model(model, inputs, measure=False)
prompts = [
    "\n\n".join([
        render_section("request", "Write a faster kernel.", kind="large_step"),
        render_section("task", regions[0].source, name=f"region_{signature}"),
    ])
    for signature, regions in split.unique().items()
    if regions[0].source
]  # fmt: skip
write_program(prompts[0])
profile = cProfile.Profile()
t0 = time.perf_counter()
profile.enable()
for prompt in prompts[1 : 1 + count]:
    write_program(prompt)
profile.disable()
print(f"{count} signatures in {time.perf_counter() - t0:.2f}s")
out = io.StringIO()
pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(45)
print(out.getvalue())
