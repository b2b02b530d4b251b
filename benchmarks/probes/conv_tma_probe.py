"""A design probe, now the conv writer's X_TMA knob: a 2-D convolution (stride 1) whose input tiles come
through one 4-D tensor descriptor over the channels-last input, the way the half-precision GEMMs read A and B
through Hopper's TMA; one program per tile, or a few per SM walking the tiles (`conv_tma_persistent`, with the
output NCHW or channels-last).

Each program computes a tile of BH x BW output pixels of one sample by BN output channels. For every tap
(kh, kw) and every BK-channel slice the input box [1, BH, BW, BK] is loaded at (n, oh0 + kh*dil - pad,
ow0 + kw*dil - pad, c0): the descriptor zero-fills what lies outside the input, so padding and the image's
edges need no masks, and the box is the A tile of the implicit GEMM ([BH*BW, BK]). The packed weight
[OC, KH*KW*C] is read through a 2-D descriptor. The writer's implicit GEMM gathers A through pointers instead
(level2_bf16/09 on an H200: its kernel 0.53 ms, cuBLAS on the same GEMM sizes 0.35 ms; this probe 0.43 ms one tile
per program, 0.33 ms two programs per SM, 0.28 ms with the output channels-last; cuDNN channels-last 0.23).

    python benchmarks/probes/conv_tma_probe.py [--device cuda|cpu] [--out probe.json]

On CUDA: the bf16 shapes of level2_bf16 09 and 20 (3x3, stride 1, no padding) and a padded variant, a few tile
configs each, checked against F.conv2d and timed with triton.testing.do_bench beside cuDNN (channels-last).
On CPU (Triton's interpreter, TRITON_INTERPRET=1 set by the script): small fp32 shapes, correctness only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

if "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1] == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from _common import max_err_over_rms  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402


@triton.jit
def _tile_corner(pid, OH, OW, BH: tl.constexpr, BW: tl.constexpr):
    # (sample, first output row, first output column) of pixel tile `pid` (tiles of BH rows x BW columns)
    tiles_h = tl.cdiv(OH, BH)
    tiles_w = tl.cdiv(OW, BW)
    n = pid // (tiles_h * tiles_w)
    t = pid - n * tiles_h * tiles_w
    return n, (t // tiles_w) * BH, (t % tiles_w) * BW


@triton.jit
def _store_tile(acc, out_ptr, n, oh0, ow0, oc0, OH, OW, OC, son, soc, soh,
                BH: tl.constexpr, BW: tl.constexpr, BN: tl.constexpr, NHWC_OUT: tl.constexpr):  # fmt: skip
    # the [BH * BW pixels, BN channels] tile at (n, oh0, ow0, oc0): out NCHW, or [N, OH, OW, OC] (NHWC_OUT:
    # channels contiguous, the accumulator's own row order)
    r = tl.arange(0, BH * BW)
    oh = oh0 + r // BW
    ow = ow0 + r % BW
    oc = oc0 + tl.arange(0, BN)
    ok = ((oh < OH) & (ow < OW))[:, None] & (oc < OC)[None, :]
    if NHWC_OUT:
        ptr = out_ptr + n.to(tl.int64) * son + oc[None, :] + ((oh * OW + ow) * OC)[:, None]
    else:
        ptr = out_ptr + n.to(tl.int64) * son + (oc * soc)[None, :] + (oh * soh + ow)[:, None]
    tl.store(ptr, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def conv_tma_kernel(
    x_desc, w_desc, out_ptr, OH, OW, OC, C, KH, KW, PAD, DIL, son, soc, soh,
    BH: tl.constexpr, BW: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):  # fmt: skip
    n, oh0, ow0 = _tile_corner(tl.program_id(0), OH, OW, BH, BW)
    oc0 = tl.program_id(1) * BN
    acc = tl.zeros((BH * BW, BN), dtype=tl.float32)
    for tap in range(0, KH * KW):
        kh = tap // KW
        kw = tap - kh * KW
        for c0 in range(0, C, BK):
            a = x_desc.load([n, oh0 + kh * DIL - PAD, ow0 + kw * DIL - PAD, c0]).reshape(BH * BW, BK)
            b = w_desc.load([oc0, tap * C + c0]).T
            acc = tl.dot(a, b, acc)
    _store_tile(acc, out_ptr, n, oh0, ow0, oc0, OH, OW, OC, son, soc, soh, BH, BW, BN, False)


@triton.jit
def conv_tma_persistent_kernel(
    x_desc, w_desc, out_ptr, OH, OW, OC, C, KH, KW, PAD, DIL, son, soc, soh, n_tiles,
    BH: tl.constexpr, BW: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NHWC_OUT: tl.constexpr,
):  # fmt: skip
    # The same tile as conv_tma_kernel, a grid of a few programs per SM walking the tiles: Triton flattens the
    # tile loop with the K loop into one pipelined loop, so the next tile's loads are in flight during the
    # epilogue (the K loop is only taps x C / BK = 9 steps at level2_bf16/09's sizes).
    tiles_n = tl.cdiv(OC, BN)
    n_cb = tl.cdiv(C, BK)
    for tile in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), flatten=True):
        n, oh0, ow0 = _tile_corner(tile // tiles_n, OH, OW, BH, BW)
        oc0 = (tile % tiles_n) * BN
        acc = tl.zeros((BH * BW, BN), dtype=tl.float32)
        for kk in range(0, KH * KW * n_cb):
            tap = kk // n_cb
            c0 = (kk - tap * n_cb) * BK
            kh = tap // KW
            kw = tap - kh * KW
            a = x_desc.load([n, oh0 + kh * DIL - PAD, ow0 + kw * DIL - PAD, c0]).reshape(BH * BW, BK)
            b = w_desc.load([oc0, tap * C + c0]).T
            acc = tl.dot(a, b, acc)
        _store_tile(acc, out_ptr, n, oh0, ow0, oc0, OH, OW, OC, son, soc, soh, BH, BW, BN, NHWC_OUT)


def conv_tma(x: torch.Tensor, w: torch.Tensor, pad: int, dil: int, bh: int, bw: int, bn: int, bk: int, warps: int,
             stages: int) -> torch.Tensor:  # fmt: skip
    """F.conv2d(x, w, padding=pad, dilation=dil) for stride 1, groups 1, channels a multiple of bk."""
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = h + 2 * pad - dil * (kh - 1), wd + 2 * pad - dil * (kw - 1)
    xn = x.permute(0, 2, 3, 1).contiguous()  # the writer's tiled copy does this at bandwidth
    wp = w.permute(0, 2, 3, 1).reshape(oc, kh * kw * c).contiguous()
    x_desc = TensorDescriptor(xn, [n, h, wd, c], [h * wd * c, wd * c, c, 1], [1, bh, bw, bk])
    w_desc = TensorDescriptor(wp, [oc, kh * kw * c], [kh * kw * c, 1], [bn, bk])
    out = torch.empty((n, oc, oh, ow), device=x.device, dtype=x.dtype)
    grid = (n * triton.cdiv(oh, bh) * triton.cdiv(ow, bw), triton.cdiv(oc, bn))
    conv_tma_kernel[grid](
        x_desc, w_desc, out, oh, ow, oc, c, kh, kw, pad, dil, out.stride(0), out.stride(1), out.stride(2),
        BH=bh, BW=bw, BN=bn, BK=bk, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out


def conv_tma_persistent(x: torch.Tensor, w: torch.Tensor, pad: int, dil: int, bh: int, bw: int, bn: int, bk: int,
                        warps: int, stages: int, per_sm: int, nhwc_out: bool = False) -> torch.Tensor:  # fmt: skip
    """conv_tma with per_sm programs per SM walking the tiles (nhwc_out: the output channels-last)."""
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = h + 2 * pad - dil * (kh - 1), wd + 2 * pad - dil * (kw - 1)
    xn = x.permute(0, 2, 3, 1).contiguous()
    wp = w.permute(0, 2, 3, 1).reshape(oc, kh * kw * c).contiguous()
    x_desc = TensorDescriptor(xn, [n, h, wd, c], [h * wd * c, wd * c, c, 1], [1, bh, bw, bk])
    w_desc = TensorDescriptor(wp, [oc, kh * kw * c], [kh * kw * c, 1], [bn, bk])
    if nhwc_out:
        out = torch.empty((n, oc, oh, ow), device=x.device, dtype=x.dtype, memory_format=torch.channels_last)
    else:
        out = torch.empty((n, oc, oh, ow), device=x.device, dtype=x.dtype)
    n_tiles = n * triton.cdiv(oh, bh) * triton.cdiv(ow, bw) * triton.cdiv(oc, bn)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
    grid = (min(n_tiles, per_sm * sms),)
    conv_tma_persistent_kernel[grid](
        x_desc, w_desc, out, oh, ow, oc, c, kh, kw, pad, dil, out.stride(0), out.stride(1), out.stride(2), n_tiles,
        BH=bh, BW=bw, BN=bn, BK=bk, NHWC_OUT=nhwc_out, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out


def probe_shape(name: str, xs: tuple[int, ...], oc: int, k: int, pad: int, dil: int,
                configs: list[tuple[int, ...]], device: str, dtype: torch.dtype) -> dict:  # fmt: skip
    """One input shape: cuDNN in both layouts (CUDA), then every config checked against F.conv2d and, on
    CUDA, timed on a channels-last input (the kernel and its descriptors, no layout copy)."""
    x = torch.randn(*xs, device=device, dtype=dtype)
    w = torch.randn(oc, xs[1], k, k, device=device, dtype=dtype) * 0.05
    ref = F.conv2d(x, w, padding=pad, dilation=dil)
    row: dict = {"shape": name, "x": list(xs), "oc": oc, "k": k, "pad": pad, "dil": dil, "configs": []}
    xc = x.contiguous(memory_format=torch.channels_last)
    if device == "cuda":
        wc = w.contiguous(memory_format=torch.channels_last)
        row["cudnn_cl_ms"] = triton.testing.do_bench(lambda: F.conv2d(xc, wc, padding=pad, dilation=dil))
        row["cudnn_nchw_ms"] = triton.testing.do_bench(lambda: F.conv2d(x, w, padding=pad, dilation=dil))
    for cfg in configs:
        entry: dict = {"BH,BW,BN,BK,warps,stages[,per_sm,nhwc_out]": list(cfg)}
        conv = conv_tma if len(cfg) == 6 else conv_tma_persistent
        try:
            entry["err"] = max_err_over_rms(conv(x, w, pad, dil, *cfg), ref)
            if device == "cuda":
                entry["ms_input_cl"] = triton.testing.do_bench(lambda c=cfg, f=conv: f(xc, w, pad, dil, *c))
        except Exception as exc:  # a config that fails is a row, not the end of the probe
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        row["configs"].append(entry)
        print(json.dumps({name: entry}), flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.device == "cpu":
        shapes = [("small", (2, 32, 9, 11), 24, 3, 0, 1), ("padded, dilated", (1, 16, 7, 6), 16, 3, 2, 2)]
        configs = [(2, 8, 16, 16, 4, 1), (2, 8, 16, 16, 4, 1, 2, False), (2, 8, 16, 16, 4, 1, 1, True)]
        dtype = torch.float32
    else:
        if torch.cuda.get_device_capability()[0] < 9:
            ap.error("needs an sm_90+ GPU (tensor descriptors)")
        shapes = [
            ("level2_bf16/09", (64, 64, 128, 128), 128, 3, 0, 1),
            ("level2_bf16/20", (32, 64, 96, 96), 128, 3, 0, 1),
            ("09 padded", (64, 64, 128, 128), 128, 3, 1, 1),
        ]
        # one tile per program (6 numbers), then persistent (+ programs per SM, output channels-last)
        configs = [(1, 128, 128, 64, 4, 3), (2, 64, 128, 64, 4, 3),
                   (1, 128, 128, 64, 4, 3, 1, False), (1, 128, 128, 64, 4, 4, 1, False),
                   (1, 128, 128, 64, 4, 3, 2, False), (1, 128, 128, 64, 4, 4, 2, False),
                   (1, 128, 128, 64, 8, 3, 1, False), (1, 128, 128, 64, 8, 4, 2, False),
                   (2, 128, 128, 64, 8, 3, 1, False), (1, 128, 128, 64, 4, 4, 1, True),
                   (1, 128, 128, 64, 4, 3, 2, True), (1, 128, 128, 64, 8, 4, 1, True),
                   (2, 64, 128, 64, 4, 4, 1, False), (1, 128, 128, 32, 4, 6, 1, False)]  # fmt: skip
        dtype = torch.bfloat16
    rows = [probe_shape(*shape, configs, args.device, dtype) for shape in shapes]
    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": args.device, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    bad = [c for r in rows for c in r["configs"] if "error" in c or c.get("err", 1.0) > 1e-2]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
