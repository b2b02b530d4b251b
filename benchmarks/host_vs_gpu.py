"""Host work against GPU work per forward: is a program's judged time the GPU's or the host's?

The judge times a forward with CUDA events around each call and one synchronize at the end, so the host runs
ahead of the GPU only as far as its own launch work lets it: when a forward's Python (shapes, descriptors,
allocations, one Triton launch per kernel) takes longer than its kernels, the events measure the host. For
each task this times the writer's root program, eager PyTorch and (with --compile) torch.compile three ways:

- judged: as the judge does (L2 flushed before each call, events around it, one synchronize at the end);
- gpu: the same calls queued behind a long `torch.cuda._sleep`, so the host is far ahead and each event pair
  holds only the GPU's work;
- host: the wall time per call of queueing those calls, less the same loop around a no-op (flush and events).

`--profile` adds cProfile's view of the candidate's host work; `--launch-hooks` first routes every Triton launch
in this process (torch.compile's too) through the judge's evidence hooks, as a candidate process's launches are.

    python benchmarks/host_vs_gpu.py --tasks level2_bf16/20,level2_bf16/24 --compile --out host.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _common import (
    cuda_event_times,
    cuda_models,
    environment,
    load_program,
    max_err_over_rms,
    measure_task,
    root_program,
    task_path,
)

_SLEEP_CYCLES = 600_000_000  # ~0.3 s at the H200's clock: longer than any host loop below


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _queued(fn: Callable[[], Any], flush: torch.Tensor, reps: int) -> tuple[list[float], float, bool]:
    """GPU-only event times of `reps` calls queued behind a sleep, the host's wall time per call to queue
    them, and whether the sleep outlasted the loop (if not, the GPU caught up and the times are not GPU-only)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(_SLEEP_CYCLES)
    gate = torch.cuda.Event()
    gate.record()
    pairs = []
    t0 = time.perf_counter()
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    host_s = time.perf_counter() - t0
    ahead = not gate.query()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs], host_s * 1e3 / reps, ahead


def _profile(fn: Callable[[], Any], flush: torch.Tensor, reps: int, noop_host_ms: float) -> dict[str, Any]:
    judged = cuda_event_times(fn, warmup=5, reps=reps, flush=flush, sync_each=False)
    gpu, host, ahead = _queued(fn, flush, reps)
    return {
        "judged_ms": statistics.median(judged), "judged_p20_ms": _pct(judged, 0.2),
        "judged_p80_ms": _pct(judged, 0.8), "gpu_ms": statistics.median(gpu),
        "host_ms": host - noop_host_ms, "host_ahead": ahead,
    }  # fmt: skip


def _host_profile(fn: Callable[[], Any], calls: int = 200, top: int = 30) -> list[str]:
    """The functions the host spends `calls` forwards in, by own time (cProfile; a synchronize every 10 calls
    keeps the launch queue short, outside the profile's view of the forward)."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    for i in range(calls):
        prof.enable()
        fn()
        prof.disable()
        if i % 10 == 9:
            torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue().splitlines()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True, help="comma-separated SUITE/NN specs")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile (default mode)")
    ap.add_argument(
        "--profile", action="store_true", help="also profile the candidate's host work (cProfile)"
    )
    ap.add_argument(
        "--after-profiler", type=int, nargs="?", const=2, default=0, metavar="N",
        help="run N torch.profiler sessions (CUDA activity; default 2) in this process first, as a judge's "
        "candidate process does (its warm-up, then the kernel cross-check) before it is timed; their seconds "
        "are in the output with TEARDOWN_CUPTI / DISABLE_CUPTI_LAZY_REINIT as set",
    )  # fmt: skip
    ap.add_argument(
        "--launch-hooks", action="store_true",
        help="route Triton launches through the judge's evidence hooks first (a recorder that is not recording), "
        "as every launch in a candidate process is",
    )  # fmt: skip
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.launch_hooks:
        from kernelwright.hardware.judge.evidence import Recorder, install_launch_hooks

        install_launch_hooks(Recorder(sync=torch.cuda.synchronize))
    from kernelwright.hardware.targets import get_target
    from kernelwright.tasks import exec_task_module, load_task

    target = get_target("nvidia-h200")
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    folder = Path(tempfile.mkdtemp(prefix="kw-host-"))
    sessions_s = []
    # as a candidate process does: its warm-up session, then the kernel cross-check's
    for _ in range(args.after_profiler):
        from torch.profiler import ProfilerActivity, profile

        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]):
            flush.zero_()
            torch.cuda.synchronize()
        sessions_s.append(time.perf_counter() - t0)
    _queued(lambda: None, flush, args.reps)  # the first queue loads the flush's kernel: the host waits there
    _, noop_host, _ = _queued(lambda: None, flush, args.reps)
    out: dict[str, Any] = {
        "env": environment("cuda"), "noop_host_ms": noop_host, "tasks": [], "profiler_sessions_s": sessions_s,
        "cupti_env": {k: os.environ.get(k) for k in ("TEARDOWN_CUPTI", "DISABLE_CUPTI_LAZY_REINIT")},
        "launch_hooks": args.launch_hooks,
    }  # fmt: skip

    def run(spec: str) -> dict[str, Any]:
        path = task_path(spec)
        answer = root_program(load_task(path), target)
        program = load_program(answer.code, folder / f"p_{path.stem}.py")
        mod = exec_task_module(path.read_text(), "task_" + path.stem, filename=str(path))
        ref, new, inputs = cuda_models(mod, program, seed=0)
        entry: dict[str, Any] = {"task": spec, "design": answer.code.splitlines()[0]}
        with torch.no_grad():
            entry["max_err_over_rms"] = max_err_over_rms(new(*inputs).float(), ref(*inputs).float())
        impls = {"candidate": new, "eager": ref}
        if args.compile:
            impls["compile"] = torch.compile(ref)
        with torch.no_grad():
            for name, m in impls.items():
                entry[name] = _profile(lambda m=m: m(*inputs), flush, args.reps, noop_host)
                print(spec, name, json.dumps(entry[name]), flush=True)
        if args.profile:
            with torch.no_grad():
                entry["candidate"]["profile"] = _host_profile(lambda: new(*inputs))
        return entry

    for spec in args.tasks.split(","):
        out["tasks"].append(measure_task(spec, lambda spec=spec: run(spec)))
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
