"""3x3 depthwise planes: taps as element loads, or as words of two columns split in registers.

A standalone probe (not the writer's code) for one question: level2_bf16/24's conv plane is
instruction-bound, and its two shifted column taps are 2-byte loads. Read as 32-bit words (two bf16
columns each), every tap row is three word loads at word offsets -1, 0, +1, and the six columns a pair of
outputs needs are the words' low and high halves (a bf16's bits are the top half of an fp32: a shift or a
mask, no conversion). Both kernels compute y = conv(x, w) (stride 1, padding 1, one program per plane tile,
fp32 accumulators, bf16 output); nothing else of the task.

    python benchmarks/probes/depthwise_words_probe.py --check          # CPU, Triton's interpreter, small odd shapes
    python benchmarks/probes/depthwise_words_probe.py --sass           # CPU, sm_90 SASS counts of both kernels
    python benchmarks/probes/depthwise_words_probe.py [--out DIR]      # GPU: times both and cuDNN at 32x128x112^2
    ... --dtype float32: the same with fp32 columns, two to a 64-bit word (plane_pairs)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if "--check" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch
import triton
import triton.language as tl


@triton.jit
def plane_halves(x_ptr, w_ptr, y_ptr, C, IH, IW, BH: tl.constexpr, BW: tl.constexpr):
    """Taps as element loads (the writer's plane design, reduced to the convolution)."""
    tile, plane = tl.program_id(0), tl.program_id(1)
    tiles_w = tl.cdiv(IW, BW)
    oh = (tile // tiles_w) * BH + tl.arange(0, BH)
    ow = (tile % tiles_w) * BW + tl.arange(0, BW)
    base = plane.to(tl.int64) * IH * IW
    c = plane % C
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for kh in tl.static_range(3):
        ih = oh + (kh - 1)
        row_ok = (ih >= 0) & (ih < IH)
        for kw in tl.static_range(3):
            iw = ow + (kw - 1)
            ok = row_ok[:, None] & ((iw >= 0) & (iw < IW))[None, :]
            x = tl.load(x_ptr + base + ih[:, None] * IW + iw[None, :], mask=ok, other=0.0)
            acc += x.to(tl.float32) * tl.load(w_ptr + c * 9 + kh * 3 + kw).to(tl.float32)
    out_ok = ((oh < IH)[:, None]) & ((ow < IW)[None, :])
    tl.store(y_ptr + base + oh[:, None] * IW + ow[None, :], acc.to(y_ptr.dtype.element_ty), mask=out_ok)


@triton.jit
def _lo(word):
    """The word's first column as fp32: a bf16 in a 32-bit word, or an fp32 in a 64-bit one."""
    if word.dtype == tl.int64:
        col = word.to(tl.int32).to(tl.float32, bitcast=True)
    else:
        col = (word << 16).to(tl.float32, bitcast=True)
    return col


@triton.jit
def _hi(word):
    """The word's second column as fp32."""
    if word.dtype == tl.int64:
        col = (word >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    else:
        col = (word & -65536).to(tl.float32, bitcast=True)
    return col


@triton.jit
def _pair_taps(xw, w_ptr, C, IH, IW, BH: tl.constexpr, BWW: tl.constexpr):
    """Both word kernels' convolution: output columns 2j and 2j+1 (`even`, `odd`) of the program's tile from
    words j-1, j, j+1 of each tap row, `xw` the input as words (IW even). Returns the tile's rows, word
    columns, the plane's offset in words and the two accumulators."""
    tile, plane = tl.program_id(0), tl.program_id(1)
    WW = IW // 2
    tiles_w = tl.cdiv(WW, BWW)
    oh = (tile // tiles_w) * BH + tl.arange(0, BH)
    j = (tile % tiles_w) * BWW + tl.arange(0, BWW)
    base = plane.to(tl.int64) * IH * WW
    c = plane % C
    even = tl.zeros((BH, BWW), dtype=tl.float32)
    odd = tl.zeros((BH, BWW), dtype=tl.float32)
    for kh in tl.static_range(3):
        ih = oh + (kh - 1)
        row_ok = ((ih >= 0) & (ih < IH))[:, None]
        rows = xw + base + ih[:, None] * WW
        left = tl.load(rows + (j - 1)[None, :], mask=row_ok & ((j >= 1) & (j <= WW))[None, :], other=0)
        mid = tl.load(rows + j[None, :], mask=row_ok & (j < WW)[None, :], other=0)
        right = tl.load(rows + (j + 1)[None, :], mask=row_ok & (j + 1 < WW)[None, :], other=0)
        w0 = tl.load(w_ptr + c * 9 + kh * 3).to(tl.float32)
        w1 = tl.load(w_ptr + c * 9 + kh * 3 + 1).to(tl.float32)
        w2 = tl.load(w_ptr + c * 9 + kh * 3 + 2).to(tl.float32)
        m_lo, m_hi = _lo(mid), _hi(mid)
        even += w0 * _hi(left) + w1 * m_lo + w2 * m_hi
        odd += w0 * m_lo + w1 * m_hi + w2 * _lo(right)
    return oh, j, base, even, odd


@triton.jit
def plane_words(x_ptr, w_ptr, y_ptr, C, IH, IW, BH: tl.constexpr, BWW: tl.constexpr):
    """Taps as 32-bit words (IW even, bf16), the output stored as words of two bf16."""
    xw = x_ptr.to(tl.pointer_type(tl.int32))
    oh, j, base, even, odd = _pair_taps(xw, w_ptr, C, IH, IW, BH, BWW)
    lo16 = even.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 65535
    hi16 = odd.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) << 16
    yw = y_ptr.to(tl.pointer_type(tl.int32))
    out_ok = ((oh < IH)[:, None]) & ((j < IW // 2)[None, :])
    tl.store(yw + base + oh[:, None] * (IW // 2) + j[None, :], lo16 | hi16, mask=out_ok)


@triton.jit
def plane_pairs(x_ptr, w_ptr, y_ptr, C, IH, IW, BH: tl.constexpr, BWW: tl.constexpr):
    """fp32 taps as 64-bit words (IW even), the two columns interleaved again for the store."""
    xw = x_ptr.to(tl.pointer_type(tl.int64))
    oh, j, base, even, odd = _pair_taps(xw, w_ptr, C, IH, IW, BH, BWW)
    out = tl.reshape(tl.join(even, odd), (BH, 2 * BWW))
    col = (tl.program_id(0) % tl.cdiv(IW // 2, BWW)) * (2 * BWW) + tl.arange(0, 2 * BWW)
    ok = ((oh < IH)[:, None]) & ((col < IW)[None, :])
    tl.store(y_ptr + tl.program_id(1).to(tl.int64) * IH * IW + oh[:, None] * IW + col[None, :], out, mask=ok)


def run(kind: str, x: torch.Tensor, w: torch.Tensor, bh: int, bw: int, warps: int) -> torch.Tensor:
    n, c, ih, iw = x.shape
    y = torch.empty_like(x)
    if kind == "halves":
        grid = (triton.cdiv(ih, bh) * triton.cdiv(iw, bw), n * c)
        plane_halves[grid](x, w, y, c, ih, iw, BH=bh, BW=bw, num_warps=warps)
    else:  # words: 32-bit words of two bf16, or 64-bit words of two fp32
        assert iw % 2 == 0 and x.dtype in (torch.bfloat16, torch.float32)
        grid = (triton.cdiv(ih, bh) * triton.cdiv(iw // 2, bw // 2), n * c)
        kernel = plane_words if x.dtype == torch.bfloat16 else plane_pairs
        kernel[grid](x, w, y, c, ih, iw, BH=bh, BWW=bw // 2, num_warps=warps)
    return y


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    c = x.shape[1]
    out = torch.nn.functional.conv2d(x.float(), w.float().reshape(c, 1, 3, 3), padding=1, groups=c)
    return out.to(x.dtype)


def check() -> None:
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float32):
        for n, c, ih, iw, bh, bw in ((2, 3, 7, 10, 4, 8), (1, 2, 9, 6, 8, 4), (1, 1, 5, 18, 2, 16)):
            x = torch.randn(n, c, ih, iw).to(dtype)
            w = torch.randn(c, 9).to(dtype)
            ref = reference(x, w)
            for kind in ("halves", "words"):
                got = run(kind, x, w, bh, bw, 1)
                err = (got.float() - ref.float()).abs().max().item()
                print(f"{kind:6s} {dtype} {n}x{c}x{ih}x{iw} tile {bh}x{bw}: max abs error {err:.6f}")
                tol = 0.02 * ref.float().abs().max().item() + 1e-3 if dtype == torch.bfloat16 else 1e-4
                assert err <= tol, (kind, dtype, err)
    print("ok")


def sass(bh: int, bw: int, warps: int, dtype: str) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: sass_counts
    import subprocess
    import tempfile

    from sass_counts import _cuobjdump, by_kind, count_sass

    ptr = "*bf16" if dtype == "bfloat16" else "*fp32"
    sig = {"x_ptr": ptr, "w_ptr": ptr, "y_ptr": ptr, "C": "i32", "IH": "i32", "IW": "i32"}
    for name, fn, consts in (
        ("halves", plane_halves, {"BH": bh, "BW": bw}),
        ("words", plane_words if dtype == "bfloat16" else plane_pairs, {"BH": bh, "BWW": bw // 2}),
    ):
        src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in consts}}, constexprs=consts)
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            ops = count_sass(subprocess.run([_cuobjdump(), "-sass", f.name], capture_output=True, text=True,
                                            check=True).stdout)  # fmt: skip
        per = bh * bw / (32 * warps)
        total = sum(ops.values())
        print(f"{name}: {total} instructions, {total / per:.1f} per output; {by_kind(ops)}")


def time_all(out: Path | None, shape: tuple[int, int, int, int], dtype: str) -> None:
    from triton.testing import do_bench

    torch.manual_seed(0)
    n, c, ih, iw = shape
    x = torch.randn(n, c, ih, iw, device="cuda").to(getattr(torch, dtype))
    w = torch.randn(c, 9, device="cuda").to(getattr(torch, dtype))
    ref = reference(x, w)
    rows = []
    cudnn_w = w.reshape(c, 1, 3, 3)
    ms = do_bench(lambda: torch.nn.functional.conv2d(x, cudnn_w, padding=1, groups=c), warmup=25, rep=200)
    rows.append({"kernel": "cudnn (torch, NCHW)", "ms": ms})
    for kind in ("halves", "words"):
        for bh, bw, warps in ((32, 128, 4), (16, 128, 4), (32, 64, 4), (64, 128, 8), (16, 64, 2)):
            got = run(kind, x, w, bh, bw, warps)
            err = (got.float() - ref.float()).abs().max().item()
            ms = do_bench(lambda kind=kind, bh=bh, bw=bw, warps=warps: run(kind, x, w, bh, bw, warps),
                          warmup=25, rep=200)  # fmt: skip
            rows.append(
                {"kernel": kind, "tile": f"{bh}x{bw}", "num_warps": warps, "ms": ms, "max_abs_error": err}
            )
    gb = 2 * x.numel() * x.element_size() / 1e9
    for r in rows:
        r["GB/s"] = gb / (r["ms"] / 1e3)
        print(json.dumps(r))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        name = "depthwise_words.json" if dtype == "bfloat16" else f"depthwise_words_{dtype}.json"
        (out / name).write_text(json.dumps({"shape": shape, "dtype": dtype, "rows": rows}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--sass", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--shape", default="32,128,112,112")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    args = ap.parse_args()
    if args.check:
        check()
    elif args.sass:
        for bh, bw, warps in ((32, 128, 4), (16, 128, 4), (32, 64, 4)):
            print(f"tile {bh} x {bw} over {warps} warps, {args.dtype}")
            sass(bh, bw, warps, args.dtype)
    else:
        time_all(args.out, tuple(int(v) for v in args.shape.split(",")), args.dtype)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
