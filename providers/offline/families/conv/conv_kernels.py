"""The @triton.jit kernel of each stage of a conv program (see conv_codegen's module docstring).

A stage kernel tiles [BLOCK_M pixels] x [BLOCK_N channels] (grouped so neighbouring programs share
input rows), or, for direct_depthwise with BLOCK_W, a 2-D tile of one (sample, channel) plane; a
folded normalisation (plan.fold) is a one-program-per-sample kernel over the statistics partials.
The convolution's loop is conv_mainloop's, the ops and the sink conv_epilogue's.
"""

from __future__ import annotations

from kernelwright.providers.offline.emit.emit import Code
from kernelwright.providers.offline.families.conv.conv_epilogue import EpilogueWriter
from kernelwright.providers.offline.families.conv.conv_ir import Op
from kernelwright.providers.offline.families.conv.conv_mainloop import Coords, MainLoopWriter
from kernelwright.providers.offline.families.conv.conv_plane import plane_body
from kernelwright.providers.offline.families.conv.conv_stages import Stage, StagedPlan


class StageKernelWriter:
    """Writes each stage's @triton.jit kernel: its arguments, the tile's coordinates, the source (the
    convolution or a load of the previous stage's buffer, normalised), pooling, then the epilogue."""

    def __init__(self, sp: StagedPlan) -> None:
        self.sp = sp
        self.plan = sp.plan
        self.spec = sp.spec
        self.cfg = sp.cfg
        self.design = sp.design
        self.mainloop = MainLoopWriter(sp)
        self.epilogue = EpilogueWriter(sp)
        self._ps = False  # the stage being written tiles rows per sample
        self._box = False  # ... in boxes of whole output rows (X_TMA)

    def stage_kernel(self, st: Stage) -> str:
        if st.fold:
            return self._fold_kernel(st)
        k = Code()
        args: list[str] = []
        conv = st.source == "conv"
        gemm = conv and self.sp.gemm
        phase = conv and self.sp.phase
        per_sample = self.sp.per_sample(st)
        self._ps = per_sample
        self._box = self.sp.box(st)
        if conv:
            args += ["x_ptr", "w_ptr", "sxn", "sxc", "sxd", "sxh", "sxw", "ID", "IH", "IW", "CIN_G", "OC_G",
                     "KD", "KH", "KW", "STD", "STH", "STW", "PADD", "PADH", "PADW", "DLD", "DLH", "DLW"]  # fmt: skip
            # The kernel's geometry is compile-time (one compile per convolution module): the direct designs'
            # taps unroll and their offsets fold, and the GEMM designs' per-element tap arithmetic (a K
            # index into channel and kd/kh/kw, stride and dilation) divides by constants
            for name in ("KD", "KH", "KW", "STD", "STH", "STW", "DLD", "DLH", "DLW"):
                args[args.index(name)] = f"{name}: tl.constexpr"
            if self.design == "implicit_gemm" and self.spec.transposed:
                args += ["STEPD", "STEPH", "STEPW"]
            if self.sp.w_tma:
                args.insert(args.index("w_ptr") + 1, "w_desc")
            if self._box:
                args.insert(args.index("x_ptr") + 1, "x_desc")
        else:
            args += ["in_ptr", "sin_n", "sin_c", "sin_d", "sin_h", "sin_w"]
        if st.norm is not None:
            args += ["mean_ptr", "rstd_ptr", "smn", "CG"]
        # XD/XH/XW: the grid of the source value (conv output or loaded buffer)
        args += ["N", "C", "CT", "XD", "XH", "XW", "SD", "SH", "SW"]
        if st.pool is not None:
            args += [
                "PKD",
                "PKH",
                "PKW",
                "PSD",
                "PSH",
                "PSW",
                "PPD",
                "PPH",
                "PPW",
                "PDD",
                "PDH",
                "PDW",
                "PDIV",
            ]
            if self.sp.window_split(st):
                args += ["WCH"]
        if st.sink != "stats_only":
            args += ["out_ptr", "son", "soc", "sod", "soh", "sow"]
        if st.sink in ("stats", "stats_only"):
            args += ["part_ptr", "TT"]
        if st.sink == "sreduce":
            args += ["red_scale"]
        operand_ids = sorted({op.operand for op in st.ops if op.kind == "operand" and op.operand is not None})
        for o in operand_ids:
            kind = self.plan.operands[o].kind
            args += (
                [f"o{o}_ptr"]
                + ([f"o{o}_sc"] if kind == "channel" else [])
                + ([f"o{o}_sn", f"o{o}_sc", f"o{o}_sd", f"o{o}_sh", f"o{o}_sw"] if kind == "full" else [])
            )
        const_args = self.sp.const_args(st)
        args += [name for name, _ in const_args]
        if self.sp.persistent(st):
            args += ["NUM_PROGS"]
        args += [
            "BLOCK_M: tl.constexpr",
            "BLOCK_N: tl.constexpr",
            "BLOCK_K: tl.constexpr",
            "GROUP_M: tl.constexpr",
        ]
        if self.sp.pool_phase(st):
            args += ["POOL_PHASE: tl.constexpr"]
        if self.sp.window_split(st):
            args += ["WSPLIT: tl.constexpr"]
        if conv and self.sp.w_tma:
            args += ["W_TMA: tl.constexpr"]
        if self._box:
            args += ["BOX_H: tl.constexpr", "BOX_W: tl.constexpr", "X_TMA: tl.constexpr"]
        if self.sp.plane(st):
            args += ["BLOCK_H: tl.constexpr", "BLOCK_W: tl.constexpr", "ONE_DEPTH: tl.constexpr"]
            if conv:  # padding folds into the taps' offsets: the centre tap's loads stay aligned
                for name in ("PADD", "PADH", "PADW"):
                    args[args.index(name)] = f"{name}: tl.constexpr"
                if self.cfg.WORDS:
                    args += ["WORDS: tl.constexpr"]
        k.jit_def(f"_kw_stage{st.index}", args)
        if self.sp.plane(st):
            with k.indent():
                plane_body(self, k, st)
            self.epilogue.tile_shape = "(BLOCK_M, BLOCK_N)"
            return k.text()
        with k.indent():
            self._grid(k, gemm=gemm, phase=phase, per_sample=per_sample)
            if self.sp.channel_chunks(st) is not None:
                k("num_n = 1  # one tile walks every channel, BLOCK_N at a time")
                k("width = GROUP_M")
            if self.sp.persistent(st):
                # the tiles in one loop that Triton flattens with each tile's K loop: the next tile's first
                # loads are issued while this tile's epilogue runs
                k("for pid in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGS, flatten=True):")
                with k.indent():
                    self._tile(k, st, gemm=gemm, phase=phase, per_sample=per_sample)
            else:
                k("pid = tl.program_id(0)")
                self._tile(k, st, gemm=gemm, phase=phase, per_sample=per_sample)
        return k.text()

    def _tile(self, k: Code, st: Stage, *, gemm: bool, phase: bool, per_sample: bool) -> None:
        """One output tile: its indices, its source (convolution or buffer), its ops and its store."""
        self._tile_index(k, gemm=gemm, phase=phase, per_sample=per_sample)
        kinds: dict[int, str] = {}
        red = self.sp.channel_chunks(st)
        if red is not None:
            self._channel_chunks(k, st, red, kinds, gemm=gemm)
        elif st.pool is None:
            coords = Coords("sd_", "sh_", "sw_", "row_ok", None if phase else "p")
            self._source(k, st, coords, kinds, phase=phase)
            self.epilogue.ops(k, st, st.pre, coords, kinds)
        else:
            self._pool(k, st, kinds, phase=phase)
            self.epilogue.ops(k, st, st.post, Coords("sd_", "sh_", "sw_", "row_ok", "p"), kinds)
        self.epilogue.sink(k, st, kinds, per_sample=per_sample, phase=phase)

    def _channel_chunks(self, k: Code, st: Stage, red: Op, kinds: dict[int, str], *, gemm: bool) -> None:
        """The stage's convolution and ops up to its channel reduction, BLOCK_N channels at a time, each
        chunk's reduction combined into `red`; then the ops after it (conv_stages.channel_chunks)."""
        coords = Coords("sd_", "sh_", "sw_", "row_ok", "p")
        at = st.pre.index(red)
        hoisted = [op for op in st.pre if op.kind == "const" or self.sp.scalar_operand(op)]
        chunked = [op for op in st.pre[: at + 1] if op not in hoisted]
        after = [op for op in st.pre[at + 1 :] if op not in hoisted]
        self.epilogue.ops(k, st, hoisted, coords, kinds)
        fn = red.attrs["fn"]
        init = {"sum": "0.0", "mean": "0.0", "max": "float('-inf')", "min": "float('inf')"}[fn]
        combine = {
            "sum": "red + {}",
            "mean": "red + {}",
            "max": "tl.maximum(red, {})",
            "min": "tl.minimum(red, {})",
        }
        k(f"red = tl.full((BLOCK_M, 1), {init}, tl.float32)")
        k("for nc in range(0, CT, BLOCK_N):")
        with k.indent():
            k("j = nc + tl.arange(0, BLOCK_N)")
            k("col_ok = j < CT")
            k("c = pid_g * OC_G + j" if gemm else "c = j")
            self._source(k, st, coords, kinds, phase=False)
            self.epilogue.ops(k, st, chunked, coords, kinds)
            k("red = " + combine[fn].format(f"v{red.id}"))
        k(f"v{red.id} = red")
        self.epilogue.ops(k, st, after, coords, kinds)

    def _fold_kernel(self, st: Stage) -> str:
        """One program per sample: each channel's mean of the normalised value over all positions from
        the statistics partials (count, sum per tile), then the stage's affine work on it."""
        k = Code()
        args = ["part_ptr", "TT", "mean_ptr", "rstd_ptr", "smn", "CG", "N", "C", "out_ptr", "son", "soc"]
        operand_ids = sorted({op.operand for op in st.ops if op.kind == "operand" and op.operand is not None})
        for o in operand_ids:
            args += [f"o{o}_ptr"] + ([f"o{o}_sc"] if self.plan.operands[o].kind == "channel" else [])
        args += [name for name, _ in self.sp.const_args(st)]
        args += ["BLOCK_T: tl.constexpr", "BLOCK_N: tl.constexpr"]
        k.jit_def(f"_kw_stage{st.index}", args)
        self.epilogue.tile_shape = "(1, BLOCK_N)"
        assert st.norm is not None
        with k.indent():
            k("n = tl.program_id(0)")
            k("n64 = n.to(tl.int64)")
            k("nr64 = n64")
            k("c = tl.arange(0, BLOCK_N)")
            k("col_ok = c < C")
            k("gi = c // CG")
            k("mu = tl.load(mean_ptr + n64 * smn + gi, mask=col_ok, other=0.0)")
            k("rs = tl.load(rstd_ptr + n64 * smn + gi, mask=col_ok, other=0.0)")
            k("rt = tl.arange(0, BLOCK_T)")
            k("acc_n = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)")
            k("acc_d = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)")
            k("for t0 in range(0, TT, BLOCK_T):")
            with k.indent():
                k("tt = t0 + rt")
                k("msk = (tt < TT)[:, None] & col_ok[None, :]")
                k("base = part_ptr + ((n64 * TT + tt[:, None]) * 3) * C + c[None, :]")
                k("pn = tl.load(base, mask=msk, other=0.0)")
                # each tile's sum less its count times the mean: small terms, no large sum cancelled
                k("acc_d += tl.load(base + C, mask=msk, other=0.0) - pn * mu[None, :]")
                k("acc_n += pn")
            k("cnt = tl.sum(acc_n, axis=0)")
            k("P = tl.max(cnt, axis=0)")
            k("# the (sample, channel) mean of the normalised value over every position")
            k(f"v{st.norm.id} = (tl.sum(acc_d, axis=0) / tl.maximum(cnt, 1.0) * rs)[None, :]")
            kinds: dict[int, str] = {st.norm.id: "f"}
            self.epilogue.ops(k, st, st.pre, Coords("", "", "", "", None), kinds)
            v = self.epilogue.float_of(st.value, kinds)
            kind = kinds[st.value]
            scale = " * P" if st.sreduce is not None and st.sreduce.attrs["fn"] == "sum" else ""
            k(f"r = {self.epilogue.full_of(st.value, kinds) if kind in ('s', 'r') else v}{scale}")
            if kind == "c":
                k("tl.store(out_ptr + n64 * son + tl.zeros((1, 1), dtype=tl.int64), r)")
            else:
                k("tl.store(out_ptr + n64 * son + (c * soc)[None, :], r, mask=col_ok[None, :])")
        self.epilogue.tile_shape = "(BLOCK_M, BLOCK_N)"
        return k.text()

    def _grid(self, k: Code, *, gemm: bool, phase: bool, per_sample: bool) -> None:
        """The kernel's tile grid: the group and phase axes, the pixel and channel tile counts."""
        if gemm:
            k("pid_g = tl.program_id(1)")
        if phase:
            k("pid_r = tl.program_id(2)")
            k("GD = tl.cdiv(XD, STD)")
            k("GH = tl.cdiv(XH, STH)")
            k("GW = tl.cdiv(XW, STW)")
        else:
            k("GD = SD")
            k("GH = SH")
            k("GW = SW")
        k("GP = GD * GH * GW")
        if self._box:
            # BLOCK_M pixels as BOX_H output rows of BOX_W columns, of one depth slice of one sample
            k("TBW = tl.cdiv(GW, BOX_W)")
            k("TBH = tl.cdiv(GH, BOX_H)")
            k("TPS = GD * TBH * TBW")
            k("num_m = N * TPS")
        elif per_sample:
            k("TPS = tl.cdiv(GP, BLOCK_M)")
            k("num_m = N * TPS")
        else:
            k("num_m = tl.cdiv(N * GP, BLOCK_M)")
        k("num_n = tl.cdiv(CT, BLOCK_N)")
        k("width = GROUP_M * num_n")

    def _tile_index(self, k: Code, *, gemm: bool, phase: bool, per_sample: bool) -> None:
        """Tile `pid`'s pixel rows (grouped order) and channel columns, with their masks."""
        k("first_m = (pid // width) * GROUP_M")
        k("gsz = tl.minimum(num_m - first_m, GROUP_M)")
        k("pid_m = first_m + (pid % width) % gsz")
        k("pid_n = (pid % width) // gsz")
        if self._box:
            k("n = pid_m // TPS")
            k("tt = pid_m - n * TPS")
            # the box's corner (bd, bh, bw) in output pixels; its rows r // BOX_W, columns r % BOX_W
            k("bd = tt // (TBW * TBH)")
            k("bh = ((tt // TBW) % TBH) * BOX_H")
            k("bw = (tt % TBW) * BOX_W")
            k("rb = tl.arange(0, BLOCK_M)")
            k("qd = bd + rb * 0")
            k("qh = bh + rb // BOX_W")
            k("qw = bw + rb % BOX_W")
            k("row_ok = (qh < GH) & (qw < GW)")
            k("p = (qd * GH + qh) * GW + qw")
            k("nr = n")
        elif per_sample:
            k("n = pid_m // TPS")
            k("tt = pid_m - n * TPS")
            k("p = tt * BLOCK_M + tl.arange(0, BLOCK_M)")
            k("row_ok = p < GP")
            k("nr = n")  # n as used against [BM, BN] tiles
        else:
            k("m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)")
            k("row_ok = m < N * GP")
            k("n = m // GP")
            k("p = m - n * GP")
            k("nr = n[:, None]")
        k("n64 = n.to(tl.int64)")
        k("nr64 = nr.to(tl.int64)")
        if not self._box:
            k("qw = p % GW")
            k("qh = (p // GW) % GH")
            k("qd = p // (GW * GH)")
        if phase:
            k("rd = pid_r // (STH * STW)")
            k("rh = (pid_r // STW) % STH")
            k("rw = pid_r % STW")
            k("sd_ = qd * STD + rd")
            k("sh_ = qh * STH + rh")
            k("sw_ = qw * STW + rw")
            k("row_ok = row_ok & (sd_ < XD) & (sh_ < XH) & (sw_ < XW)")
        else:
            k("sd_ = qd")
            k("sh_ = qh")
            k("sw_ = qw")
        k("j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)")
        k("col_ok = j < CT")
        k("c = pid_g * OC_G + j" if gemm else "c = j")

    def _source(self, k: Code, st: Stage, co: Coords, kinds: dict[int, str], *, phase: bool) -> None:
        if st.source == "conv":
            self.mainloop.write(
                k, co, phase=phase, pooled=st.pool is not None, per_sample=self._ps, box=self._box
            )
            k(f"v{st.src_op} = acc")
            kinds[st.src_op] = "f"
            return
        sp = co.flat if co.flat is not None else f"{co.d} * sin_d + {co.h} * sin_h + {co.w} * sin_w"
        if st.src_cred:
            k(f"src = tl.load(in_ptr + nr64 * sin_n + ({sp})[:, None], mask={co.ok}[:, None], other=0.0)")
            kind = "c"
        else:
            k(
                f"src = tl.load(in_ptr + nr64 * sin_n + (c * sin_c)[None, :] + ({sp})[:, None], "
                f"mask={co.ok}[:, None] & col_ok[None, :], other=0.0)"
            )
            kind = "f"
        k("src = src.to(tl.float32)")
        if st.norm is not None and st.norm_at_load:
            k(f"v{st.norm.args[0]} = src")  # the value before normalisation, for ops that read it
            kinds[st.norm.args[0]] = kind
            k("gi = (c // CG)[None, :]")
            k("mu = tl.load(mean_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
            k("rs = tl.load(rstd_ptr + nr64 * smn + gi, mask=col_ok[None, :], other=0.0)")
            k("src = (src - mu) * rs")
        k(f"v{st.src_op} = src")
        kinds[st.src_op] = kind

    def _pool(self, k: Code, st: Stage, kinds: dict[int, str], *, phase: bool) -> None:
        pool = st.pool
        assert pool is not None
        kind = pool.attrs["kind"]
        include = all(p.get("count_include_pad", True) for p in pool.attrs["parts"])
        in_kind = self._pre_kind(st)
        shape = "(BLOCK_M, BLOCK_N)" if in_kind == "f" else "(BLOCK_M, 1)"
        if kind == "max":
            k(f"pooled = tl.full({shape}, float('-inf'), tl.float32)")
        else:
            k(f"pooled = tl.zeros({shape}, dtype=tl.float32)")
            if not include:
                k("pcnt = tl.zeros((BLOCK_M, 1), dtype=tl.float32)")
        if self.sp.window_split(st):
            # this program's share of the window positions (grid axis 2; all of them when WSPLIT is off)
            k("w0 = tl.program_id(2) * WCH")
            k("for wi in range(w0, tl.minimum(w0 + WCH, PKD * PKH * PKW)):")
        else:
            k("for wi in range(0, PKD * PKH * PKW):")
        with k.indent():
            k("wkw = wi % PKW")
            k("wkh = (wi // PKW) % PKH")
            k("wkd = wi // (PKW * PKH)")
            k("cd_ = sd_ * PSD - PPD + wkd * PDD")
            k("ch_ = sh_ * PSH - PPH + wkh * PDH")
            k("cw_ = sw_ * PSW - PPW + wkw * PDW")
            k("pok = row_ok & (cd_ >= 0) & (cd_ < XD) & (ch_ >= 0) & (ch_ < XH) & (cw_ >= 0) & (cw_ < XW)")
            co = Coords("cd_", "ch_", "cw_", "pok", None)
            self._source(k, st, co, kinds, phase=False)
            self.epilogue.ops(k, st, st.pre, co, kinds)
            val = f"v{pool.args[0]}"
            if kind == "max":
                k(f"pooled = tl.where(pok[:, None], tl.maximum(pooled, {val}), pooled)")
            else:
                k(f"pooled = pooled + tl.where(pok[:, None], {val}, 0.0)")
                if not include:
                    k("pcnt = pcnt + pok[:, None].to(tl.float32)")
        if kind == "avg":
            k("pooled = pooled / " + ("PDIV" if include else "tl.maximum(pcnt, 1.0)"))
        k(f"v{pool.id} = pooled")
        kinds[pool.id] = in_kind

    def _pre_kind(self, st: Stage) -> str:
        assert st.pool is not None
        target = st.pool.args[0]
        if target == st.src_op:
            return "c" if st.src_cred else "f"
        return "c" if self.plan.ops[target].cred else "f"
