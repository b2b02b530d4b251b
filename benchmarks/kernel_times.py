"""Where a program's time goes, kernel by kernel: each GPU kernel one forward launches, with its mean
device time as the CUDA profiler saw it, for program files (ModelNew) and for eager and torch.compile on
the same task.

A diagnostic beside the harness (benchmarks/design_sweep.py and `kernelwright bench` give the figures
RESULTS.md quotes): it answers "which of the split design's kernels is slow" or "how many passes does
torch.compile's program make", not "how fast is it". Inputs are the task's full inputs; programs run in
this process (only programs this project wrote: never a candidate from elsewhere).

Usage, from the repository root, on a CUDA machine:
    python benchmarks/kernel_times.py TASK [PROGRAM.py ...] [--baselines] [--reps 10] [--out DIR]
TASK is a path or a bundled name (published/08). Writes DIR/kernel_times.json and .md (DIR defaults to
$OUT, else ./kernel-times-out) and prints the table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import environment, task_path  # noqa: E402

from kernelwright.tasks import exec_task_module, load_task  # noqa: E402


def _import_program(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"kw_program_{path.stem}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel_profile(fn: Any, reps: int) -> tuple[list[dict[str, Any]], float]:
    """([{kernel, calls per forward, mean us per call, us per forward}], wall ms per forward) over `reps`
    forwards after three warm-up calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) * 1e3 / reps
    rows = []
    for ev in prof.key_averages():
        total = getattr(ev, "device_time_total", None)
        if total is None:
            total = getattr(ev, "cuda_time_total", 0.0)
        if not total or ev.count == 0:
            continue
        rows.append(
            {
                "kernel": ev.key[:90],
                "calls": round(ev.count / reps, 2),
                "us_per_call": round(total / ev.count, 1),
                "us_per_forward": round(total / reps, 1),
            }
        )
    rows.sort(key=lambda r: -r["us_per_forward"])
    return rows, round(wall_ms, 3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task")
    ap.add_argument("programs", nargs="*", type=Path)
    ap.add_argument("--baselines", action="store_true", help="eager and torch.compile too")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "kernel-times-out")))
    args = ap.parse_args(argv)

    import torch

    task = load_task(Path(args.task) if Path(args.task).is_file() else task_path(args.task))
    ref = exec_task_module(task.source, task.name)
    torch.manual_seed(0)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    init = ref.get_init_inputs()
    model = ref.Model(*init).cuda()
    runs: list[tuple[str, Any]] = []
    if args.baselines:
        runs.append(("eager", model))
        runs.append(("torch.compile", torch.compile(model)))
    for p in args.programs:
        cand = _import_program(p).ModelNew(*init).cuda()
        cand.load_state_dict(model.state_dict(), strict=False)
        runs.append((p.name, cand))
    report: dict[str, Any] = {"task": task.name, "meta": environment("cuda"), "runs": []}
    lines = [f"# kernel_times {task.name} on {torch.cuda.get_device_name()}", ""]
    with torch.no_grad():
        expected = model(*inputs).float()
    for label, m in runs:
        with torch.no_grad():
            # A check, not the judge's: the largest difference from eager on these inputs.
            err = (m(*inputs).float() - expected).abs().max().item()
            rows, wall = kernel_profile(lambda m=m: m(*inputs), args.reps)
        total = sum(r["us_per_forward"] for r in rows)
        report["runs"].append(
            {
                "program": label,
                "kernels": rows,
                "device_us": round(total, 1),
                "wall_ms": wall,
                "max_abs_err": err,
            }
        )
        lines += [f"## {label}: {total / 1e3:.3f} ms of kernels per forward ({wall:.3f} ms wall, max abs err {err:.2e})", "",
                  "| kernel | calls | us per call | us per forward |", "|---|---|---|---|"]  # fmt: skip
        lines += [
            f"| {r['kernel']} | {r['calls']} | {r['us_per_call']} | {r['us_per_forward']} |" for r in rows
        ]
        lines.append("")
        del m
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kernel_times.json").write_text(json.dumps(report, indent=1))
    (args.out / "kernel_times.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
