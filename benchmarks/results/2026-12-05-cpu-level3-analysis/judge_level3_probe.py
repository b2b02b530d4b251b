"""Level-3 files stitched with the offline writer's first program for each region signature, judged whole
by the CPU judge (its own sizes and second shape). Usage: judge_level3_probe.py NUMBER... (KernelBench at
/work/kb); prints per file: regions with a kernel, specialized or not, the verdict, seconds."""

import glob
import sys
import time
import types
from pathlib import Path

from kernelwright.hardware import EvalConfig, evaluate
from kernelwright.providers.offline import write_program
from kernelwright.providers.protocol import render_section
from kernelwright.tasks import load_task
from kernelwright.tasks.region_stitch import stitched_source
from kernelwright.tasks.regions import analysis_model, split_model

for number in sys.argv[1:]:
    path = glob.glob(f"/work/kb/KernelBench/level3/{number}_*.py")[0]
    source = open(path).read()
    task = types.ModuleType("task")
    exec(compile(source, path, "exec"), task.__dict__)
    model, inputs = analysis_model(task)
    split = split_model(model, inputs, measure=False)
    kernels = {}
    for signature, regions in split.unique().items():
        if not regions[0].source:
            continue
        request = render_section("request", "Write a faster kernel.", kind="large_step")
        answer = write_program(request + "\n\n" + render_section("task", regions[0].source, name="region"))
        if answer.code:
            kernels.update({r.index: (signature, answer.code) for r in regions})
    plans = [r.plan() for r in split.regions]
    text = stitched_source(source, split.leaves, plans, kernels, Path(path).stem, spec=split.spec)
    t0 = time.time()
    verdict = evaluate(load_task(path), text, EvalConfig(device="cpu"))
    why = (verdict.error or verdict.summary())[:300].replace("\n", " | ")
    print(Path(path).stem, f"{len(kernels)}/{len(split.regions)} kernels spec={split.specialized}",
          verdict.correct, round(time.time() - t0, 1), why, flush=True)  # fmt: skip
