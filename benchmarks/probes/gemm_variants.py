"""Half-precision GEMM + epilogue kernels side by side: where the writer's matmul loses to cuBLAS, and what helps.

The bf16 suites showed the writer's GEMM at cuBLAS speed when B is stored N-major (`A @ B`) and ~25% slower
when B is an `nn.Linear` weight (stored [N, K], read K-major). This script times, for one task shape
(x @ W^T + bias, ReLU, bf16 out) and the N-major control, the variants that could close that gap:

- `ptr`: the writer's kernel today (pointer tiles [BK, BN] of B, K loop masked);
- `ptr_even`: the same without the K mask when BLOCK_K divides K;
- `ptr_bt`: B's tile loaded as [BN, BK] (its own memory order) and transposed for the dot;
- `tma`: tensor descriptors (Hopper TMA loads, built on the host), one program per tile;
- `tma_persist`: the same, one program per SM walking the tiles.

Each is checked against torch (fp32 accumulation of the same bf16 inputs) and timed with
triton.testing.do_bench; cuBLAS (`F.linear` / `torch.matmul`, then the epilogue eagerly) is timed beside.
On a CPU the kernels run under the interpreter at a small shape, correctness only (fp16 there: the
interpreter's bf16 dot is wrong).

    python benchmarks/probes/gemm_variants.py --out DIR            # GPU
    TRITON_INTERPRET=1 python benchmarks/probes/gemm_variants.py --small
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # older Triton
    TensorDescriptor = None


@triton.jit
def _tile_of(t, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    width = GROUP_M * num_n
    first_m = (t // width) * GROUP_M
    gsize = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (t % width) % gsize, (t % width) // gsize


@triton.jit
def _epilogue(acc, bias_ptr, c_ptr, rm, rn, M, N, scm, scn):
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
    v = acc.to(c_ptr.dtype.element_ty).to(tl.float32) + bias[None, :]
    v = tl.maximum(v.to(c_ptr.dtype.element_ty).to(tl.float32), 0.0)
    tl.store(
        c_ptr + rm[:, None] * scm + rn[None, :] * scn,
        v.to(c_ptr.dtype.element_ty),
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


@triton.jit
def gemm_ptr(
    a_ptr,
    b_ptr,
    bias_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
    B_T: tl.constexpr,
):
    pid_m, pid_n = _tile_of(tl.program_id(0), M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rmw = tl.max_contiguous(tl.multiple_of(rm % M, BM), BM)
    rnw = tl.max_contiguous(tl.multiple_of(rn % N, BN), BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rmw[:, None] * sam + rk[None, :] * sak
    if B_T:
        b_ptrs = b_ptr + rnw[:, None] * sbn + rk[None, :] * sbk  # [BN, BK]
    else:
        b_ptrs = b_ptr + rk[:, None] * sbk + rnw[None, :] * sbn  # [BK, BN]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            kmask = (k0 + rk) < K
            a = tl.load(a_ptrs, mask=kmask[None, :], other=0.0)
            if B_T:
                b = tl.load(b_ptrs, mask=kmask[None, :], other=0.0)
            else:
                b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)
        if B_T:
            acc = tl.dot(a, tl.trans(b), acc)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    _epilogue(acc, bias_ptr, c_ptr, rm, rn, M, N, scm, scn)


@triton.jit
def gemm_tma(
    a_desc,
    b_desc,
    bias_ptr,
    c_ptr,
    M,
    N,
    K,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    B_T: tl.constexpr,
    PERSIST: tl.constexpr,
    NUM_PROGS: tl.constexpr,
):
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    start = tl.program_id(0)
    step = NUM_PROGS if PERSIST else num_tiles
    for t in range(start, num_tiles, step):
        pid_m, pid_n = _tile_of(t, M, N, BM, BN, GROUP_M)
        om = pid_m * BM
        on = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            a = a_desc.load([om, k0])
            if B_T:
                acc = tl.dot(a, b_desc.load([on, k0]).T, acc)
            else:
                acc = tl.dot(a, b_desc.load([k0, on]), acc)
        rm = om + tl.arange(0, BM)
        rn = on + tl.arange(0, BN)
        _epilogue(acc, bias_ptr, c_ptr, rm, rn, M, N, scm, scn)


CONFIGS = [  # BM, BN, BK, warps, stages
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 4, 4),
    (128, 128, 64, 8, 4),
]


def run_variant(name, a, w, bias, b_kmajor, cfg, num_sms):
    """Launches variant `name`; returns a callable that runs it once and the output tensor."""
    M, K = a.shape
    N = w.shape[0] if b_kmajor else w.shape[1]
    BM, BN, BK, warps, stages = cfg
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    # element strides of B as a [K, N] matrix
    sbk, sbn = (w.stride(1), w.stride(0)) if b_kmajor else (w.stride(0), w.stride(1))
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    if name.startswith("ptr"):
        even = name != "ptr" and K % BK == 0
        bt = name == "ptr_bt"

        def go():
            gemm_ptr[(tiles,)](
                a,
                w,
                bias,
                c,
                M,
                N,
                K,
                a.stride(0),
                a.stride(1),
                sbk,
                sbn,
                c.stride(0),
                c.stride(1),
                BM=BM,
                BN=BN,
                BK=BK,
                GROUP_M=8,
                EVEN_K=even,
                B_T=bt,
                num_warps=warps,
                num_stages=stages,
            )
    else:
        a_desc = TensorDescriptor.from_tensor(a, [BM, BK])
        b_desc = TensorDescriptor.from_tensor(w, [BN, BK] if b_kmajor else [BK, BN])
        persist = name == "tma_persist"
        grid = min(num_sms, tiles) if persist else tiles

        def go():
            gemm_tma[(grid,)](
                a_desc,
                b_desc,
                bias,
                c,
                M,
                N,
                K,
                c.stride(0),
                c.stride(1),
                BM=BM,
                BN=BN,
                BK=BK,
                GROUP_M=8,
                B_T=b_kmajor,
                PERSIST=persist,
                NUM_PROGS=grid,
                num_warps=warps,
                num_stages=stages,
            )

    go()
    return go, c


def torch_baselines(a, w, bias, b_kmajor):
    """(label, callable): cuBLAS's GEMM alone, and the task as eager PyTorch runs it."""
    wt = w.t() if b_kmajor else w

    def eager():
        return torch.relu(F.linear(a, w, bias) if b_kmajor else a @ w + bias)

    return [("cublas_gemm", lambda: a @ wt), ("eager", eager)]


def reference(a, w, bias, b_kmajor):
    wt = w.t() if b_kmajor else w
    y = (a.float() @ wt.float()).to(a.dtype).float() + bias.float()
    return torch.relu(y.to(a.dtype).float()).to(a.dtype)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--small", action="store_true", help="one small odd shape, correctness only (CPU)")
    args = p.parse_args()
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float16
    if args.small or not cuda:
        shapes = [("linear", 100, 72, 136, True), ("matmul", 100, 72, 136, False)]
        configs = [(32, 32, 32, 4, 2)]
    else:
        shapes = [
            ("linear", 8192, 4096, 4096, True),
            ("matmul", 8192, 4096, 4096, False),
            ("linear", 8192, 11008, 4096, True),
        ]
        configs = CONFIGS
    if cuda:
        triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count if cuda else 4
    rows = []
    out = args.out
    if out:
        out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for kind, M, N, K, kmajor in shapes:
        a = torch.randn(M, K, device=dev).to(dtype)
        w = (torch.randn(N, K, device=dev) if kmajor else torch.randn(K, N, device=dev)).to(dtype) / K**0.5
        bias = (torch.randn(N, device=dev) * 0.1).to(dtype)
        ref = reference(a, w, bias, kmajor)
        flops = 2 * M * N * K
        if cuda:
            for label, fn in torch_baselines(a, w, bias, kmajor):
                ms = triton.testing.do_bench(fn, warmup=25, rep=100)
                rows.append(
                    {"shape": [kind, M, N, K], "variant": label, "ms": ms, "tflops": flops / ms / 1e9}
                )
                print(
                    f"{kind} {M}x{N}x{K} {label:12s} {ms:.4f} ms {flops / ms / 1e9:.0f} TFLOP/s", flush=True
                )
        for name in ("ptr", "ptr_even", "ptr_bt", "tma", "tma_persist"):
            if name.startswith("tma") and TensorDescriptor is None:
                continue
            for cfg in configs:
                if name == "ptr_even" and K % cfg[2]:
                    continue
                row = {"shape": [kind, M, N, K], "variant": name, "config": cfg}
                t0 = time.perf_counter()
                try:
                    go, c = run_variant(name, a, w, bias, kmajor, cfg, num_sms)
                    err = (c.float() - ref.float()).abs().max().item()
                    row["max_abs_err"] = err
                    row["ok"] = err <= 0.05 * max(1.0, ref.float().abs().max().item())
                    if cuda:
                        ms = triton.testing.do_bench(go, warmup=25, rep=100)
                        row["ms"] = ms
                        row["tflops"] = flops / ms / 1e9
                except Exception as e:  # a variant that does not compile is a result too
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                row["s"] = round(time.perf_counter() - t0, 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if out:
                    (out / "gemm_variants.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = [r for r in rows if r.get("ok") is False or "error" in r]
    print(f"{len(rows)} rows, {len(bad)} wrong or failed", flush=True)
    return 1 if bad and not cuda else 0


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        sys.exit("no GPU: run with TRITON_INTERPRET=1 (Triton's interpreter)")
    sys.exit(main())
