"""Small fp32 products that leave most SMs idle at the writer's default tile, timed at several tiles and splits.

    python benchmarks/probes/underfilled_gemms.py --out DIR [--reps N] [--cases vit_qkv rnn_i2h]

Level 3's kernel-bound losers on an H100 (2026-12-06, thirty-fifth session) spend their time in products far
smaller than the GPU: 28_VisionTransformer's Linear layers (394 rows, K = 512 or 2048: 16-64 tiles of 128 x 128
for 132 SMs) took 3.15 ms of kernels against eager's 1.34, 34_VanillaRNNHidden's (8 rows: one or two programs)
23-29 us each against cuBLAS's 3-7. Each case here is a Linear (and the activation after it in the model) at
the model's sizes; each variant is the offline writer's program for it as one design and config. Times are GPU
time: the forward captured in a CUDA graph, replays timed with CUDA events, L2 flushed before each (outside the
events), the median of --reps; eager (cuBLAS) the same way. Each variant's output is checked against the
task's Model (largest error over the reference's RMS). One JSON file: DIR/underfilled_gemms.json.
"written" is the writer's root as this checkout writes it: IEEE dots in 128 x 128 tiles (or split-K) when the
first results were taken (RESULTS.md, thirty-sixth session), tf32x3 in 64 x 64 tiles since (SMALL_KMAJOR_TILE).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from _common import cuda_event_times, cuda_models, environment, load_program, max_err_over_rms

ROOT = Path(__file__).resolve().parents[2]

LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({k}, {n})

    def forward(self, x):
        return {act}(self.fc(x))


def get_inputs():
    return [torch.rand({m}, {k})]


def get_init_inputs():
    return []
"""
# (name, M, K, N, activation)
CASES = [
    ("vit_qkv", 394, 512, 1536, ""),
    ("vit_out", 394, 512, 512, ""),
    ("vit_mlp1", 394, 512, 2048, "torch.relu"),
    ("vit_mlp2", 394, 2048, 512, ""),
    ("rnn_i2h", 8, 1280, 256, "torch.tanh"),
    ("rnn_h2o", 8, 256, 128, ""),
    ("fc_m10", 10, 9216, 4096, "torch.relu"),
]
SMALL_X3 = {"PREC": "tf32x3", "KMAJOR": 1, "BLOCK_K": 32, "num_warps": 4}
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "written": ("", {}),
    "grouped 64x64 w4": ("grouped", {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4}),
    "grouped 32x64 w4": ("grouped", {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4}),
    "grouped 64x32 w4": ("grouped", {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4}),
    "grouped 32x32 w4": ("grouped", {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 4}),
    "grouped 128x128 tf32x3": ("grouped", {"PREC": "tf32x3", "KMAJOR": 1, "BLOCK_K": 32}),
    "grouped 64x64 w4 tf32x3": (
        "grouped",
        {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "PREC": "tf32x3", "KMAJOR": 1, "BLOCK_K": 32},
    ),
    "grouped 32x64 w4 tf32x3": ("grouped", {**SMALL_X3, "BLOCK_M": 32, "BLOCK_N": 64}),
    "grouped 64x32 w4 tf32x3": ("grouped", {**SMALL_X3, "BLOCK_M": 64, "BLOCK_N": 32}),
    "split_k 16x32 s8 tf32x3": ("split_k", {**SMALL_X3, "BLOCK_M": 16, "BLOCK_N": 32, "SPLIT_K": 8}),
    "split_k default": ("split_k", {}),
    "split_k 64x64 s4": ("split_k", {"BLOCK_M": 64, "BLOCK_N": 64, "SPLIT_K": 4}),
    "split_k 32x64 s8": ("split_k", {"BLOCK_M": 32, "BLOCK_N": 64, "SPLIT_K": 8}),
    "split_k 32x32 s8": ("split_k", {"BLOCK_M": 32, "BLOCK_N": 32, "SPLIT_K": 8}),
    "split_k 16x32 s16": ("split_k", {"BLOCK_M": 16, "BLOCK_N": 32, "SPLIT_K": 16}),
}


def gpu_ms(fn: Any, reps: int, flush: Any) -> tuple[float, str]:
    """The median GPU time of fn() in ms: replays of a CUDA graph of it (eagerly timed calls where the capture
    fails), L2 flushed before each."""
    import torch

    fn()
    torch.cuda.synchronize()
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run, how = graph.replay, "graph"
    except Exception:
        torch.cuda.synchronize()
        run, how = fn, "eager calls"
    times = cuda_event_times(run, warmup=3, reps=reps, flush=flush, sync_each=False)
    return statistics.median(times), how


def run_case(case: tuple[str, int, int, int, str], out: Path, reps: int, flush: Any) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from fakes.writer import writer_prompt

    from kernelwright.providers.offline.choice.variants import program_variant
    from kernelwright.providers.offline.writer import write_program
    from kernelwright.tasks.module import exec_task_module

    name, m, k, n, act = case
    source = LINEAR.format(m=m, k=k, n=n, act=act)
    mod = exec_task_module(source, f"gemm_{name}")
    entry: dict[str, Any] = {"case": name, "M": m, "K": k, "N": n, "activation": act, "variants": {}}
    torch.manual_seed(0)
    ref = mod.Model().cuda()
    inputs = [t.cuda() for t in mod.get_inputs()]
    with torch.no_grad():
        entry["eager_ms"], _ = gpu_ms(lambda: ref(*inputs), reps, flush)
    for label, (design, config) in VARIANTS.items():
        try:
            variant = (
                program_variant(source, "t", design, config)
                if design
                else write_program(writer_prompt(source))
            )
            prog = load_program(variant.code, out / f"{name}_{len(entry['variants'])}.py")
            ref, new, inputs = cuda_models(mod, prog, seed=0)
            with torch.no_grad():
                err = max_err_over_rms(new(*inputs), ref(*inputs))
                ms, how = gpu_ms(lambda: new(*inputs), reps, flush)  # noqa: B023 (called at once)
            entry["variants"][label] = {
                "ms": ms,
                "vs_eager": entry["eager_ms"] / ms,
                "err_over_rms": err,
                "timed": how,
                "header": variant.code.splitlines()[0][:300],
            }
        except Exception as exc:
            entry["variants"][label] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        torch.cuda.empty_cache()
    return entry


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--cases", nargs="*", help="only these cases (default: every case)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    results: dict[str, Any] = {"environment": environment("cuda"), "cases": []}
    for case in CASES:
        if args.cases and case[0] not in args.cases:
            continue
        entry = run_case(case, args.out, args.reps, flush)
        results["cases"].append(entry)
        best = min((v["ms"], k) for k, v in entry["variants"].items() if "ms" in v)
        print(f"{case[0]}: eager {entry['eager_ms']:.4f} ms, best {best[1]} {best[0]:.4f} ms", flush=True)
        (args.out / "underfilled_gemms.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
