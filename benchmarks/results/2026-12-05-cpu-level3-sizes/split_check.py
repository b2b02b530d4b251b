"""Split all level-3 files (measure=False) and dump per model its regions: signature, fingerprint, hash of the
task source, why not a task, number of size expressions. Usage: split_check.py OUT.json (KernelBench at
/work/kb). Run at the parent commit and after, the two dumps compared give split_check.txt."""

import glob
import hashlib
import json
import sys
import time
import types
from pathlib import Path

from kernelwright.tasks.regions import analysis_model, split_model

out = {}
for path in sorted(
    glob.glob("/work/kb/KernelBench/level3/*.py"), key=lambda p: int(Path(p).name.split("_")[0])
):
    name = Path(path).stem
    try:
        task = types.ModuleType("task")
        exec(compile(open(path).read(), path, "exec"), task.__dict__)
        model, inputs = analysis_model(task)
        t0 = time.time()
        split = split_model(model, inputs, measure=False)
        regions = [
            [r.signature, r.fingerprint, hashlib.sha256(r.source.encode()).hexdigest()[:12], r.why_not,
             len(getattr(r, "sizes", {}) or {})]
            for r in split.regions
        ]  # fmt: skip
        out[name] = {"specialized": split.specialized, "s": round(time.time() - t0, 2), "regions": regions}
    except Exception as exc:
        out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(name, out[name].get("error") or (out[name]["specialized"], len(out[name]["regions"])), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
