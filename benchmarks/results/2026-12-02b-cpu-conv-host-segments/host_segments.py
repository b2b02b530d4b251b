import sys, tempfile, time, re
from pathlib import Path
sys.path.insert(0, "benchmarks")
import host_overhead as h
from _common import suite_roots
from kernelwright.hardware.targets import get_target
from kernelwright.tasks import load_task
from kernelwright.tasks.module import exec_task_module, task_init_inputs
import torch
tgt = get_target("nvidia-h200")
want = sys.argv[1]
for name, path, answer in suite_roots(["level2_bf16"], tgt):
    if want in name: break
code = answer.code
# checkpoints: after the conv geometry block, before each stage, at return
lines = code.split("\n")
out = []
infwd = False
for ln in lines:
    if ln.startswith("def _kw_forward"):
        infwd = True
        out.append(ln); out.append("    _T = [time.perf_counter()]"); continue
    if infwd and ln.strip().startswith("# stage"):
        out.append("    _T.append(time.perf_counter())")
    if infwd and ln.strip().startswith("xk = "):
        out.append("    _T.append(time.perf_counter())")
    if infwd and ln.strip().startswith("return "):
        out.append("    _T.append(time.perf_counter()); _TIMES.append(_T)")
        infwd = False
    out.append(ln)
code = "import time\n_TIMES = []\n" + "\n".join(out)
tmp = Path(tempfile.mkdtemp())
task = load_task(path)
module = h.load_program(code, tmp / "cand.py")
for n, v in list(module.__dict__.items()):
    if hasattr(v, "run") and hasattr(v, "fn"):
        setattr(module, n, h._NoLaunch())
init = task_init_inputs(exec_task_module(task.source, "t"))
with torch.device("meta"):
    m = module.ModelNew(*init)
sig = task.signature
inputs = [torch.empty(s, dtype=getattr(torch, d), device="meta") for s, d in zip(sig.input_shapes, sig.input_dtypes)]
for _ in range(300): m(*inputs)
module._TIMES.clear()
for _ in range(2000): m(*inputs)
import statistics
T = module._TIMES
segs = len(T[0]) - 1
print(name, "segments (us, median):", [round(statistics.median((t[i+1]-t[i])*1e6 for t in T), 1) for i in range(segs)], "total", round(statistics.median((t[-1]-t[0])*1e6 for t in T),1))
