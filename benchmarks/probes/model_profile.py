"""Where a stitched model's time goes on a GPU: the host's issue time per forward against the kernels' own time.

    python benchmarks/probes/model_profile.py KERNELBENCH_LEVEL3 STITCHED_DIR NUMBER [NUMBER ...] [--out OUT.jsonl]
        [--mode train|eval] [--calls 20] [--device cuda|cpu]

For each level-3 file at its published sizes, the reference Model and the stitched ModelNew (the file
`benchmarks/level3_first_programs.py write` wrote, NUMBER_*_stitched.py) are built with the same parameters, in
strict fp32 (TF32 off), and each is measured three ways, after three warm-up calls:
- wall: CUDA events around one call, the device synchronized before it (median of --calls);
- host: the Python time of one call without synchronizing, so the kernels of earlier calls still run while it
  issues (median of --calls): where host >= wall, the forward is bound by its launches, not its kernels;
- kernels: torch.profiler's CUDA kernel time per call (5 calls), with the 12 kernels that took longest.
A row per (model, side) goes to --out and a summary to stdout. Not the judge: no verification, no L2 flush,
the candidate in this process. On the CPU (`--device cpu`, Triton's interpreter) only wall and host.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernelwright.tasks.module import exec_task_module, task_init_inputs, task_inputs  # noqa: E402


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)  # Triton's JIT reads kernels from the file
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _wall_ms(fn: Any, device: str, calls: int) -> float:
    times = []
    for _ in range(calls):
        _sync(device)
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _host_ms(fn: Any, device: str, calls: int) -> float:
    _sync(device)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    _sync(device)
    return statistics.median(times)


def _kernels(fn: Any, calls: int = 5) -> tuple[float, int, list[tuple[str, int, float]]]:
    """(CUDA kernel ms per call, kernel launches per call, the 12 longest kernels: name, count, ms per call)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = [e for e in prof.key_averages() if e.device_time_total > 0]
    total_us = sum(e.device_time_total for e in rows)
    count = sum(e.count for e in rows)
    top = sorted(rows, key=lambda e: -e.device_time_total)[:12]
    return (total_us / 1e3 / calls, count // calls,
            [(e.key[:90], e.count // calls, round(e.device_time_total / 1e3 / calls, 4)) for e in top])  # fmt: skip


def profile_model(
    task_path: Path, stitched: Path, mode: str, calls: int, device: str
) -> list[dict[str, Any]]:
    task = exec_task_module(task_path.read_text(), "task", filename=str(task_path))
    candidate = _load(stitched, f"stitched_{task_path.stem}")
    torch.manual_seed(0)
    init = task_init_inputs(task, small=False)
    ref = task.Model(*init).to(device)
    new = candidate.ModelNew(*init).to(device)
    new.load_state_dict(ref.state_dict())
    inputs = task_inputs(task, small=False, seed=0, device=device)
    rows = []
    for side, model in (("reference", ref), ("stitched", new)):
        model.train(mode == "train")

        def call(model: Any = model) -> None:
            with torch.no_grad():
                model(*inputs)

        for _ in range(3):
            call()
        row: dict[str, Any] = {"model": task_path.stem, "side": side, "mode": mode, "device": device,
                               "wall_ms": round(_wall_ms(call, device, calls), 4),
                               "host_ms": round(_host_ms(call, device, calls), 4)}  # fmt: skip
        if device == "cuda":
            row["kernel_ms"], row["launches"], row["top"] = _kernels(call)
            row["gpu"] = torch.cuda.get_device_name()
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb")
    ap.add_argument("stitched")
    ap.add_argument("numbers", nargs="+")
    ap.add_argument("--out")
    ap.add_argument("--mode", choices=("train", "eval"), default="train")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # the judge's strict precision
    torch.backends.cudnn.allow_tf32 = False
    for number in args.numbers:
        found = glob.glob(str(Path(args.kb) / f"{number}_*.py"))
        stitched = glob.glob(str(Path(args.stitched) / f"{number}_*_stitched.py"))
        if not found or not stitched:
            print(f"{number}: no task file or no stitched file", flush=True)
            continue
        try:
            rows = profile_model(Path(found[0]), Path(stitched[0]), args.mode, args.calls, args.device)
        except Exception as exc:  # one model's failure does not stop the others
            print(f"{number}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        for row in rows:
            kernel = (
                f" kernels {row['kernel_ms']:.3f} ms in {row['launches']} launches"
                if "kernel_ms" in row
                else ""
            )
            print(f"{row['model']} {row['side']:9s} wall {row['wall_ms']:.3f} ms host {row['host_ms']:.3f} ms{kernel}",
                  flush=True)  # fmt: skip
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
