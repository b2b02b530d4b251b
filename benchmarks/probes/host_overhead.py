"""Host work per forward of the offline writer's programs: what a call costs before any kernel runs.

    python benchmarks/probes/host_overhead.py [SUITE ...] [--calls 400] [--json OUT]

For every task of the suites (default: the bundled level1 and level2), the root program the offline writer
answers is loaded, its Triton kernels are replaced by no-ops, and its forward is called on meta tensors of
the task's full input shapes (the least of five rounds): the time left is the launcher's own Python (shapes, strides, grids, output
allocation, and `_kw_launch`'s key for each launch, which a GPU launch computes too), paid on every call on top of
the kernels and of Triton's launch. A kernel of tens of
microseconds cannot run faster than this. CPU only; no kernel runs. Tasks whose forward needs real data on
the host (or that the writer answers with torch calls only) are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from kernelwright.hardware.targets import get_target
from kernelwright.tasks import load_task
from kernelwright.tasks.module import exec_task_module, task_init_inputs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_program, suite_roots  # noqa: E402


class _NoLaunch:
    """Stands in for a @triton.jit kernel: `kernel[grid](...)` does nothing."""

    def __getitem__(self, grid: object) -> object:
        return lambda *args, **kwargs: None


def meta_model(code: str, task_path: Path, folder: Path) -> tuple[Any, Any, list[Any]]:
    """(program module, its ModelNew built on the meta device, meta inputs of the task's full shapes), the
    program's Triton kernels replaced by no-ops: its forward runs only the launcher's Python."""
    task = load_task(task_path)
    module = load_program(code, folder / f"candidate_{task_path.stem}.py")
    for name, value in list(module.__dict__.items()):
        if hasattr(value, "run") and hasattr(value, "fn"):  # a JITFunction (or an Autotuner over one)
            setattr(module, name, _NoLaunch())
    init = task_init_inputs(exec_task_module(task.source, f"task_{task_path.stem}"))
    with torch.device("meta"):
        model = module.ModelNew(*init)
    sig = task.signature
    inputs = [
        torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
        for shape, dtype in zip(sig.input_shapes, sig.input_dtypes, strict=True)
    ]
    return module, model, inputs


def host_us(code: str, task_path: Path, calls: int, folder: Path) -> float:
    _, model, inputs = meta_model(code, task_path, folder)
    for _ in range(20):
        model(*inputs)
    best = float("inf")
    for _ in range(5):  # the least of five rounds: the machine's other work only adds
        start = time.perf_counter()
        for _ in range(calls):
            model(*inputs)
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suites", nargs="*", default=["level1", "level2"])
    ap.add_argument("--calls", type=int, default=400, help="calls per round (five rounds)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    target = get_target("nvidia-h200")
    rows, skipped = [], []
    tmp = Path(tempfile.mkdtemp(prefix="kw-host-"))
    for name, path, answer in suite_roots(args.suites, target):
        if not answer.code or "@triton.jit" not in answer.code:
            skipped.append((name, "no Triton kernel"))
            continue
        try:
            rows.append({"task": name, "host_us": host_us(answer.code, path, args.calls, tmp)})
        except Exception as exc:  # noqa: BLE001 - a forward that needs real data is reported, not fatal
            skipped.append((name, f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"))
            continue
        print(f"{name}: {rows[-1]['host_us']:.1f} us", flush=True)
    us = [r["host_us"] for r in rows]
    if us:
        print(
            f"{len(us)} tasks: median {statistics.median(us):.1f} us, max {max(us):.1f} us; skipped {len(skipped)}"
        )
    for name, why in skipped:
        print(f"  skipped {name}: {why}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "skipped": skipped}, indent=1) + "\n")


if __name__ == "__main__":
    main()
