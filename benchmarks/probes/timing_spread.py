"""How much one program's time moves between allocations and between processes (a probe of the judge's timing).

The same offline-writer program timed several times in one process, each round with freshly allocated
inputs and a freshly built model, beside the eager reference on the same tensors (CUDA events, L2 flushed
before every call, median of `--reps`). Run it in several processes to see the spread between them: the
bench has timed one program at 0.38 and 0.47 ms in two evaluations of the same search (level2_bf16/01), while
eager's time stayed put.

    python benchmarks/probes/timing_spread.py --task level2_bf16/01 --rounds 5 --reps 50 --out spread.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _common import cuda_event_times, cuda_models, load_program, root_program, task_path


def _median_ms(fn, flush: torch.Tensor, reps: int) -> float:
    """As the judge times: an L2 flush before each call, events around it, one synchronize at the end (the host
    runs ahead, so its launch work overlaps the GPU's)."""
    return statistics.median(cuda_event_times(fn, warmup=5, reps=reps, flush=flush, sync_each=False))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="level2_bf16/01", help="SUITE/NN of a bundled task")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from kernelwright.hardware.targets import get_target
    from kernelwright.tasks import exec_task_module, load_task

    path = task_path(args.task)
    answer = root_program(load_task(path), get_target("nvidia-h200"))
    folder = Path(tempfile.mkdtemp(prefix="kw-spread-"))
    program = load_program(answer.code, folder / f"p{os.getpid()}.py")
    mod = exec_task_module(path.read_text(), "task_" + path.stem, filename=str(path))
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    rounds = []
    keep = []  # earlier rounds' tensors stay allocated: each round gets new addresses
    for r in range(args.rounds):
        ref, new, inputs = cuda_models(mod, program, seed=r)
        with torch.no_grad():
            cand = _median_ms(lambda m=new, xs=inputs: m(*xs), flush, args.reps)
            eager = _median_ms(lambda m=ref, xs=inputs: m(*xs), flush, args.reps)
        ptrs = {
            f"in{i}": t.data_ptr() % (2 << 20) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)
        }
        ptrs.update({k: p.data_ptr() % (2 << 20) for k, p in new.named_parameters()})
        row = {"round": r, "candidate_ms": cand, "eager_ms": eager, "ptr_mod_2MiB": ptrs}
        print(json.dumps(row), flush=True)
        rounds.append(row)
        keep.append((ref, new, inputs))
    out = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": torch.cuda.get_device_name(),
           "pid": os.getpid(), "task": args.task, "design": answer.code.splitlines()[0], "rounds": rounds}  # fmt: skip
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
