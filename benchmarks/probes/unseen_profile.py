"""Where a written program loses time at a size its search never saw: per-kernel GPU time and host time.

    python benchmarks/probes/unseen_profile.py --out DIR CASE [CASE ...]

CASE: `TASK_FILE:NAME=V,NAME=V` (a task file and the sizes of one unseen configuration). `kernelwright bench
--unseen 2` judged the 30 generated tasks on an H100 (2026-12-07, results/2026-12-07f-...): every best kernel
held, but at the smaller, odd configuration several ran slower than at the larger one (gen/09: 0.158 ms at
3071 x 575 x 767 against 0.071 ms at 5120 x 960 x 1280). For each case this writes the offline writer's first
program at the task's traced size (a search's root), then at the traced size and at the case's sizes times
it with CUDA events (each call on its own, and back to back), times the host's part (the forward's Python with
the GPU kept busy by a long kernel first, so the host never waits), and lists the GPU kernels a profiled call
runs with their times (--cprofile N: the program's Python under cProfile too). Eager PyTorch the same way. One JSON file: DIR/unseen_profile.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import cuda_event_times, cuda_models, environment, load_program, max_err_over_rms

ROOT = Path(__file__).resolve().parents[2]


def _host_ms(fn: Any, reps: int) -> float:
    """The forward's host time per call: a long GPU sleep queued first, so no launch waits on the GPU."""
    import torch

    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))  # a few hundred ms of GPU work ahead of the calls
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    host = (time.perf_counter() - t0) * 1e3 / reps
    torch.cuda.synchronize()
    return host


def _kernels(fn: Any, calls: int) -> list[dict[str, Any]]:
    """The GPU kernels `calls` profiled calls ran: name, count per call and microseconds per call."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = []
    for ev in prof.key_averages():
        us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if us > 0:
            rows.append({"kernel": ev.key[:120], "per_call": ev.count / calls, "us_per_call": us / calls})
    return sorted(rows, key=lambda r: -r["us_per_call"])


def _python_profile(fn: Any, calls: int) -> str:
    """The forward's Python under cProfile over `calls` calls: the 25 functions with the most own time."""
    import cProfile
    import io
    import pstats

    import torch

    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    return text.getvalue()


def _timings(fn: Any, reps: int, cprofile: int = 0) -> dict[str, Any]:
    each = cuda_event_times(fn, warmup=3, reps=reps)
    back = cuda_event_times(fn, warmup=3, reps=reps, sync_each=False)
    out = {
        "ms_each": statistics.median(each),
        "ms_back_to_back": statistics.median(back),
        "host_ms": _host_ms(fn, reps),
        "kernels": _kernels(fn, 5),
    }
    if cprofile:
        out["python_profile"] = _python_profile(fn, cprofile)
    return out


def run_case(case: str, out: Path, reps: int, cprofile: int = 0) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from fakes.writer import writer_prompt

    from kernelwright.providers.offline.writer import write_program
    from kernelwright.tasks.module import exec_task_module
    from kernelwright.tasks.resize import with_sizes

    path, _, spec = case.partition(":")
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in spec.split(",") if kv)}
    source = Path(path).read_text(encoding="utf-8")
    program = write_program(writer_prompt(source)).code
    name = "p_" + Path(path).stem
    prog = load_program(program, out / f"{name}.py")
    entry: dict[str, Any] = {"task": path, "sizes": sizes, "header": program.splitlines()[0], "at": {}}
    for label, src in (("traced", source), ("unseen", with_sizes(source, sizes))):
        try:
            mod = exec_task_module(src, f"task_{label}")
            ref, new, inputs = cuda_models(mod, prog, seed=0)
            with torch.no_grad():
                err = max_err_over_rms(new(*inputs), ref(*inputs))
                entry["at"][label] = {
                    "input_shapes": [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)],
                    "err_over_rms": err,
                    "eager": _timings(lambda m=ref, x=inputs: m(*x), reps),
                    "program": _timings(lambda m=new, x=inputs: m(*x), reps, cprofile),
                }
        except Exception as exc:
            entry["at"][label] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        torch.cuda.empty_cache()
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="TASK_FILE:NAME=V,NAME=V")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument(
        "--cprofile", type=int, default=0, help="the program's Python under cProfile over N calls"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"environment": environment("cuda"), "cases": []}
    for case in args.cases:
        entry = run_case(case, args.out, args.reps, args.cprofile)
        results["cases"].append(entry)
        for label, at in entry["at"].items():
            brief = {k: (v if not isinstance(v, dict) else {x: y for x, y in v.items() if x not in ("kernels", "python_profile")})
                     for k, v in at.items() if k != "input_shapes"}  # fmt: skip
            print(entry["task"], label, json.dumps(brief), flush=True)
        (args.out / "unseen_profile.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
