"""One variant of the Gluon ping-pong bmm per process (a hang is killed by the caller's timeout): correctness at
odd sizes and at the task's, then judge-style times (L2 flushed, one synchronize per round) against torch.bmm
(cuBLAS) and the writer's root program, in alternating rounds. Usage: probe.py STAGES GROUP"""

import importlib.util
import statistics
import sys

import torch

sys.path.insert(0, "benchmarks")
sys.path.insert(0, "benchmarks/candidates")
import bmm_gluon_pingpong as g  # noqa: E402
from _common import cuda_event_times, max_err_over_rms  # noqa: E402

stages, group = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
dev = "cuda"
for nb, m, k, n in [(3, 256, 128, 200), (1, 128, 320, 128), (5, 384, 64, 136), (2, 1024, 1024, 1024)]:
    a = torch.randn(nb, m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(nb, k, n, device=dev, dtype=torch.bfloat16)
    out = g.bmm_pingpong(a, b, stages, group)
    torch.cuda.synchronize()
    ref = torch.bmm(a.float(), b.float())
    print(f"S{stages} G{group} {nb}x{m}x{k}x{n}: err/rms {max_err_over_rms(out, ref):.2e}", flush=True)

a = torch.randn(32, 2048, 1024, device=dev, dtype=torch.bfloat16)
b = torch.randn(32, 1024, 2048, device=dev, dtype=torch.bfloat16)
ref = torch.bmm(a.float(), b.float())
out = g.bmm_pingpong(a, b, stages, group)
print(
    f"task size err/rms {max_err_over_rms(out, ref):.2e} (cuBLAS bf16: {max_err_over_rms(torch.bmm(a, b), ref):.2e})"
)
del ref
spec = importlib.util.spec_from_file_location(
    "root16", "benchmarks/results/2026-12-04e-h200-gluon-bmm/root16.py"
)
root = importlib.util.module_from_spec(spec)
spec.loader.exec_module(root)
root_model = root.ModelNew().cuda()
flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device=dev)
fns = {
    "cublas": lambda: torch.bmm(a, b),
    "gluon": lambda: g.bmm_pingpong(a, b, stages, group),
    "root": lambda: root_model(a, b),
}
times = {name: [] for name in fns}
for rnd in range(6):
    for name, fn in fns.items() if rnd % 2 == 0 else reversed(list(fns.items())):
        times[name] += cuda_event_times(fn, warmup=3, reps=20, flush=flush, sync_each=False)
med = {name: statistics.median(v) for name, v in times.items()}
print(
    f"S{stages} G{group} medians ms: "
    + ", ".join(f"{n} {v:.4f}" for n, v in med.items())
    + f" | cublas/gluon {med['cublas'] / med['gluon']:.4f} cublas/root {med['cublas'] / med['root']:.4f}",
    flush=True,
)
