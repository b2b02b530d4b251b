"""How fast and how accurate can a strict-fp32 GEMM be on tensor cores? One split-K kernel, several dots.

Why: the K = 524288 matmul (256 x 524288 @ 524288 x 256, fp32) stays at 0.76x cuBLAS with IEEE dots,
and three-TF32 dots (`input_precision="tf32x3"`) were slower still (2.07 ms against 1.30). cuBLAS's
fp32 GEMM already runs near the CUDA cores' peak there, so only tensor cores can beat it, and only with
a product that keeps fp32 accuracy. This script times one Triton kernel (split-K over a 128 x 128 tile
grid; SPLIT_K=1 is a plain tiled GEMM) with these ways of multiplying fp32 tiles:

- `ieee`: `tl.dot(..., input_precision="ieee")` (CUDA cores, exact fp32 products);
- `tf32x3`: Triton's three-TF32 split (hi*hi + hi*lo + lo*hi);
- `bf16x3`: each fp32 tile split in registers into two bf16 parts (x = x0 + x1 + O(2^-17 x)), three bf16
  MMAs (a0 b0 + a0 b1 + a1 b0);
- `bf16x6`: three bf16 parts per operand (O(2^-25 x)), six MMAs (the terms down to 2^-16 each);
- `bf16x3_pre`: B split once into two bf16 planes by a pointwise pass before the GEMM (timed with it),
  A split in registers: B then needs no conversion per tile and its bf16 tiles go straight to shared
  memory, where Hopper's bf16 MMAs read either layout;
- `bf16`, `tf32`: one MMA (not fp32-accurate; the speed a single product of the same loads reaches).

A mode may end in `+pN` ("promote"): the MMAs of N K steps accumulate into a fresh tile, which is then added
to the fp32 accumulator on the CUDA cores. Without it, a long K chained through bf16 MMAs lost up to 1e-4
of the output's RMS on an H200 (K = 524288; the more MMAs per step, the more: bf16x6 was worse than
bf16x3), with it 2e-5 (bf16x3) and 1.3e-6 (bf16x6, below cuBLAS fp32's 7e-6). The writer's PREC=bf16x6
is `bf16x6+p1`. Results: benchmarks/RESULTS.md, results/2026-12-01-h200-fp32-gemm-paths/.

Beside them: cuBLAS fp32 (TF32 off), cuBLAS TF32, and cuBLAS bf16 on bf16 copies (no copy timed).
Accuracy: max |out - ref64| / RMS(ref64) and the share of elements outside strict fp32's table
(|d| <= 1e-5 RMS + 1e-4 |ref|, no reference-error allowance: stricter than the judge).

    python benchmarks/probes/fp32_gemm_paths.py --out result.json [--shapes 256x524288x256,4096x4096x4096]
    TRITON_INTERPRET=1 python benchmarks/probes/fp32_gemm_paths.py --device cpu --shapes 64x256x64 --quick

Under the interpreter bf16 dots give wrong numbers: the CPU run checks that everything runs, not accuracy.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from functools import partial

import torch
import triton
import triton.language as tl
from _common import max_err_over_rms


@triton.jit
def _split_pass(x_ptr, hi_ptr, lo_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    hi = x.to(tl.bfloat16)
    lo = (x - hi.to(tl.float32)).to(tl.bfloat16)
    tl.store(hi_ptr + offs, hi, mask=m)
    tl.store(lo_ptr + offs, lo, mask=m)


@triton.jit
def _step(a_ptrs, b_ptrs, b1_ptrs, acc, k, K, rk, mm, mn, MODE: tl.constexpr, EVEN_K: tl.constexpr):
    """One BLOCK_K step: load the A and B tiles at k and add their product (by MODE) into acc."""
    if EVEN_K:
        a = tl.load(a_ptrs, mask=mm, other=0.0)
        b = tl.load(b_ptrs, mask=mn, other=0.0)
    else:
        ka = (k + rk) < K
        a = tl.load(a_ptrs, mask=mm & ka[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=ka[:, None] & mn, other=0.0)
    if MODE == 0:
        acc = tl.dot(a, b, acc, input_precision="ieee")
    elif MODE == 1:
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
    elif MODE == 2:  # bf16x3, both split in registers
        a0 = a.to(tl.bfloat16)
        a1 = (a - a0.to(tl.float32)).to(tl.bfloat16)
        b0 = b.to(tl.bfloat16)
        b1 = (b - b0.to(tl.float32)).to(tl.bfloat16)
        acc = tl.dot(a1, b0, acc)
        acc = tl.dot(a0, b1, acc)
        acc = tl.dot(a0, b0, acc)
    elif MODE == 3:  # bf16x6
        a0 = a.to(tl.bfloat16)
        ar = a - a0.to(tl.float32)
        a1 = ar.to(tl.bfloat16)
        a2 = (ar - a1.to(tl.float32)).to(tl.bfloat16)
        b0 = b.to(tl.bfloat16)
        br = b - b0.to(tl.float32)
        b1 = br.to(tl.bfloat16)
        b2 = (br - b1.to(tl.float32)).to(tl.bfloat16)
        acc = tl.dot(a2, b0, acc)
        acc = tl.dot(a1, b1, acc)
        acc = tl.dot(a0, b2, acc)
        acc = tl.dot(a1, b0, acc)
        acc = tl.dot(a0, b1, acc)
        acc = tl.dot(a0, b0, acc)
    elif MODE == 4:  # bf16x3 with B pre-split: b is the bf16 high plane, b1_ptrs the low one
        if EVEN_K:
            bl = tl.load(b1_ptrs, mask=mn, other=0.0)
        else:
            bl = tl.load(b1_ptrs, mask=((k + rk) < K)[:, None] & mn, other=0.0)
        a0 = a.to(tl.bfloat16)
        a1 = (a - a0.to(tl.float32)).to(tl.bfloat16)
        acc = tl.dot(a1, b, acc)
        acc = tl.dot(a0, bl, acc)
        acc = tl.dot(a0, b, acc)
    elif MODE == 5:  # one bf16 MMA (not fp32-accurate)
        acc = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16), acc)
    else:  # one TF32 MMA (not fp32-accurate)
        acc = tl.dot(a, b, acc, input_precision="tf32")
    return acc


@triton.jit
def _gemm(a_ptr, b_ptr, b1_ptr, c_ptr, M, N, K, K_PER, sam, sak, sbk, sbn, scs, scm,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
          MODE: tl.constexpr, EVEN_K: tl.constexpr, PROMOTE: tl.constexpr, STEPS: tl.constexpr):  # fmt: skip
    """PROMOTE=1: the tensor cores accumulate STEPS x BK products into a fresh tile, which is then added to
    the fp32 accumulator on the CUDA cores (so long sums are not accumulated inside the MMA units)."""
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    band = GROUP_M * grid_n
    first_m = (pid // band) * GROUP_M
    rows = min(grid_m - first_m, GROUP_M)
    pm = first_m + (pid % band) % rows
    pn = (pid % band) // rows
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    k_lo = pid_k * K_PER
    a_ptrs = a_ptr + rm[:, None] * sam + (k_lo + rk)[None, :] * sak
    b_ptrs = b_ptr + (k_lo + rk)[:, None] * sbk + rn[None, :] * sbn
    b1_ptrs = b1_ptr + (k_lo + rk)[:, None] * sbk + rn[None, :] * sbn
    mm = rm[:, None] < M
    mn = rn[None, :] < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(k_lo, min(k_lo + K_PER, K), BK * STEPS):
        if PROMOTE:
            part = tl.zeros((BM, BN), dtype=tl.float32)
            for s in tl.static_range(STEPS):
                part = _step(a_ptrs, b_ptrs, b1_ptrs, part, k + s * BK, K, rk, mm, mn, MODE, EVEN_K)
                a_ptrs += BK * sak
                b_ptrs += BK * sbk
                b1_ptrs += BK * sbk
            acc += part
        else:
            acc = _step(a_ptrs, b_ptrs, b1_ptrs, acc, k, K, rk, mm, mn, MODE, EVEN_K)
            a_ptrs += BK * sak
            b_ptrs += BK * sbk
            b1_ptrs += BK * sbk
    c_ptrs = c_ptr + pid_k * scs + rm[:, None] * scm + rn[None, :]
    tl.store(c_ptrs, acc, mask=mm & mn)


MODES = {"ieee": 0, "tf32x3": 1, "bf16x3": 2, "bf16x6": 3, "bf16x3_pre": 4, "bf16": 5, "tf32": 6}
"""A mode may end in "+pN": promote the tensor cores' partial tile into the fp32 accumulator every N steps."""


def split_bf16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hi = torch.empty(x.shape, dtype=torch.bfloat16, device=x.device)
    lo = torch.empty_like(hi)
    n = x.numel()
    _split_pass[(triton.cdiv(n, 4096),)](x, hi, lo, n, BLOCK=4096)
    return hi, lo


def padded(x: torch.Tensor, mult: int) -> torch.Tensor:
    """x in a zero-padded buffer whose rows are a multiple of `mult` elements apart (a no-op if they are)."""
    rows, cols = x.shape
    if cols % mult == 0:
        return x
    out = torch.zeros((rows, triton.cdiv(cols, mult) * mult), dtype=x.dtype, device=x.device)
    out[:, :cols] = x
    return out


def gemm(a, b, mode: str, split_k: int, bk: int, warps: int, stages: int, align: bool):
    base, _, prom = mode.partition("+p")
    steps = int(prom) if prom else 1
    M, N = a.shape[0], b.shape[1]
    if align:  # pad K (A's rows, B's row count) and N to whole steps: aligned rows, no K mask
        a = padded(a, bk * steps)
        if b.shape[0] != a.shape[1] or b.shape[1] % 16:
            bp = torch.zeros((a.shape[1], triton.cdiv(N, 16) * 16), dtype=b.dtype, device=b.device)
            bp[: b.shape[0], :N] = b
            b = bp
    K = a.shape[1]
    b1 = b
    if base == "bf16x3_pre":
        b, b1 = split_bf16(b)
    k_per = triton.cdiv(triton.cdiv(K, split_k), bk * steps) * bk * steps
    splits = triton.cdiv(K, k_per)
    out = torch.empty((splits, M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128), splits)
    _gemm[grid](a, b, b1, out, M, N, K, k_per, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                out.stride(0), out.stride(1), BM=128, BN=128, BK=bk, GROUP_M=8, MODE=MODES[base],
                EVEN_K=K % (bk * steps) == 0, PROMOTE=bool(prom), STEPS=steps, num_warps=warps,
                num_stages=stages)  # fmt: skip
    return out[0] if splits == 1 else out.sum(0)


def timed(fn, device: str, quick: bool) -> float:
    if device == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    return float(triton.testing.do_bench(fn, warmup=10 if quick else 25, rep=30 if quick else 100))


def accuracy(out: torch.Tensor, ref64: torch.Tensor, ref32: torch.Tensor) -> dict:
    """Errors against the float64 product; `outside_judge` adds the judge's allowance of 16 x the fp32
    reference's own error (its 99.9th percentile E, or the element's own where larger)."""
    d = (out.double() - ref64).abs()
    rms = ref64.pow(2).mean().sqrt().item()
    bound = 1e-5 * max(1.0, rms) + 1e-4 * ref64.abs()
    e = (ref32.double() - ref64).abs()
    flat = e.flatten()
    big_e = flat.kthvalue(max(1, math.ceil(0.999 * flat.numel()))).values.item()
    judge = bound + 16 * e.clamp(min=big_e)
    return {"max_err_over_rms": max_err_over_rms(out, ref64), "outside_strict": (d > bound).double().mean().item(),
            "outside_judge": (d > judge).double().mean().item()}  # fmt: skip


def measure_shape(spec: str, args: argparse.Namespace) -> list[dict]:
    """Every implementation and config at one M x K x N: a row each (time, TFLOP/s, errors or the error)."""
    dev = args.device
    M, K, N = (int(v) for v in spec.split("x"))
    g = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn((M, K), device=dev, generator=g)
    b = torch.randn((K, N), device=dev, generator=g)
    ref64 = a.double() @ b.double()
    base = {"shape": spec}
    torch.backends.cuda.matmul.allow_tf32 = False
    ref32 = a @ b
    rows = [{**base, "impl": "torch fp32", "ms": timed(partial(torch.matmul, a, b), dev, args.quick),
             **accuracy(ref32, ref64, ref32)}]  # fmt: skip
    if dev == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        ms = timed(partial(torch.matmul, a, b), dev, args.quick)
        rows.append({**base, "impl": "torch tf32", "ms": ms, **accuracy(a @ b, ref64, ref32)})
        torch.backends.cuda.matmul.allow_tf32 = False
        half = partial(torch.matmul, a.bfloat16(), b.bfloat16())
        rows.append({**base, "impl": "torch bf16 (bf16 inputs)", "ms": timed(half, dev, args.quick)})
    tiles = math.ceil(M / 128) * math.ceil(N / 128)
    splits = [1] if tiles >= 132 else [max(1, 264 // tiles), max(1, 132 // tiles)]
    configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    for mode in args.modes.split(","):
        for sk in splits:
            for bk, warps, stages in configs if not args.quick else [(32, 4, 2)]:
                if mode.startswith("bf16x6") and bk == 64:
                    continue  # six split operand pairs of 64-wide steps: not measured
                row = {**base, "impl": mode, "SPLIT_K": sk, "BK": bk, "warps": warps, "stages": stages}
                try:
                    fn = partial(gemm, a, b, mode, sk, bk, warps, stages, args.align)
                    out = fn()
                    row["ms"] = timed(fn, dev, args.quick)
                    if dev == "cuda" or mode in ("ieee", "tf32x3"):  # bf16 dots: wrong in the interpreter
                        row.update(accuracy(out, ref64, ref32))
                except Exception as e:  # a config that does not compile: say so and go on
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                rows.append(row)
    for r in rows:
        if "ms" in r:
            r["tflops"] = 2.0 * M * N * K / r["ms"] / 1e9
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="256x524288x256,4096x4096x4096,8205x5921x2949")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="fewer configs, shorter timing")
    ap.add_argument("--out", default=None)
    ap.add_argument("--align", action="store_true", help="pad operands to whole K steps (timed)")
    ap.add_argument("--configs", default="32x8x3,64x8x3", help="BKxWARPSxSTAGES,...")
    args = ap.parse_args()
    results: dict = {"host": platform.node(), "torch": torch.__version__, "triton": triton.__version__,
                     "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": []}  # fmt: skip
    if args.device == "cuda":
        results["gpu"] = torch.cuda.get_device_name()
    for spec in args.shapes.split(","):
        rows = measure_shape(spec, args)
        for r in rows:
            print(json.dumps(r), flush=True)
        results["rows"] += rows
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
