"""Measure what a GPU can actually reach: copy bandwidth and matmul rates.

The roofline floor is only useful if it is reachable, so next to the datasheet figures kernelwright
keeps measured ceilings:
- device-to-device copy bandwidth, counted as (bytes read + bytes written) / time, on a buffer far
  larger than L2, median of many copies;
- torch.matmul rates on random 8192^3 inputs in fp32 (TF32 off), TF32, bf16 and fp16.

Usage (on the GPU machine, from the repository root):
    python benchmarks/ceilings.py [--out DIR]        # DIR defaults to $OUT, else the current folder
Writes DIR/ceilings.json, which `hardware.targets.load_ceilings` and `benchmarks/baselines.py
--ceilings` read. Needs only torch (no kernelwright imports; the timer is _common.cuda_event_times).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cuda_event_times  # noqa: E402


def _stats(times: list[float]) -> dict[str, float]:
    q = statistics.quantiles(times, n=10)
    return {"median_ms": statistics.median(times), "p10_ms": q[0], "p90_ms": q[-1], "reps": len(times)}


def measure_copy(torch, gib: float, reps: int) -> dict:
    n = int(gib * 2**30) // 4
    src = torch.randn(n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    times = cuda_event_times(lambda: dst.copy_(src), warmup=10, reps=reps)
    st = _stats(times)
    moved = 2 * src.numel() * src.element_size()  # read src + write dst
    return {
        "buffer_bytes": n * 4,
        "bytes_moved_per_copy": moved,
        "gbs_median": moved / (st["median_ms"] * 1e-3) / 1e9,
        "gbs_best": moved / (min(times) * 1e-3) / 1e9,
        **st,
    }


def measure_matmul(torch, mode: str, n: int, reps: int) -> dict:
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[
        mode
    ]
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    try:
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(n, n, device="cuda", dtype=dtype, generator=gen)
        b = torch.randn(n, n, device="cuda", dtype=dtype, generator=gen)
        c = torch.empty(n, n, device="cuda", dtype=dtype)
        times = cuda_event_times(lambda: torch.matmul(a, b, out=c), warmup=5, reps=reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    st = _stats(times)
    flops = 2.0 * n**3
    return {
        "n": n,
        "flops": flops,
        "tflops_median": flops / (st["median_ms"] * 1e-3) / 1e12,
        "tflops_best": flops / (min(times) * 1e-3) / 1e12,
        **st,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="output folder (default $OUT or .)")
    ap.add_argument("--copy-gib", type=float, default=2.0, help="size of the copied buffer in GiB")
    ap.add_argument("--copy-reps", type=int, default=200)
    ap.add_argument("--mm-n", type=int, default=8192)
    ap.add_argument("--mm-reps", type=int, default=50)
    ap.add_argument("--modes", default="fp32,tf32,bf16,fp16")
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("ceilings.py: no CUDA device; nothing to measure", file=sys.stderr)
        return 2
    props = torch.cuda.get_device_properties(0)
    cap = torch.cuda.get_device_capability(0)
    out: dict = {
        "device": torch.cuda.get_device_name(0),
        "compute_capability": cap[0] * 10 + cap[1],
        "sm_count": props.multi_processor_count,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    copy = measure_copy(torch, args.copy_gib, args.copy_reps)
    torch.cuda.empty_cache()  # buffers of each measurement are freed before the next one
    out["copy"] = copy
    out["copy_bandwidth_gbs"] = round(copy["gbs_median"], 1)
    print(f"copy: {copy['gbs_median']:.0f} GB/s median (read+write), best {copy['gbs_best']:.0f}")
    out["matmul"] = {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        r = measure_matmul(torch, mode, args.mm_n, args.mm_reps)
        torch.cuda.empty_cache()
        out["matmul"][mode] = r
        print(
            f"matmul {mode} {args.mm_n}^3: {r['tflops_median']:.1f} TFLOP/s median, best {r['tflops_best']:.1f}"
        )
    out["matmul_tflops"] = {m: round(r["tflops_median"], 1) for m, r in out["matmul"].items()}
    out["method"] = (
        "CUDA events around each call, median over reps after warm-up; copy = dst.copy_(src) on "
        f"{args.copy_gib} GiB fp32, bandwidth counts read + write; matmul = torch.matmul(out=) on random "
        "normal inputs, 2*n^3 FLOPs; fp32 with allow_tf32=False, tf32 with allow_tf32=True"
    )
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ceilings.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
