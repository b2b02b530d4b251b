"""Level-3 files stitched with the offline writer's first program for each region signature (as
../2026-12-05-cpu-level3-analysis/judge_level3_probe.py), judged whole by the CPU judge, and, at each of the
shapes that judge verifies on (hardware/judge/inputs.py verified_shapes, CPU), how many regions run their
kernel: the stitched model (our own generated file) is built from that shape's task and run once in this
process under the Triton interpreter, then its plan's kernels whose region matches are counted.
Usage: sizes_probe.py NUMBER... (KernelBench at /work/kb); one line per file."""

import glob
import os
import sys
import time
import types
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from kernelwright.hardware import EvalConfig, evaluate  # noqa: E402
from kernelwright.hardware.judge.inputs import verified_shapes  # noqa: E402
from kernelwright.providers.offline import write_program  # noqa: E402
from kernelwright.providers.protocol import render_section  # noqa: E402
from kernelwright.tasks import exec_task_module, load_task  # noqa: E402
from kernelwright.tasks.region_stitch import stitched_source  # noqa: E402
from kernelwright.tasks.regions import analysis_model, split_model  # noqa: E402

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
    why = (verdict.error or verdict.summary())[:160].replace("\n", " | ")
    judged = round(time.time() - t0, 1)
    module = exec_task_module(source, f"{Path(path).stem}_probe")
    module.__dict__["__kw_source__"] = source  # as the judge keeps it (hardware/judge/reference.py)
    state = types.SimpleNamespace(module=module, shapes={}, name=Path(path).stem)
    running = []
    for shape in verified_shapes(state, EvalConfig(device="cpu"), "cpu"):
        shaped = types.ModuleType("stitched")
        shaped.__dict__.update(shape.module.__dict__)
        exec(compile(text, "stitched.py", "exec"), shaped.__dict__)
        torch.manual_seed(0)
        init = shape.module.get_small_init_inputs() if shape.small else shape.module.get_init_inputs()
        xs = shape.module.get_small_inputs() if shape.small else shape.module.get_inputs()
        xs = shape.transform(xs) if shape.transform is not None else xs
        stitched = shaped.ModelNew(*init)
        try:
            with torch.no_grad():
                stitched(*xs)
        except Exception as exc:  # the probe reports a stitched model that does not run, and goes on
            running.append(f"{shape.label}: raised {type(exc).__name__}: {str(exc)[:80]}")
            continue
        plan = next(iter(stitched.__dict__["_kw_plans"].values()))
        ran = sum(1 for i in plan.kernels if plan.matches[i])
        running.append(
            f"{shape.label} {[list(x.shape) for x in xs if hasattr(x, 'shape')]}: {ran}/{len(plan.regions)}"
        )
    print(Path(path).stem, f"{len(kernels)}/{len(split.regions)} regions with a kernel, spec={split.specialized};",
          "running at the judge's shapes:", "; ".join(running), f"| verdict {verdict.correct} ({judged} s): {why}",
          flush=True)  # fmt: skip
