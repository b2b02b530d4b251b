"""The host's Python per forward of a stitched model, with its regions' launches replayed and without
(tasks/region_runtime.py LaunchReplay), on the CPU with every launch a stub.

    python benchmarks/probes/replay_host.py KERNELBENCH_LEVEL3 STITCHED_DIR NUMBER [NUMBER ...]
        [--mode train|eval] [--scale S] [--calls 50]

Each stitched file (`benchmarks/level3_first_programs.py write`, with the runtime that has LaunchReplay) is
loaded, every `*_kw_launch` in it replaced by a function that does nothing, and the model built on the CPU with
the reference's parameters; its inputs are the task's at --scale of their spatial sizes (1: published). Then
forward is timed (least of 5 rounds of --calls) with replay on and off. What is left of a forward with launches
stubbed is the host's own work: the plan, the regions' Python (sizes, strides, grids, buffers) and the torch
operations of regions without a kernel (the same both ways). Not the GPU's launch path, which replay keeps: on
an H100 host it was about 27 us per launch under cProfile (results/2026-12-06d-gpu-level3, call 4).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[1:1] = [str(ROOT), str(ROOT / "benchmarks")]

from _common import level3_pairs, load_program, replay_counts, warmed_forward  # noqa: E402

from kernelwright.tasks.module import exec_task_module, task_init_inputs, task_inputs  # noqa: E402


def _stub(*args: Any, **kwargs: Any) -> None:
    return None


def _least_ms(fn: Any, calls: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e3)
    return best


def measure(task_path: Path, stitched: Path, mode: str, scale: float, calls: int) -> dict[str, Any]:
    task = exec_task_module(task_path.read_text(), "task", filename=str(task_path))
    init = task_init_inputs(task, small=False)
    inputs = task_inputs(task, small=False, seed=0, device="cpu")
    if scale != 1:
        inputs = [
            torch.nn.functional.interpolate(x, scale_factor=scale) if x.dim() == 4 else x for x in inputs
        ]
    row: dict[str, Any] = {"model": task_path.stem, "mode": mode, "inputs": [list(x.shape) for x in inputs]}
    for replay in (False, True):
        program = load_program(stitched.read_text(), Path(tempfile.mkdtemp()) / f"replay_{task_path.stem}.py")
        program.REPLAY = replay  # read when a plan is first run
        for name in [n for n in vars(program) if n.endswith("_kw_launch")]:
            setattr(program, name, _stub)
        torch.manual_seed(0)
        model = program.ModelNew(*init)
        call = warmed_forward(model, inputs, mode == "train")
        row["replay_ms" if replay else "forward_ms"] = round(_least_ms(call, calls), 4)
        if replay:
            row["regions_replayed"], row["regions_replayable"] = replay_counts(model)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb")
    ap.add_argument("stitched")
    ap.add_argument("numbers", nargs="+")
    ap.add_argument("--mode", choices=("train", "eval"), default="train")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for task_path, stitched in level3_pairs(args.kb, args.stitched, args.numbers):
        print(measure(task_path, stitched, args.mode, args.scale, args.calls), flush=True)


if __name__ == "__main__":
    main()
