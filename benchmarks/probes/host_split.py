"""Where a written program's host time per call goes, launcher by launcher, at its traced size and at others.

    python benchmarks/probes/host_split.py --out DIR CASE [CASE ...]

CASE: `TASK_FILE` or `TASK_FILE:NAME=V,NAME=V` (a task file, and the sizes of one unseen configuration).
unseen_profile.py (forty-fifth session) found the writer's programs spending 0.07-0.33 ms of host time per call
against eager's 0.03-0.21, more at the smaller, odd sizes than at the traced ones, without saying where. For
each case this writes the offline writer's first program (as unseen_profile.py does) and, at each size, with a
long GPU sleep queued first so that no call waits on the GPU, times per call (median of rounds):

- eager's forward and the program's forward;
- the program's forward with its launches stubbed (`_kw_launch` returns at once): its own Python, allocations
  and torch calls (copies) without Triton's launch;
- the program's forward with the kernels launched but every launcher's time summed apart (which launcher costs
  what), and how many launches went through Triton's JIT (`JITFunction.run`) rather than the direct path;
- the forward under cProfile (the 30 functions with the most own time), for reading.

One JSON file: DIR/host_split.json (and each program beside it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import cuda_models, environment, load_program

ROOT = Path(__file__).resolve().parents[2]


def _host_us(fn: Any, calls: int, rounds: int = 5) -> float:
    """Microseconds of host time per call: `calls` calls behind a queued GPU sleep, median of `rounds`."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        torch.cuda._sleep(int(5e8))
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) * 1e6 / calls)
        torch.cuda.synchronize()
    return statistics.median(times)


def _profile(fn: Any, calls: int) -> str:
    import torch

    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    torch.cuda._sleep(int(5e8))
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
    return text.getvalue()


def _split(program: Any, fn: Any, calls: int) -> dict[str, Any]:
    """The program's host time with launches stubbed, and per launcher with them run."""
    import torch
    from triton.runtime.jit import JITFunction

    out: dict[str, Any] = {}
    launch = program._kw_launch
    program._kw_launch = lambda *a, **k: None
    try:
        out["stubbed_launches_us"] = _host_us(fn, calls)
    finally:
        program._kw_launch = launch
    names = [n for n in vars(program) if n.startswith("_launch_") and callable(getattr(program, n))]
    spent = dict.fromkeys(names, 0.0)
    originals = {n: getattr(program, n) for n in names}

    def timed(name: str, f: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0

        return call

    jit_runs = [0]
    run = JITFunction.run

    def counted(self: Any, *a: Any, **k: Any) -> Any:
        jit_runs[0] += 1
        return run(self, *a, **k)

    for n in names:
        setattr(program, n, timed(n, originals[n]))
    JITFunction.run = counted  # type: ignore[method-assign]
    try:
        fn()
        torch.cuda.synchronize()
        for n in names:
            spent[n] = 0.0
        jit_runs[0] = 0
        torch.cuda._sleep(int(5e8))
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        total = (time.perf_counter() - t0) * 1e6 / calls
        torch.cuda.synchronize()
    finally:
        JITFunction.run = run  # type: ignore[method-assign]
        for n in names:
            setattr(program, n, originals[n])
    out["timed_total_us"] = total
    out["launchers_us"] = {n: s * 1e6 / calls for n, s in spent.items()}
    out["jit_runs_per_call"] = jit_runs[0] / calls
    out["direct_cache"] = len(getattr(program, "_KW_COMPILED", {}))
    return out


def run_case(case: str, out: Path, calls: int) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from fakes.writer import writer_prompt

    from kernelwright.providers.offline.writer import write_program
    from kernelwright.tasks.module import exec_task_module
    from kernelwright.tasks.resize import with_sizes

    path, _, spec = case.partition(":")
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in spec.split(",") if kv)}
    source = Path(path).read_text(encoding="utf-8")
    code = write_program(writer_prompt(source)).code
    program = load_program(code, out / f"h_{Path(path).stem}.py")
    entry: dict[str, Any] = {"task": path, "sizes": sizes, "header": code.splitlines()[0], "at": {}}
    labels = [("traced", source)] + ([("unseen", with_sizes(source, sizes))] if sizes else [])
    for label, src in labels:
        try:
            mod = exec_task_module(src, f"task_{label}")
            ref, new, inputs = cuda_models(mod, program, seed=0)
            with torch.no_grad():
                run_ref = lambda m=ref, x=inputs: m(*x)  # noqa: E731
                run_new = lambda m=new, x=inputs: m(*x)  # noqa: E731
                at = {
                    "input_shapes": [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)],
                    "eager_us": _host_us(run_ref, calls),
                    "program_us": _host_us(run_new, calls),
                }
                at.update(_split(program, run_new, calls))
                at["profile"] = _profile(run_new, calls)
            entry["at"][label] = at
        except Exception as exc:
            entry["at"][label] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        torch.cuda.empty_cache()
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="TASK_FILE[:NAME=V,NAME=V]")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"environment": environment("cuda"), "cases": []}
    for case in args.cases:
        entry = run_case(case, args.out, args.calls)
        results["cases"].append(entry)
        for label, at in entry["at"].items():
            brief = {k: v for k, v in at.items() if k not in ("profile", "input_shapes")}
            print(entry["task"], label, json.dumps(brief), flush=True)
        (args.out / "host_split.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
