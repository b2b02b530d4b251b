"""The convolution's main loop inside a stage kernel: one tile of output pixels x output channels.

The three designs (conv_stages.DESIGNS) each have their loop: implicit_gemm walks (kernel tap,
input-channel block) and, for a transposed convolution, only the taps of the tile's output phase;
implicit_gemm_flatk walks K = (input channel, tap) flattened; direct_depthwise does fp32 FMAs over the
taps (unrolled at compile time for a forward convolution); direct, for short reductions, one outer
product of input values and weights per (input channel, tap). The weights are packed by the
launcher (conv_host) in the K order each loop reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelwright.providers.offline.emit.emit import Code
from kernelwright.providers.offline.families.conv.conv_stages import StagedPlan


@dataclass
class Coords:
    """Names of the coordinate vectors where a value is computed."""

    d: str
    h: str
    w: str
    ok: str
    flat: str | None  # flat contiguous spatial index, when it equals d*H*W + h*W + w of the buffer


class MainLoopWriter:
    """Writes the convolution of one tile into `acc` ([BLOCK_M pixels, BLOCK_N channels], fp32)."""

    def __init__(self, sp: StagedPlan) -> None:
        self.sp = sp
        self.spec = sp.spec
        self.cfg = sp.cfg
        self.design = sp.design
        self._box = False

    def write(
        self, k: Code, co: Coords, *, phase: bool, pooled: bool, per_sample: bool, box: bool = False
    ) -> None:
        """The design's K loop for the pixels at `co` (per_sample: the tile's rows lie in one sample; box:
        they are a box of output rows with corner (bd, bh, bw), which X_TMA reads through x_desc)."""
        self._box = box
        if self.design == "implicit_gemm":
            self._conv_tap(k, co, phase=phase, pooled=pooled)
        elif self.design == "implicit_gemm_flatk":
            self._conv_flat(k, co, per_sample=per_sample)
        elif self.design == "direct":
            self._conv_direct_dense(k, co)
        else:
            self._conv_direct(k, co)

    def _dot_args(self) -> str:
        if self.spec.dtype != "float32":
            return ""
        return f', input_precision="{self.cfg.DOT}"'

    def _conv_coords(self, k: Code, co: Coords, kd: str, kh: str, kw: str, row: str = "") -> None:
        """id_/ih_/iw_ and ok_ for taps (kd, kh, kw); `row` indexes the row vectors into a 2-D tile."""
        d, h, w, ok = (f"{v}{row}" for v in (co.d, co.h, co.w, co.ok))
        if not self.spec.transposed:
            k(f"id_ = {d} * STD - PADD + {kd} * DLD")
            k(f"ih_ = {h} * STH - PADH + {kh} * DLH")
            k(f"iw_ = {w} * STW - PADW + {kw} * DLW")
            k(f"ok_ = {ok} & (id_ >= 0) & (id_ < ID) & (ih_ >= 0) & (ih_ < IH) & (iw_ >= 0) & (iw_ < IW)")
        else:
            # gradient-of-input form: output o takes input i where o = i * stride - pad + k * dil
            k(f"td_ = {d} + PADD - {kd} * DLD")
            k(f"th_ = {h} + PADH - {kh} * DLH")
            k(f"tw_ = {w} + PADW - {kw} * DLW")
            k("id_ = td_ // STD")
            k("ih_ = th_ // STH")
            k("iw_ = tw_ // STW")
            k(
                f"ok_ = {ok} & (td_ >= 0) & (th_ >= 0) & (tw_ >= 0) & (td_ % STD == 0) & (th_ % STH == 0)"
                " & (tw_ % STW == 0) & (id_ < ID) & (ih_ < IH) & (iw_ < IW)"
            )

    def _conv_tap(self, k: Code, co: Coords, *, phase: bool, pooled: bool = False) -> None:
        nchw = self.cfg.LAYOUT == "nchw"
        k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("rk = tl.arange(0, BLOCK_K)")
        k("n_icb = tl.cdiv(CIN_G, BLOCK_K)")
        k("xg = x_ptr + (pid_g * CIN_G).to(tl.int64) * sxc")
        # the packed weight is [groups, OC_G, taps, CIN_G]: one output channel's K = taps x CIN_G contiguous
        k("WK = KD * KH * KW * CIN_G")
        k("wg = w_ptr + (pid_g * OC_G).to(tl.int64) * WK")
        if phase:
            self._phase_loop(k, co, nchw, ("rd", "rh", "rw"), ("qd", "qh", "qw"))
        elif pooled and self.spec.transposed:
            # Inside a pooling window: when the pool's stride is a multiple of the convolution's, all
            # pixels of the tile have the same output phase for a given window offset.
            k("if POOL_PHASE:")
            with k.indent():
                for dim, wk, pp, pd, st in (
                    ("d", "wkd", "PPD", "PDD", "STD"),
                    ("h", "wkh", "PPH", "PDH", "STH"),
                    ("w", "wkw", "PPW", "PDW", "STW"),
                ):
                    k(f"r{dim}_ = (({wk} * {pd} - {pp}) % {st} + {st}) % {st}")
                    k(f"q{dim}_ = (c{dim}_ - r{dim}_) // {st}")
                self._phase_loop(k, co, nchw, ("rd_", "rh_", "rw_"), ("qd_", "qh_", "qw_"))
            k("else:")
            with k.indent():
                self._tap_loop(k, co, nchw)
        else:
            self._tap_loop(k, co, nchw)

    def _tap_loop(self, k: Code, co: Coords, nchw: bool) -> None:
        k("for it in range(0, KD * KH * KW * n_icb):")
        with k.indent():
            k("tap = it // n_icb")
            k("ic0 = (it - tap * n_icb) * BLOCK_K")
            k("kw_ = tap % KW")
            k("kh_ = (tap // KW) % KH")
            k("kd_ = tap // (KW * KH)")
            self._conv_coords(k, co, "kd_", "kh_", "kw_")
            self._tap_dot(k, nchw)

    def _phase_loop(
        self, k: Code, co: Coords, nchw: bool, r: tuple[str, str, str], q: tuple[str, str, str]
    ) -> None:
        # Taps that reach output phase r: k * dil = r + pad (mod stride); they repeat every
        # STEP = stride / gcd(stride, dil). Find the first one per dim, then walk only those.
        rd, rh, rw = r
        qd, qh, qw = q
        for dim, rr, kk, s, pad, dil, step in (
            ("d", rd, "KD", "STD", "PADD", "DLD", "STEPD"),
            ("h", rh, "KH", "STH", "PADH", "DLH", "STEPH"),
            ("w", rw, "KW", "STW", "PADW", "DLW", "STEPW"),
        ):
            k(f"k0{dim} = pid * 0 + {kk}")  # a tensor from the start: it is loop-carried
            k(f"for kt in range(0, {step}):")
            with k.indent():
                k(f"hit = (({rr} + {pad} - kt * {dil}) % {s} == 0) & (k0{dim} == {kk}) & (kt < {kk})")
                k(f"k0{dim} = tl.where(hit, kt, k0{dim})")
            k(f"nv{dim} = tl.where(k0{dim} < {kk}, ({kk} - k0{dim} + {step} - 1) // {step}, 0)")
        k("for it in range(0, nvd * nvh * nvw * n_icb):")
        with k.indent():
            k("tv = it // n_icb")
            k("ic0 = (it - tv * n_icb) * BLOCK_K")
            k("kw_ = k0w + (tv % nvw) * STEPW")
            k("kh_ = k0h + ((tv // nvw) % nvh) * STEPH")
            k("kd_ = k0d + (tv // (nvw * nvh)) * STEPD")
            k("tap = (kd_ * KH + kh_) * KW + kw_")
            k(f"id_ = {qd} + ({rd} + PADD - kd_ * DLD) // STD")
            k(f"ih_ = {qh} + ({rh} + PADH - kh_ * DLH) // STH")
            k(f"iw_ = {qw} + ({rw} + PADW - kw_ * DLW) // STW")
            k(f"ok_ = {co.ok} & (id_ >= 0) & (id_ < ID) & (ih_ >= 0) & (ih_ < IH) & (iw_ >= 0) & (iw_ < IW)")
            self._tap_dot(k, nchw)

    def _tap_dot(self, k: Code, nchw: bool) -> None:
        k("xo = n64 * sxn + id_ * sxd + ih_ * sxh + iw_ * sxw")
        k("ic = ic0 + rk")
        k("kok = ic < CIN_G")
        gather = (
            "a = tl.load(xg + xo[:, None] + (ic * sxc)[None, :], mask=ok_[:, None] & kok[None, :], other=0.0)"
        )
        if nchw:
            # pixels along the fast axis: neighbouring output pixels read neighbouring input words (the
            # A tile is M-major; nhwc gives the K-major tile that TF32 tensor-core MMAs want)
            k(
                "a = tl.load(xg + xo[None, :] + (ic * sxc)[:, None], mask=ok_[None, :] & kok[:, None], other=0.0)"
            )
            k("a = tl.trans(a)")
        elif self._box:
            # the tap's input box [1, 1, BOX_H, BOX_W, BLOCK_K] of the channels-last input (stride 1, so the
            # box is the output box shifted by the tap); what lies outside the input reads as zero
            k("if X_TMA:")
            with k.indent():
                k(
                    "a = x_desc.load([n, bd - PADD + kd_ * DLD, bh - PADH + kh_ * DLH, bw - PADW + kw_ * DLW, "
                    "pid_g * CIN_G + ic0]).reshape(BLOCK_M, BLOCK_K)"
                )
            k("else:")
            with k.indent():
                k(gather)
        else:
            k(gather)
        # B = W^T with K contiguous in memory: Hopper's TF32 wgmma reads both operands K-major from
        # shared memory; an N-contiguous weight would need a transposing copy every step
        load = (
            "b = tl.load(wg + j[None, :] * WK + (tap * CIN_G + ic)[:, None], "
            "mask=kok[:, None] & col_ok[None, :], other=0.0)"
        )
        if self.sp.w_tma:
            # the packed weight as a [groups * OC_G, taps * CIN_G] matrix, read in [BLOCK_N, BLOCK_K] boxes;
            # rows past OC_G belong to columns col_ok masks, and the host asks CIN_G % BLOCK_K == 0
            k("if W_TMA:")
            k("    b = w_desc.load([pid_g * OC_G + pid_n * BLOCK_N, tap * CIN_G + ic0]).T")
            k("else:")
            with k.indent():
                k(load)
        else:
            k(load)
        k(f"acc = tl.dot(a, b, acc{self._dot_args()})")

    def _conv_flat(self, k: Code, co: Coords, *, per_sample: bool) -> None:
        nchw = self.cfg.LAYOUT == "nchw"
        # nchw: tiles are [BLOCK_K, BLOCK_M] (pixels on the fast axis), transposed for the dot
        row, tap_ax = ("[None, :]", "[:, None]") if nchw else ("[:, None]", "[None, :]")
        k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("rk = tl.arange(0, BLOCK_K)")
        k("KT = KD * KH * KW")
        k("xg = x_ptr + (pid_g * CIN_G).to(tl.int64) * sxc")
        # the packed weight is [groups, OC_G, K] with K contiguous, in the kernel's K order
        k("WK = KT * CIN_G")
        k("wg = w_ptr + (pid_g * OC_G).to(tl.int64) * WK")
        k("nx = n64 * sxn" if per_sample else f"nx = (n64 * sxn){row}")
        k("for k0 in range(0, CIN_G * KT, BLOCK_K):")
        with k.indent():
            k("kk = k0 + rk")
            k("kok = kk < CIN_G * KT")
            if nchw:  # k = ic * KT + tap: the weight's own order, taps of one channel adjacent
                k("ic = kk // KT")
                k("tap = kk - ic * KT")
            else:  # k = tap * CIN_G + ic: channels of one tap adjacent, as channels-last stores them
                k("tap = kk // CIN_G")
                k("ic = kk - tap * CIN_G")
            k(f"kw_ = (tap % KW){tap_ax}")
            k(f"kh_ = ((tap // KW) % KH){tap_ax}")
            k(f"kd_ = (tap // (KW * KH)){tap_ax}")
            self._conv_coords(k, co, "kd_", "kh_", "kw_", row=row)
            k(f"ok_ = ok_ & kok{tap_ax}")
            k(f"xo = nx + (ic * sxc){tap_ax} + id_ * sxd + ih_ * sxh + iw_ * sxw")
            k("a = tl.load(xg + xo, mask=ok_, other=0.0)")
            if nchw:
                k("a = tl.trans(a)")
            k(
                "b = tl.load(wg + j[None, :] * WK + kk[:, None], mask=kok[:, None] & col_ok[None, :], other=0.0)"
            )
            k(f"acc = tl.dot(a, b, acc{self._dot_args()})")

    def _window_origin(self, k: Code, co: Coords) -> None:
        """od0/oh0/ow0: the input position of each output pixel's first tap (stride and padding applied)."""
        k(f"od0 = {co.d} * STD - PADD")
        k(f"oh0 = {co.h} * STH - PADH")
        k(f"ow0 = {co.w} * STW - PADW")

    def _conv_direct_dense(self, k: Code, co: Coords) -> None:
        # A short reduction (a 3-channel input layer: 3 channels x 27 taps) leaves a tensor-core loop a few
        # steps and an im2col gather per element; here every (input channel, tap) is one outer product of
        # BLOCK_M input values (one load, contiguous along the output row in NCHW) and BLOCK_N weights;
        # exact fp32 FMAs, each input pointer computed once per pixel.
        k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        self._window_origin(k, co)
        k("xb = x_ptr + (pid_g * CIN_G).to(tl.int64) * sxc + n64 * sxn + od0 * sxd + oh0 * sxh + ow0 * sxw")
        # the packed weight is [groups, CIN_G x taps, OC_G]: one (input channel, tap) row of weights per step
        k("wg = w_ptr + (pid_g * (CIN_G * KD * KH * KW)).to(tl.int64) * OC_G + j")
        # (input channel, depth tap) in a loop, the plane's taps unrolled: fully unrolled, the 81 steps of a
        # 3 x 3 x 3 kernel over 3 channels had their loads hoisted into 240-255 registers (spilling at
        # 128 x 64 over 4 warps, compiled for sm_90)
        k("for ck in range(CIN_G * KD):")
        with k.indent():
            k("ic = ck // KD")
            k("kd_ = ck - ic * KD")
            k("id_ = od0 + kd_ * DLD")
            k(f"okd = {co.ok} & (id_ >= 0) & (id_ < ID)")
            k("xd = xb + ic * sxc + kd_ * DLD * sxd")
            k("wk = wg + ck * (KH * KW * OC_G)")
            k("for kh_ in tl.static_range(KH):")
            with k.indent():
                k("ih_ = oh0 + kh_ * DLH")
                k("okh = okd & (ih_ >= 0) & (ih_ < IH)")
                k("xr = xd + kh_ * DLH * sxh")
                k("for kw_ in tl.static_range(KW):")
                with k.indent():
                    k("iw_ = ow0 + kw_ * DLW")
                    k("xv = tl.load(xr + kw_ * DLW * sxw, mask=okh & (iw_ >= 0) & (iw_ < IW), other=0.0)")
                    k("wv = tl.load(wk + (kh_ * KW + kw_) * OC_G, mask=col_ok, other=0.0)")
                    k("acc += xv.to(tl.float32)[:, None] * wv.to(tl.float32)[None, :]")

    def _conv_direct_unrolled(self, k: Code, co: Coords) -> None:
        # Memory-bound: per pixel the input origin and one pointer are computed once; each tap then adds
        # a per-row scalar (kd, kh) or a compile-time offset (kw, folded into the load) and one mask.
        nchw = self.cfg.LAYOUT == "nchw"
        k("ci = c // OC_G")
        self._window_origin(k, co)
        k("xo = n64 * sxn + od0 * sxd + oh0 * sxh + ow0 * sxw")
        k("xc = (ci * sxc).to(tl.int64)")
        if nchw:
            k("xb = x_ptr + xo[None, :] + xc[:, None]")
            k("acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)")
        else:
            k("xb = x_ptr + xo[:, None] + xc[None, :]")
            k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("for kd_ in tl.static_range(KD):")
        with k.indent():
            k("id_ = od0 + kd_ * DLD")
            k(f"okd = {co.ok} & (id_ >= 0) & (id_ < ID)")
            k("for kh_ in tl.static_range(KH):")
            with k.indent():
                k("ih_ = oh0 + kh_ * DLH")
                k("okh = okd & (ih_ >= 0) & (ih_ < IH)")
                k("xr = xb + (kd_ * DLD * sxd + kh_ * DLH * sxh)")
                k("for kw_ in tl.static_range(KW):")
                with k.indent():
                    k("iw_ = ow0 + kw_ * DLW")
                    k("ok_ = okh & (iw_ >= 0) & (iw_ < IW)")
                    k("wv = tl.load(w_ptr + ((kd_ * KH + kh_) * KW + kw_) * C + c, mask=col_ok, other=0.0)")
                    if nchw:
                        k(
                            "xv = tl.load(xr + kw_ * DLW * sxw, mask=ok_[None, :] & col_ok[:, None], other=0.0)"
                        )
                        k("acc_t += xv.to(tl.float32) * wv.to(tl.float32)[:, None]")
                    else:
                        k(
                            "xv = tl.load(xr + kw_ * DLW * sxw, mask=ok_[:, None] & col_ok[None, :], other=0.0)"
                        )
                        k("acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]")
        if nchw:
            k("acc = tl.trans(acc_t)")

    def _conv_direct(self, k: Code, co: Coords) -> None:
        if self.sp.unrolled():
            self._conv_direct_unrolled(k, co)
            return
        nchw = self.cfg.LAYOUT == "nchw"
        # input channel of output channel c: groups == in_channels, OC_G outputs per input
        k("ci = c // OC_G")
        if nchw:
            k("acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)")
        else:
            k("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        k("for tap in range(0, KD * KH * KW):")
        with k.indent():
            k("kw_ = tap % KW")
            k("kh_ = (tap // KW) % KH")
            k("kd_ = tap // (KW * KH)")
            self._conv_coords(k, co, "kd_", "kh_", "kw_")
            k("xo = n64 * sxn + id_ * sxd + ih_ * sxh + iw_ * sxw")
            k("wv = tl.load(w_ptr + tap * C + c, mask=col_ok, other=0.0).to(tl.float32)")
            if nchw:
                k(
                    "xv = tl.load(x_ptr + xo[None, :] + (ci * sxc)[:, None], mask=ok_[None, :] & col_ok[:, None], "
                    "other=0.0)"
                )
                k("acc_t += xv.to(tl.float32) * wv[:, None]")
            else:
                k(
                    "xv = tl.load(x_ptr + xo[:, None] + (ci * sxc)[None, :], mask=ok_[:, None] & col_ok[None, :], "
                    "other=0.0)"
                )
                k("acc += xv.to(tl.float32) * wv[None, :]")
        if nchw:
            k("acc = tl.trans(acc_t)")
