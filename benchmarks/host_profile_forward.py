"""Where a program's host time per forward goes: cProfile over many forwards of one program on a CUDA machine.

The judge's time for a program whose kernels are short is its Python's (benchmarks/host_vs_gpu.py): shapes,
allocations, Triton launches. This runs a program's forward `--calls` times on the task's full inputs
(without synchronising, as the judge does; the GPU queue is drained every 50 calls) and prints the wall time
per call and cProfile's functions by own time, so a change to the emitted glue can aim at what costs.
Only programs this project wrote: they run in this process.

    python benchmarks/host_profile_forward.py TASK PROGRAM.py [--calls 2000] [--out FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cuda_models, load_program, task_path  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("program", type=Path)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from kernelwright.tasks import exec_task_module

    path = task_path(args.task)
    program = load_program(args.program.read_text(), Path(tempfile.mkdtemp()) / args.program.name)
    mod = exec_task_module(path.read_text(), "task_" + path.stem, filename=str(path))
    _, model, inputs = cuda_models(mod, program, seed=0)

    def run(n: int) -> float:
        start = time.perf_counter()
        with torch.no_grad():
            for i in range(n):
                model(*inputs)
                if i % 50 == 49:
                    torch.cuda.synchronize()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / n * 1e6

    run(50)
    plain = run(args.calls)
    prof = cProfile.Profile()
    prof.enable()
    run(args.calls)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    report = (
        f"{args.task} {args.program.name}: {plain:.1f} us per forward (wall, GPU queue drained every 50)\n"
    )
    report += text.getvalue()
    print(report)
    if args.out:
        args.out.write_text(report)


if __name__ == "__main__":
    main()
