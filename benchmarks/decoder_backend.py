"""`torch.compile(model, backend="kernelwright")` on a model no benchmark suite ships: a bf16 decoder block.

    python benchmarks/decoder_backend.py --out DIR [--model FILE] [--memory DIR] [--budget N] [--reps N]

1. Fills memory with the model's region kernels: `kernelwright optimize-model FILE` into DIR/search, in a
   subprocess, timed (skipped with --no-search, e.g. for a memory an earlier run filled).
2. Builds the model (benchmarks/models/decoder_block.py by default: RMSNorm, rotary attention, SwiGLU) with
   one seed and runs it three ways on the same inputs: eager, `torch.compile` (Inductor) and
   `torch.compile(backend="kernelwright")` reading that memory (KERNELWRIGHT_MEMORY). Records which
   regions the backend swapped, where the rest ran (Inductor or eager), what its timed choice kept on a GPU
   (memory's kernels or Inductor on the whole graph; KERNELWRIGHT_BACKEND_CHOICE=swap keeps the kernels
   untimed) and each output's largest error over the eager output's RMS.
3. On a GPU, times the three with CUDA events (median of --reps calls after warm-up) and the speedups of
   the backend over eager and over torch.compile. On the CPU nothing is timed: the Triton interpreter says
   nothing about GPU speed (the run checks that the path works and is correct).

Writes DIR/decoder_backend.json. Results: benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import cuda_event_times, environment, max_err_over_rms

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # a checkout without an install (the GPU machine): kernelwright from here
    sys.path.insert(0, str(ROOT))
DEFAULT_MODEL = ROOT / "benchmarks" / "models" / "decoder_block.py"


def search(model: Path, out: Path, memory: str, budget: int, device: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "kernelwright", "optimize-model", str(model), "--out", str(out / "search"),
           "--memory", memory, "--budget", str(budget), "--device", device]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (out / "search.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    table = out / "search" / "model.json"
    summary = json.loads(table.read_text(encoding="utf-8")) if table.is_file() else None
    return {"cmd": " ".join(cmd), "exit": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1),
            "model": summary}  # fmt: skip


def run_three_ways(model_file: Path, device: str, reps: int) -> dict[str, Any]:
    import torch

    from kernelwright.graphs import backend
    from kernelwright.tasks.module import exec_task_module

    mod = exec_task_module(model_file.read_text(encoding="utf-8"), model_file.stem, filename=str(model_file))
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(device).eval()
    inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in mod.get_inputs()]
    with torch.no_grad():
        eager_out = model(*inputs)
        runs: dict[str, Any] = {"eager": lambda: model(*inputs)}
        inductor = torch.compile(model)
        t0 = time.perf_counter()
        inductor_out = inductor(*inputs)
        compile_s = {"inductor": round(time.perf_counter() - t0, 1)}
        runs["torch.compile"] = lambda: inductor(*inputs)
        torch._dynamo.reset()
        ours = torch.compile(model, backend="kernelwright")
        t0 = time.perf_counter()
        ours_out = ours(*inputs)
        compile_s["kernelwright"] = round(time.perf_counter() - t0, 1)
        runs["kernelwright"] = lambda: ours(*inputs)
        choices = list(backend.last_choices)
        # the swap without the timed choice, as before it (KERNELWRIGHT_BACKEND_CHOICE=swap)
        if device == "cuda":
            os.environ[backend.CHOICE_ENV] = "swap"  # read when the graph is compiled, on the first call

            def untimed(gm: Any, example: Any) -> Any:  # a backend of its own: Dynamo caches per backend
                return backend.kernelwright_backend(gm, example)

            swapped = torch.compile(model, backend=untimed)
            swapped(*inputs)
            del os.environ[backend.CHOICE_ENV]
            runs["kernelwright, swapped untimed"] = lambda: swapped(*inputs)
        result: dict[str, Any] = {
            "compile_s": compile_s,
            "swaps": list(backend.last_swaps),
            "residuals": list(backend.last_residuals),
            "choices": choices,
            "backend_error": list(backend.last_error),
            "err_over_rms": {
                "torch.compile": max_err_over_rms(inductor_out, eager_out),
                "kernelwright": max_err_over_rms(ours_out, eager_out),
            },
        }
        if device == "cuda":
            ms = {
                name: statistics.median(cuda_event_times(fn, warmup=10, reps=reps))
                for name, fn in runs.items()
            }
            result["median_ms"] = ms
            result["speedup_vs_eager"] = ms["eager"] / ms["kernelwright"]
            result["speedup_vs_compile"] = ms["torch.compile"] / ms["kernelwright"]
        else:
            result["timing"] = "not timed: the Triton interpreter on CPU says nothing about GPU speed"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="a KernelBench-format model file")
    parser.add_argument("--memory", default=None, help="memory folder (default: OUT/memory)")
    parser.add_argument("--budget", type=int, default=4, help="evaluations per region signature")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None)
    parser.add_argument("--no-search", action="store_true", help="use the memory as it is")
    args = parser.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not args.model.is_file():
        parser.error(f"--model {args.model}: no such file")
    args.out.mkdir(parents=True, exist_ok=True)
    memory = str(Path(args.memory or args.out / "memory").resolve())
    report: dict[str, Any] = {"model": str(args.model), "device": device, "date": time.strftime("%Y-%m-%d"),
                              **environment(device)}  # fmt: skip
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        # Triton reads it when imported (its own jit functions, tl.sum included, are made then): start again
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "TRITON_INTERPRET": "1"})
    if not args.no_search:
        report["search"] = search(args.model, args.out, memory, args.budget, device)
        print(f"search: exit {report['search']['exit']} in {report['search']['wall_s']} s", flush=True)
    os.environ["KERNELWRIGHT_MEMORY"] = memory
    report["compiled"] = run_three_ways(args.model, device, args.reps)
    (args.out / "decoder_backend.json").write_text(
        json.dumps(report, indent=2, default=str), encoding="utf-8"
    )
    compiled = report["compiled"]
    print(f"swapped regions: {len(compiled['swaps'])}; errors over RMS: {compiled['err_over_rms']}")
    if "median_ms" in compiled:
        print(f"median ms: {compiled['median_ms']}; kernelwright vs eager {compiled['speedup_vs_eager']:.2f}x, "
              f"vs torch.compile {compiled['speedup_vs_compile']:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
