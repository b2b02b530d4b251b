"""A sha256 of each level-3 region signature's first program (or the writer's refusal), for the models given.

Usage (KernelBench at /work/kb): python region_programs_probe.py OUT.json 9,15,29 ; compare two OUT files."""

import glob
import hashlib
import json
import sys
import time
import types
from pathlib import Path

from kernelwright.providers.offline import write_program
from kernelwright.providers.protocol import render_section
from kernelwright.tasks.regions import analysis_model, split_model

out = {}
for number in sys.argv[2].split(","):
    path = glob.glob(f"/work/kb/KernelBench/level3/{number}_*.py")[0]
    task = types.ModuleType("task")
    exec(compile(Path(path).read_text(), path, "exec"), task.__dict__)
    model, inputs = analysis_model(task)
    split = split_model(model, inputs, measure=False)
    t = time.perf_counter()
    for sig, regs in split.unique().items():
        if not regs[0].source:
            continue
        request = render_section("request", "Write a faster kernel.", kind="large_step")
        answer = write_program(
            "\n\n".join([request, render_section("task", regs[0].source, name=f"region_{sig}")])
        )
        text = answer.code or ("refused: " + answer.explanation)
        out[f"{number}/{sig}"] = hashlib.sha256(text.encode()).hexdigest()
    print(number, round(time.perf_counter() - t, 2), flush=True)
Path(sys.argv[1]).write_text(json.dumps(out, indent=0))
