"""The plane-tile kernels of direct_depthwise with BLOCK_W: one (sample, channel) plane in 2-D tiles, each
tap a row pointer and a compile-time column offset, optionally read as words of two columns (`WORD`).
Functions of a conv_kernels.StageKernelWriter.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kernelwright.providers.offline.emit.emit import Code
from kernelwright.providers.offline.families.conv.conv_mainloop import Coords
from kernelwright.providers.offline.families.conv.conv_stages import Stage

if TYPE_CHECKING:
    from kernelwright.providers.offline.families.conv.conv_kernels import StageKernelWriter


@contextmanager
def plane_rows(k: Code, *, masked: bool) -> Iterator[None]:
    """The (kd, kh) loops of a plane tile's taps: each tap row's depth `id_` and height `ih_` and, where
    `masked`, whether that row lies in the input (`rok`); the body written inside goes in both loops."""
    k("for kd_ in tl.static_range(KD):")
    with k.indent():
        k("id_ = od * STD + (kd_ * DLD - PADD)")
        k("for kh_ in tl.static_range(KH):")
        with k.indent():
            k("ih_ = oh * STH + (kh_ * DLH - PADH)")
            if masked:
                k("rok = q_ok & (id_ >= 0) & (id_ < ID) & (ih_ >= 0) & (ih_ < IH)")
            yield


def plane_taps(k: Code, *, masked: bool) -> None:
    """The taps of a plane tile into `acc`: per (kd, kh) a row pointer, per kw a compile-time column offset
    folded into the load; `masked`: rows and columns outside the input read as zero."""
    with plane_rows(k, masked=masked):
        k("xr = (xp + (id_ * sxd + ih_ * sxh))[:, None] + owx[None, :]")
        k("for kw_ in tl.static_range(KW):")
        with k.indent():
            k("wv = tl.load(w_ptr + ((kd_ * KH + kh_) * KW + kw_) * C + cs).to(tl.float32)")
            if masked:
                k("iw_ = owx + (kw_ * DLW - PADW)")
                k("cok = w_ok & (iw_ >= 0) & (iw_ < IW)")
                k("xv = tl.load(xr + (kw_ * DLW - PADW), mask=rok[:, None] & cok[None, :], other=0.0)")
            else:
                k("xv = tl.load(xr + (kw_ * DLW - PADW))")
            k("acc += xv.to(tl.float32) * wv")


def plane_word_taps(k: Code, *, masked: bool) -> None:
    """The taps of a plane tile read as words of two columns (`WORD`: 32-bit for fp16/bf16 inputs, 64-bit
    for fp32): output columns 2j and 2j + 1 (accumulators `even` and `odd`, [BLOCK_H, BLOCK_W // 2])
    take input columns 2j + e and 2j + 1 + e for each tap's offset e = kw * DLW - PADW, i.e. the low
    or high half of word j + floor(e / 2) or
    j + floor((e + 1) / 2). Each word offset is loaded once per (kd, kh) and feeds every tap that
    reads it; the offsets and halves are compile-time (64 keeps the floor divisions non-negative).
    The host passes WORDS only for an even input width and rows aligned to the word, so a word holding
    an input column lies inside its row; `masked`: words outside the row or the input read as zero."""
    with plane_rows(k, masked=masked):
        k("xr = (xp + (id_ * sxd + ih_ * sxh)).to(tl.pointer_type(WORD))[:, None] + jw[None, :]")
        k("for d_ in tl.static_range((64 - PADW) // 2 - 32, ((KW - 1) * DLW - PADW + 65) // 2 - 31):")
        with k.indent():
            if masked:
                k("jd_ = jw + d_")
                k(
                    "xw = tl.load(xr + d_, mask=rok[:, None] & ((jd_ >= 0) & (jd_ < IW // 2))[None, :], other=0)"
                )
            else:
                k("xw = tl.load(xr + d_)")
            k("if x_ptr.dtype.element_ty == tl.float32:")  # two fp32 in a 64-bit word
            with k.indent():
                k("xlo = xw.to(tl.int32).to(tl.float32, bitcast=True)")
                k("xhi = (xw >> 32).to(tl.int32).to(tl.float32, bitcast=True)")
            k("elif x_ptr.dtype.element_ty == tl.bfloat16:")  # a bf16 is the top half of an fp32
            with k.indent():
                k("xlo = (xw << 16).to(tl.float32, bitcast=True)")
                k("xhi = (xw & -65536).to(tl.float32, bitcast=True)")
            k("else:")
            with k.indent():
                k("xlo = (xw & 65535).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)")
                k("xhi = (xw >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)")
            k("for kw_ in tl.static_range(KW):")
            with k.indent():
                for acc, e in (("even", "kw_ * DLW - PADW + 64"), ("odd", "kw_ * DLW - PADW + 65")):
                    k(f"if ({e}) // 2 - 32 == d_:")
                    with k.indent():
                        k("wv = tl.load(w_ptr + ((kd_ * KH + kh_) * KW + kw_) * C + cs).to(tl.float32)")
                        k(f"if ({e}) % 2 == 0:")
                        with k.indent():
                            k(f"{acc} += xlo * wv")
                        k("else:")
                        with k.indent():
                            k(f"{acc} += xhi * wv")


def plane_conv(w: StageKernelWriter, k: Code, *, words: bool) -> None:
    """The convolution of a plane tile into `acc`: unmasked interior tiles first where INTERIOR is set."""
    if words:
        # the word: two fp32 columns in 64 bits, two fp16/bf16 in 32
        k("WORD: tl.constexpr = tl.int64 if x_ptr.dtype.element_ty == tl.float32 else tl.int32")
        k("jw = tw * (BLOCK_W // 2) + tl.arange(0, BLOCK_W // 2)")
        k("even = tl.zeros((BLOCK_H, BLOCK_W // 2), dtype=tl.float32)")
        k("odd = tl.zeros((BLOCK_H, BLOCK_W // 2), dtype=tl.float32)")
    else:
        k("acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)")
    taps = plane_word_taps if words else plane_taps
    if w.cfg.INTERIOR:
        # every row and column of the tile an output, and every tap's input inside the input: the
        # taps need no masks (once per tile; the rows' depth and height are per-row vectors)
        k("inner = ((th + 1) * BLOCK_H <= SD * SH) & ((tw + 1) * BLOCK_W <= SW)")
        k("inner = inner & (tl.min(od, axis=0) * STD >= PADD) & (tl.min(oh, axis=0) * STH >= PADH)")
        k("inner = inner & (tl.max(od, axis=0) * STD + ((KD - 1) * DLD - PADD) < ID)")
        k("inner = inner & (tl.max(oh, axis=0) * STH + ((KH - 1) * DLH - PADH) < IH)")
        k("inner = inner & (tw * BLOCK_W * STW >= PADW)")
        k("inner = inner & ((tw * BLOCK_W + BLOCK_W - 1) * STW + ((KW - 1) * DLW - PADW) < IW)")
        k("if inner:")
        with k.indent():
            taps(k, masked=False)
        k("else:")
        with k.indent():
            taps(k, masked=True)
    else:
        taps(k, masked=True)
    if words:
        # columns 2j and 2j + 1 side by side again: [BLOCK_H, BLOCK_W // 2, 2] -> [BLOCK_H, BLOCK_W]
        k("acc = tl.reshape(tl.join(even, odd), (BLOCK_H, BLOCK_W))")


def plane_body(w: StageKernelWriter, k: Code, st: Stage) -> None:
    """A [BLOCK_H, BLOCK_W] tile of output rows (depth x height flattened) x columns of one plane.

    Program ids are split once per program; per tap the kernel adds a per-row pointer (once per
    (kd, kh)), a compile-time column offset (folded into the load) and one row & column mask, so
    each output costs a load, a predicate and an FMA per tap; the centre column tap (stride 1) is a
    16-byte vector load."""
    w.epilogue.tile_shape = "(BLOCK_H, BLOCK_W)"
    k("pid = tl.program_id(0)")
    k("cs = tl.program_id(1)")
    k("n = tl.program_id(2)")
    k("TWN = tl.cdiv(SW, BLOCK_W)")
    k("th = pid // TWN")
    k("tw = pid - th * TWN")
    k("q = th * BLOCK_H + tl.arange(0, BLOCK_H)")  # output rows, depth and height flattened
    k("ow = tw * BLOCK_W + tl.arange(0, BLOCK_W)")
    k("q_ok = q < SD * SH")
    k("w_ok = ow < SW")
    # per row, not per pixel; with one output depth (1-D and 2-D convolutions and pools) a row is a height
    # and needs no division: a tile whose stores cannot be vectorised (an odd output width) gets a layout
    # of one column and many rows per thread, where the division was done once per row and thread
    k("if ONE_DEPTH:")
    with k.indent():
        k("od = q * 0")
        k("oh = q")
    k("else:")
    with k.indent():
        k("od = q // SH")
        k("oh = q - od * SH")
    k("n64 = n.to(tl.int64)")
    k("nr64 = n64")
    k("c = cs + tl.arange(0, 1)")  # a one-channel vector: per-channel operands broadcast as [1, 1]
    k("col_ok = c < C")
    k("ok2 = q_ok[:, None] & w_ok[None, :]")
    kinds: dict[int, str] = {}
    coords = Coords("od", "oh", "ow", "ok2", None)
    if st.source == "conv":
        k("xp = x_ptr + n64 * sxn + (cs // OC_G).to(tl.int64) * sxc")
        k("owx = ow * STW")
        if w.cfg.WORDS:
            k("if WORDS:")
            with k.indent():
                plane_conv(w, k, words=True)
            k("else:")
            with k.indent():
                plane_conv(w, k, words=False)
        else:
            plane_conv(w, k, words=False)
        k(f"v{st.src_op} = acc")
        kinds[st.src_op] = "f"
    else:
        k("sp = (od * sin_d + oh * sin_h)[:, None] + (ow * sin_w)[None, :]")
        k("src = tl.load(in_ptr + n64 * sin_n + cs.to(tl.int64) * sin_c + sp, mask=ok2, other=0.0)")
        k("src = src.to(tl.float32)")
        if st.norm is not None and st.norm_at_load:
            k(f"v{st.norm.args[0]} = src")
            kinds[st.norm.args[0]] = "f"
            k("gi = (c // CG)[None, :]")
            k("mu = tl.load(mean_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
            k("rs = tl.load(rstd_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
            k("src = (src - mu) * rs")
        k(f"v{st.src_op} = src")
        kinds[st.src_op] = "f"
    w.epilogue.ops(k, st, st.pre, coords, kinds)
    v = w.epilogue.full_of(st.value, kinds) if kinds[st.value] != "f" else f"v{st.value}"
    if st.value in w.epilogue.bools:
        v = f"{v}.to(tl.float32)"
    if st.sink != "stats_only":
        k(
            "tl.store(out_ptr + n64 * son + cs.to(tl.int64) * soc + (od * sod + oh * soh)[:, None] "
            f"+ (ow * sow)[None, :], {v}.to(out_ptr.dtype.element_ty), mask=ok2)"
        )
    if st.sink in ("stats", "stats_only"):
        # the tile's (count, sum, centred sum of squares): deterministic partials per (n, c, tile)
        k(f"vz = tl.where(ok2, {v}, 0.0)")
        k("cnt = tl.sum(q_ok.to(tl.float32), axis=0) * tl.sum(w_ok.to(tl.float32), axis=0)")
        k("s1 = tl.sum(tl.sum(vz, axis=1), axis=0)")
        k("mu_t = s1 / tl.maximum(cnt, 1.0)")
        k(f"dz = tl.where(ok2, {v} - mu_t, 0.0)")
        k("m2 = tl.sum(tl.sum(dz * dz, axis=1), axis=0)")
        k("pb = part_ptr + ((n64 * TT + pid) * 3) * C + cs")
        k("tl.store(pb, cnt)")
        k("tl.store(pb + C, s1)")
        k("tl.store(pb + 2 * C, m2)")
