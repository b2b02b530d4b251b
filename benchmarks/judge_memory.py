"""Device memory and time the judge needs per candidate, at growing task sizes.

One command on a GPU machine does the whole measurement and writes `judge_memory.json` under --out
(default $OUT) after every size:

    python benchmarks/judge_memory.py --out DIR [--sizes 64M,1G,6.4G]

For each size: a ReLU task whose input holds that many bytes (fp32, 4096 rows), an honest Triton
candidate, three evaluations (verify + time) in one judge. Measured:
- the task's footprint (input + output bytes);
- peak device memory in use on the GPU (all processes: the judge and the candidate process), sampled
  every 2 ms through NVML (`torch.cuda.device_memory_used`) while each evaluation runs, minus what was in
  use before the pool started: peak / footprint is the figure the harness bounds;
- seconds per candidate (the evaluation's wall time), first and warm.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


rows = 4096
cols = {cols}


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(5, 1237)]
"""

CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096, num_warps=8)
        return out
"""


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


class PeakSampler:
    """Peak of the GPU's memory in use (every process), and each process's own peak (NVML), sampled in a
    thread: which process (the judge, the candidate, a standby) holds what."""

    def __init__(self) -> None:
        import torch

        self.read = torch.cuda.device_memory_used
        self.peak = 0
        self.per_pid: dict[int, int] = {}
        self._nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
        except Exception:  # per-process figures are a diagnosis; the total is the measurement
            self._nvml = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, int(self.read()))
            if self._nvml is not None:
                nvml, handle = self._nvml
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    used = int(p.usedGpuMemory or 0)
                    self.per_pid[p.pid] = max(self.per_pid.get(p.pid, 0), used)
            time.sleep(0.002)

    def processes(self) -> list[dict[str, object]]:
        """Each process seen, biggest first, with the start of its command line."""
        rows = []
        for pid, peak in sorted(self.per_pid.items(), key=lambda kv: -kv[1]):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
            except OSError:
                cmd = "(gone)"
            rows.append({"pid": pid, "peak_bytes": peak, "cmdline": cmd})
        return rows

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT"), help="output directory (default: $OUT)")
    ap.add_argument("--sizes", default="64M,1G,6.4G", help="input bytes per task, comma-separated")
    ap.add_argument("--evals", type=int, default=3, help="evaluations per size")
    args = ap.parse_args()
    out_dir = Path(args.out or "bench-out")
    out_dir.mkdir(parents=True, exist_ok=True)

    import torch

    from kernelwright.hardware import EvalConfig, WorkerPool
    from kernelwright.tasks import load_task

    baseline = int(torch.cuda.device_memory_used())
    report: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                 "device": torch.cuda.get_device_name(0), "baseline_bytes": baseline,
                                 "sizes": {}}  # fmt: skip
    sizes: dict[str, object] = {}
    report["sizes"] = sizes
    with WorkerPool(device="cuda", workers=1) as pool, tempfile.TemporaryDirectory() as tmp:
        pool._workers[0].wait_ready()
        time.sleep(15)  # the candidate processes forked ahead start CUDA meanwhile
        idle = int(torch.cuda.device_memory_used())
        report["pool_idle_bytes"] = idle - baseline
        for label in args.sizes.split(","):
            nbytes = parse_size(label)
            cols = max(1, nbytes // (4096 * 4))
            path = Path(tmp) / f"relu_{label}.py"
            path.write_text(TASK.format(cols=cols))
            task = load_task(path)
            footprint = 2 * 4096 * cols * 4
            runs = []
            for i in range(args.evals):
                before = int(torch.cuda.device_memory_used())
                with PeakSampler() as sampler:
                    res = pool.evaluate(task, CANDIDATE + f"\n# {label} {i}\n", EvalConfig())
                runs.append({
                    "correct": res.correct, "error": (res.error or "")[:500], "wall_s": res.wall_s,
                    "peak_extra_bytes": sampler.peak - idle, "before_bytes": before - idle,
                    "runtime_ms": res.runtime_ms, "speedup_vs_eager": res.speedup_vs_eager,
                    "phases_s": res.extra.get("phases_s"), "memory": res.extra.get("memory"),
                    "processes": sampler.processes(),
                })  # fmt: skip
                r = runs[-1]
                print(f"{label} eval {i}: {res.summary()} | {res.wall_s:.2f} s | peak extra "
                      f"{r['peak_extra_bytes'] / footprint:.2f} x footprint", flush=True)  # fmt: skip
                print(f"  phases {r['phases_s']}\n  memory {r['memory']}\n  processes "
                      + "; ".join(f"{p['peak_bytes'] / footprint:.2f}x {p['cmdline'][:60]}"  # type: ignore[operator]
                                  for p in r["processes"][:4]), flush=True)  # type: ignore[index]  # fmt: skip
            sizes[label] = {"footprint_bytes": footprint, "runs": runs,
                            "peak_over_footprint": max(r["peak_extra_bytes"] for r in runs) / footprint,  # type: ignore[type-var]
                            "warm_wall_s": min(r["wall_s"] for r in runs[1:]) if len(runs) > 1 else None}  # fmt: skip
            (out_dir / "judge_memory.json").write_text(json.dumps(report, indent=1))
    report["complete"] = True
    (out_dir / "judge_memory.json").write_text(json.dumps(report, indent=1))
    for label, v in sizes.items():
        print(f"{label}: peak/footprint {v['peak_over_footprint']:.2f}, warm {v['warm_wall_s']} s")  # type: ignore[index]
    return 0


if __name__ == "__main__":
    sys.exit(main())
