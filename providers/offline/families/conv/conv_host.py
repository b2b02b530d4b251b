"""The host side of a conv program: the Python function that packs the weight, allocates each stage's
buffers and launches the stage kernels (conv_kernels) with their grids and block sizes.
"""

from __future__ import annotations

from kernelwright.providers.offline.emit.emit import Code
from kernelwright.providers.offline.families.conv.conv_stages import Stage, StagedPlan
from kernelwright.providers.offline.runtime.conv import fit_block

# _kw_fit_block's cost of one block beyond its width, in channels: an output-channel tile gathers the input's
# patches again; a K step (one tap's channel block) pays its loop step and address arithmetic
FIT_OVER_N = 16
FIT_OVER_K = 8


class HostWriter:
    """Writes `_kw_forward`, the launcher: the convolution's sizes and packed weight, then per stage its
    buffers, tile sizes, grid and launch (and the normalisation statistics it reads)."""

    def __init__(self, sp: StagedPlan) -> None:
        self.sp = sp
        self.plan = sp.plan
        self.spec = sp.spec
        self.cfg = sp.cfg
        self.design = sp.design
        # the implicit GEMM over a channels-last copy: its K (taps x input channels) padded per tap to 16
        self.padded_k = self.design == "implicit_gemm" and self.cfg.LAYOUT == "nhwc"

    @property
    def cin_k(self) -> str:
        """The launcher's name for the input channels per group that the kernel's K walks."""
        return "CIN_P" if self.padded_k else "CIN_G"

    def forward_function(self) -> str:
        s = self.spec
        h = Code()
        args = ", ".join(self.plan.forward_args)
        h(f"def _kw_forward(self, {args}):")
        with h.indent():
            h(f"ND = {s.ndim}")
            self._host_conv(h)
            for st in self.sp.stages:
                self._host_stage(h, st)
            last = self.sp.stages[-1]
            sizes = f"b{last.index}.shape"
            groups = self.plan.out_groups
            dims = ", ".join("1" if not g else " * ".join(f"{sizes}[{d}]" for d in g) for g in groups)
            h(f"return b{last.index}.view({dims}{',' if len(groups) == 1 else ''})")
        return "\n" + h.text()

    def _host_conv(self, h: Code) -> None:
        s = self.spec
        x = self.plan.conv_input
        if s.module is not None:
            m = f"self.{s.module}"
            h(f"stride = _kw_tup({m}.stride, ND)")
            h(f"dil = _kw_tup({m}.dilation, ND)")
            h(f"groups = int({m}.groups)")
            h(f"opad = _kw_tup(getattr({m}, 'output_padding', 0), ND)")
            h(f"padding = {m}.padding")
        else:
            hp = s.hyper
            h(f"stride = _kw_tup({hp['stride']}, ND)")
            h(f"dil = _kw_tup({hp['dilation']}, ND)")
            h(f"groups = int({hp['groups']})")
            h(f"opad = _kw_tup({hp['output_padding']}, ND)")
            h(f"padding = {hp['padding']}")
        h(f"w = {s.weight}")
        h(f"x5 = _kw_as5d({x}, ND)")
        h("w5 = _kw_as5d(w, ND)")
        h("N, CIN, ID, IH, IW = x5.shape")
        h("KD, KH, KW = w5.shape[2], w5.shape[3], w5.shape[4]")
        if s.transposed:
            h("OC_G = w5.shape[1]")
            h("OC = OC_G * groups")
            h("CIN_G = CIN // groups")
        else:
            h("OC = w5.shape[0]")
            h("CIN_G = w5.shape[1]")
            h("OC_G = OC // groups")
        h("ksz = (KD, KH, KW)")
        h("stride3, dil3, opad3 = _kw_pad3(stride, ND, 1), _kw_pad3(dil, ND, 1), _kw_pad3(opad, ND, 0)")
        h("if isinstance(padding, str):")
        with h.indent():
            h(
                "pad3 = tuple(dil3[i] * (ksz[i] - 1) // 2 for i in range(3)) if padding == 'same' else (0, 0, 0)"
            )
        h("else:")
        with h.indent():
            h("pad3 = _kw_pad3(_kw_tup(padding, ND), ND, 0)")
        h("insz = (ID, IH, IW)")
        if s.transposed:
            h(
                "osz = [(insz[i] - 1) * stride3[i] - 2 * pad3[i] + dil3[i] * (ksz[i] - 1) + opad3[i] + 1 for i in range(3)]"
            )
        else:
            h("if padding == 'same':")
            with h.indent():
                h("osz = list(insz)")
            h("else:")
            with h.indent():
                h(
                    "osz = [(insz[i] + 2 * pad3[i] - dil3[i] * (ksz[i] - 1) - 1) // stride3[i] + 1 for i in range(3)]"
                )
        h("OD, OH, OW = osz")
        # input layout
        if self.padded_k:
            # K walks each group's input channels zero-padded to a multiple of 16 (in the input's NHWC copy
            # and in the packed weight), decided from the tensors at run time: at 47 channels the rows of
            # both were 47 elements apart, the K tiles' loads scalar, and the stage spilled (172 B per
            # thread compiled for sm_90); padded, the tiles load 16-byte vectors
            h("CIN_P = -(-CIN_G // 16) * 16")
            h("xk = _kw_nhwc(x5, groups, CIN_P)")
        elif self.cfg.LAYOUT == "nhwc":
            h("xk = _kw_nhwc(x5)")
        else:
            h("xk = x5")
        # packed weight
        if self.design == "direct":  # (OC, CIN_G, taps) as [G, CIN_G x taps, OC_G]: a weight row per step
            pack = "lambda t: _kw_as5d(t, ND).reshape(groups, OC_G, -1).permute(0, 2, 1).contiguous()"
        elif self.design == "direct_depthwise":
            if s.transposed:
                pack = "lambda t: _kw_as5d(t, ND).reshape(t.shape[0] * t.shape[1], -1).t().contiguous()"
            else:
                pack = "lambda t: _kw_as5d(t, ND).reshape(t.shape[0], -1).t().contiguous()"
        else:
            # K-contiguous rows per output channel, in the kernel's K order: (tap, ic) for implicit_gemm
            # and nhwc flat-K, (ic, tap) for nchw flat-K (the forward weight's own layout, no copy)
            tap_major = self.design == "implicit_gemm" or self.cfg.LAYOUT == "nhwc"
            if s.transposed:  # (Cin, OC_G, taps) as (G, CIN_G, OC_G, T)
                perm = "(0, 2, 3, 1)" if tap_major else "(0, 2, 1, 3)"
                view = f"_kw_as5d(t, ND).reshape(groups, CIN_G, OC_G, -1).permute{perm}"
            else:  # (OC, CIN_G, taps) as (G, OC_G, CIN_G, T)
                perm = ".permute(0, 1, 3, 2)" if tap_major else ""
                view = f"_kw_as5d(t, ND).reshape(groups, OC_G, CIN_G, -1){perm}"
            # padded K: each tap's CIN_G weights then zeros up to CIN_P (a function of the weight's shape and
            # groups, so the cache's shape tag keeps it apart from an unpadded copy)
            pack = f"lambda t: _kw_padc({view}, CIN_P)" if self.padded_k else f"lambda t: {view}.contiguous()"
        h(f"wp = _kw_cached(self, '{self.design}:{self.cfg.LAYOUT}:{s.weight}', w, {pack})")

    def _fill_sms(self, h: Code, tiles: str, cfull: bool) -> None:
        """Smaller tiles where the call's tiles leave SMs idle: BM halved down to 32, then BN (not a
        whole-channel tile) down to 64, while there are fewer tiles than SMs; BN last, since every channel
        tile gathers the input's patches again. ResNet18 at batch 2 on an H100: its late convolutions were
        4-16 tiles of 128 x 128 on 132 SMs; with every convolution on 32 x 64 tiles the forward's kernels
        took 1.10 ms instead of 2.21 (64 x 64: 1.53; this rule with BN down to 32: 1.39). Large calls keep
        the tile they had. `tiles`: the call's tile count, as the grid below is sized."""
        h(f"while BM > 32 and {tiles} < _num_sms(x5.device):")
        with h.indent():
            h("BM //= 2")
        if not cfull:
            h(f"while BN > 64 and {tiles} < _num_sms(x5.device):")
            with h.indent():
                h("BN //= 2")

    def _host_stage(self, h: Code, st: Stage) -> None:
        if st.fold:
            host_fold(self, h, st)
            return
        i = st.index
        cfg = self.cfg
        per_sample = self.sp.per_sample(st)
        conv = st.source == "conv"
        h(f"# stage {i}: {st.source}{' + pool' if st.pool else ''} -> {st.sink}")
        if conv:
            h(f"C{i} = OC")
            h(f"X{i} = (OD, OH, OW)")
        else:
            src = self.sp.stages[st.in_buf]
            h(f"C{i} = OC")  # every value that has channels has the convolution's
            h(f"X{i} = tuple(b{src.index}.shape[2:])")
        if st.pool is not None:
            parts = ", ".join(
                f"({p['kernel']}, {p['stride']}, {p['padding']}, {p['dilation']})"
                for p in st.pool.attrs["parts"]
            )
            h(f"pk{i}, ps{i}, pp{i}, pd{i} = _kw_pool_params([{parts}], ND)")
            h(f"S{i} = _kw_pool_out(X{i}, pk{i}, ps{i}, pp{i}, pd{i})")
            h(f"pdiv{i} = float(pk{i}[0] * pk{i}[1] * pk{i}[2])")
        else:
            h(f"S{i} = list(X{i})")
        # the buffer this stage writes
        value_cred = self.plan.ops[st.value].cred if st.value > 0 else False
        if st.sink == "sreduce" and st.sreduce is not None:
            red = st.sreduce
            dims = red.attrs["dims"]
            h(f"B{i} = [{', '.join(f'1 if {d} in {tuple(dims)!r} else S{i}[{d - 2}]' for d in (2, 3, 4))}]")
            h(f"red_count{i} = 1")
            for d in dims:
                h(f"red_count{i} *= S{i}[{d - 2}]")
            cb = "1" if value_cred else f"C{i}"
            fn = red.attrs["fn"]
            init = {"sum": "torch.zeros", "mean": "torch.zeros"}.get(fn)
            shape = f"(N, {cb}, B{i}[0], B{i}[1], B{i}[2])"
            if init:
                h(f"b{i} = {init}({shape}, device=x5.device, dtype=torch.float32)")
            else:
                fill = "float('-inf')" if fn == "max" else "float('inf')"
                h(f"b{i} = torch.full({shape}, {fill}, device=x5.device, dtype=torch.float32)")
            h(f"red_scale{i} = 1.0 / red_count{i}" if fn == "mean" else f"red_scale{i} = 1.0")
        elif st.sink != "stats_only":
            cb = "1" if value_cred else f"C{i}"
            # a stage's buffer for the next stage: fp32 for fp32 tasks; the task's own dtype for half ones,
            # the rounding the reference applies to every op's output (level2_bf16/24, depthwise + batch
            # norm: an fp32 buffer was two thirds of the bytes moved)
            dtype = self.sp.out_dtype if st.final or self.spec.dtype != "float32" else "torch.float32"
            h(f"b{i} = torch.empty((N, {cb}, S{i}[0], S{i}[1], S{i}[2]), device=x5.device, dtype={dtype})")
        # output strides (contiguous buffer; a reduced dim's stride is 0 for the per-element atomics)
        if st.sink == "sreduce" and st.sreduce is not None:
            dims = st.sreduce.attrs["dims"]
            h(f"so{i} = list(b{i}.stride())")
            for d in dims:
                h(f"so{i}[{d}] = 0")
        elif st.sink != "stats_only":
            h(f"so{i} = list(b{i}.stride())")
        # tile sizes
        ct = "OC_G" if (conv and self.sp.gemm) else f"C{i}"
        cfull = st.needs_cfull
        h(f"CT{i} = {ct}" if self.sp.has_channels(st) else f"CT{i} = 1")
        plane = self.sp.plane(st)
        box = self.sp.box(st)
        if plane:
            # rows (depth x height) of up to BLOCK_W columns; a 1-D plane's tile is one long row
            h(f"R{i} = S{i}[0] * S{i}[1]")
            h(f"if R{i} == 1:")
            with h.indent():
                h(f"BW = min({cfg.BLOCK_M}, _kw_npow2(S{i}[2]))")
            h("else:")
            with h.indent():
                # the width that pads the plane least (level2/24 at 140 x 140: 128 columns padded rows to 256)
                h(f"BW = _kw_plane_w(R{i}, S{i}[2], {cfg.BLOCK_M}, {min(cfg.BLOCK_W, cfg.BLOCK_M)})")
            h(f"BH = max(1, min({cfg.BLOCK_M} // BW, _kw_npow2(R{i})))")
            h("BM, BN, BK = BH * BW, 1, 16")
            warps, stages = cfg.num_warps, 1
        elif conv:
            h(f"BM, BN, BK = {cfg.BLOCK_M}, {cfg.BLOCK_N}, {cfg.BLOCK_K}")
            lo = 16 if self.sp.gemm else 1
            chunks = self.sp.channel_chunks(st) is not None
            if cfull and chunks:
                # every channel in chunks no wider than the traced whole-channel tile (conv_stages.channel_chunks)
                traced_chunk = traced_tile(self.sp, self.padded_k, True, lo)
                assert traced_chunk is not None
                h(f"BN = max({lo}, min(_kw_npow2(CT{i}), {traced_chunk[1]}))")
                h(f"while BM * BN > 16384 and BM > {lo}:")
                with h.indent():
                    h("BM //= 2")
            elif cfull:
                h(f"BN = max({lo}, _kw_npow2(CT{i}))")
                h(f"while BM * BN > 16384 and BM > {lo}:")
                with h.indent():
                    h("BM //= 2")
            elif self.sp.gemm:
                # channel and K blocks that pad the call's sizes least (_kw_fit_block): level2/26 searched at 32
                # input and 64 output channels ran its 64 x 64 x 32 tiles at 40 and 80 (2 K steps of 32 per
                # tap for 40 channels, 2 column tiles for 80): 2.6x the MMA work the sizes need
                h(f"BN = _kw_fit_block(CT{i}, BN, {lo}, {FIT_OVER_N})")
            else:
                h(f"BN = max({lo}, min(BN, _kw_npow2(CT{i})))")
            if self.design == "implicit_gemm":
                h(f"BK = _kw_fit_block({self.cin_k}, BK, 16, {FIT_OVER_K})")
                traced = traced_tile(self.sp, self.padded_k, cfull, lo)
                if traced is not None:
                    # never a larger tile than at the traced size, where the program was chosen (compiled for
                    # sm_90, level2/10 spilled 136 B per thread at 160 output channels, a 64 x 256 whole-channel
                    # tile with 32-wide K steps): more output channels than traced take fewer pixels per tile,
                    # and wider operand tiles narrower K steps
                    bm, bn, bk = traced
                    if not cfull or bm * bn < 16384:  # (a whole-channel tile is held to 16384 above)
                        h(f"while BM * BN > {bm * bn} and BM > {lo}:")
                        with h.indent():
                            h("BM //= 2")
                    h(f"while (BM + BN) * BK > {(bm + bn) * bk} and BK > 16:")
                    with h.indent():
                        h("BK //= 2")
            elif self.design == "implicit_gemm_flatk":
                h("BK = max(16, min(BK, _kw_npow2(CIN_G * KD * KH * KW)))")
            if per_sample:
                h(f"BM = max({lo}, min(BM, _kw_npow2(S{i}[0] * S{i}[1] * S{i}[2])))")
            if box:
                # BM pixels as BXH output rows of BXW columns (the box X_TMA loads per tap)
                h(f"BXW = _kw_box_w(S{i}[1], S{i}[2], BM)")
                h("BXH = BM // BXW")
            warps, stages = cfg.num_warps, cfg.num_stages
        else:
            h("BK = 16")
            if cfull or st.src_cred:
                h(f"BN = _kw_npow2(CT{i})")
            else:
                h(f"BN = min(64, _kw_npow2(CT{i}))")
            h("BM = max(1, min(128, 4096 // BN))")
            if per_sample:
                h(f"BM = max(1, min(BM, _kw_npow2(S{i}[0] * S{i}[1] * S{i}[2])))")
            warps, stages = 4, 2
        # grid
        if plane:
            h(f"grid = (-(-R{i} // BH) * -(-S{i}[2] // BW), C{i}, N)")
            if st.sink in ("stats", "stats_only"):
                h(f"TT{i} = grid[0]")
                h(f"part{i} = torch.empty((N, TT{i}, 3, C{i}), device=x5.device, dtype=torch.float32)")
        elif conv and self.sp.phase:
            h(f"GP{i} = -(-OD // stride3[0]) * -(-OH // stride3[1]) * -(-OW // stride3[2])")
        else:
            h(f"GP{i} = S{i}[0] * S{i}[1] * S{i}[2]")
        if not plane:
            if box:
                h(f"TPS{i} = S{i}[0] * -(-S{i}[1] // BXH) * -(-S{i}[2] // BXW)")
                m_tiles = f"N * TPS{i}"
            else:
                m_tiles = f"N * -(-GP{i} // BM)" if per_sample else f"-(-(N * GP{i}) // BM)"
            groups = "groups" if conv and self.sp.gemm else "1"
            phases = "stride3[0] * stride3[1] * stride3[2]" if conv and self.sp.phase else "1"
            # a tile that walks every channel in chunks is one tile across them (conv_stages.channel_chunks)
            n_tiles = "1" if self.sp.channel_chunks(st) is not None else f"-(-CT{i} // BN)"
            if conv and not box and self.design in ("implicit_gemm", "implicit_gemm_flatk"):
                tiles = f"{m_tiles} * {n_tiles} * {groups}" + (f" * {phases}" if phases != "1" else "")
                self._fill_sms(h, tiles, cfull)
            h(f"num_m = {m_tiles}")
            h(f"grid = (num_m * {n_tiles}, {groups}, {phases})")
            if self.sp.window_split(st):
                host_window_split(h, i)
        if self.sp.persistent(st):
            # PERSIST programs per SM walk the tiles (at most one program per tile)
            h(f"progs{i} = min(grid[0], {cfg.PERSIST} * _num_sms(x5.device))")
            h(f"grid = (progs{i}, grid[1], grid[2])")
        if st.sink in ("stats", "stats_only") and not plane:
            h(f"TT{i} = {f'TPS{i}' if box else f'-(-GP{i} // BM)'} * grid[2]")
            h(f"part{i} = torch.empty((N, TT{i}, 3, C{i}), device=x5.device, dtype=torch.float32)")
        # launch
        a: list[str] = []
        if conv:
            a += ["xk", "wp", "*xk.stride()", "ID", "IH", "IW", self.cin_k, "OC_G", "KD", "KH", "KW",
                  "*stride3", "*pad3", "*dil3"]  # fmt: skip
            if self.design == "implicit_gemm" and self.spec.transposed:
                a += [f"stride3[{d}] // math.gcd(stride3[{d}], dil3[{d}])" for d in range(3)]
            if self.sp.w_tma:
                # a descriptor over the packed weight where the GPU, its rows and the K chunks allow
                # (wp: [groups, OC_G, taps, CIN_G], one K-contiguous row per output channel)
                h(f"wd{i} = None if {self.cin_k} % BK else _kw_tma(wp, wp.shape[0] * wp.shape[1], "
                  "wp.shape[2] * wp.shape[3], wp.shape[2] * wp.shape[3], 1, BN, BK)")  # fmt: skip
                a.insert(a.index("wp") + 1, f"wd{i} and wd{i}[0]")
            if box:
                # the input through a descriptor where the GPU, stride 1, the K chunks and its strides allow
                h(
                    f"xd{i} = _kw_tma_box(xk, BXH, BXW, BK) if stride3 == (1, 1, 1) and {self.cin_k} % BK == 0 "
                    "else None"
                )
                a.insert(a.index("xk") + 1, f"xd{i}")
        else:
            src = self.sp.stages[st.in_buf]
            a += [f"b{src.index}", f"*b{src.index}.stride()"]
        if st.norm is not None:
            a += [f"mean{i}", f"rstd{i}", f"smn{i}", f"CG{i}"]
        a += ["N", f"C{i}", f"CT{i}", f"*X{i}", f"*S{i}"]
        if st.pool is not None:
            a += [f"*pk{i}", f"*ps{i}", f"*pp{i}", f"*pd{i}", f"pdiv{i}"]
            if self.sp.window_split(st):
                a += [f"WCH{i}"]
        if st.sink != "stats_only":
            a += [f"b{i}", f"*so{i}"]
        if st.sink in ("stats", "stats_only"):
            a += [f"part{i}", f"TT{i}"]
        if st.sink == "sreduce":
            a += [f"red_scale{i}"]
        operand_ids = sorted({op.operand for op in st.ops if op.operand is not None})
        for o in operand_ids:
            operand = self.plan.operands[o]
            h(f"t{o} = {operand.expr}")
            if operand.kind == "scalar":
                a += [f"t{o}"]
            else:
                h(f"st{o} = _kw_ostrides(t{o}, {operand.align!r}, N, OC)")
                if operand.kind == "channel":
                    a += [f"t{o}", f"st{o}[1]"]
                else:
                    a += [f"t{o}", f"*st{o}"]
        for _name, expr in self.sp.const_args(st):
            a += [f"float({expr})"]
        if st.norm is not None:
            host_norm_stats(self, h, st)
        extra = ""
        if self.sp.pool_phase(st):
            extra = f"POOL_PHASE=all(ps{i}[d] % stride3[d] == 0 for d in range(3)), "
        if self.sp.persistent(st):
            a += [f"progs{i}"]
        if plane:
            extra = f"BLOCK_H=BH, BLOCK_W=BW, ONE_DEPTH=S{i}[0] == 1, "
            if conv and cfg.WORDS:
                # taps as words of two columns (32-bit for fp16/bf16, 64-bit for fp32): stride 1 along the
                # width, an even width, rows aligned to the word
                h(f"words{i} = xk.dtype in (torch.float16, torch.bfloat16, torch.float32) and stride3[2] == 1 "
                  "and IW % 2 == 0 and xk.stride(-1) == 1 and all(s % 2 == 0 for s in xk.stride()[:-1]) "
                  "and xk.data_ptr() % (2 * xk.element_size()) == 0")  # fmt: skip
                extra += f"WORDS=words{i}, "
        if self.sp.window_split(st):
            extra += "WSPLIT=grid[2] > 1, "
        if conv and self.sp.w_tma:
            extra += f"W_TMA=wd{i} is not None, "
        if box:
            extra += f"BOX_H=BXH, BOX_W=BXW, X_TMA=xd{i} is not None, "
        meta = (
            f"BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M={cfg.GROUP_M}, {extra}"
            f"num_warps={warps}, num_stages={stages},"
        )
        _wrapped_call(h, "_kw_launch", [f"_kw_stage{i}", "grid", *a], meta)


def host_window_split(h: Code, i: int) -> None:
    """Stage i's max-pool window positions split over grid axis 2 where its tiles are fewer than the SMs
    (conv_stages.window_split): up to WS programs a tile (a power of two, until there are two programs per
    SM), WCH positions each, combined by atomic max into the stage's buffer filled with -inf. (level2/21 on an
    H100: 84 tiles split 4 ways 0.61-0.71 ms against 1.32-1.94 unsplit; 256 tiles, which the rule before split
    2 ways, 1.51 against 1.31-1.34: past a wave the -inf fill and the atomics cost more than they fill.)"""
    h(f"PW{i} = pk{i}[0] * pk{i}[1] * pk{i}[2]")
    h(f"WS{i} = 1")
    h(f"SMS{i} = _num_sms(x5.device)")
    h(f"while WS{i} * 2 <= PW{i} and grid[0] * grid[1] < SMS{i} and grid[0] * grid[1] * WS{i} < 2 * SMS{i}:")
    with h.indent():
        h(f"WS{i} *= 2")
    h(f"WCH{i} = -(-PW{i} // WS{i})")
    h(f"grid = (grid[0], grid[1], -(-PW{i} // WCH{i}))")
    h("if grid[2] > 1:")
    with h.indent():
        h(f"b{i}.fill_(float('-inf'))")


def traced_tile(sp: StagedPlan, padded_k: bool, cfull: bool, lo: int) -> tuple[int, int, int] | None:
    """(BM, BN, BK) of the implicit GEMM's conv stage at the task's traced size, as the launcher computes them
    before any per-sample clamp; None where that size is not known. `padded_k`: K walks input channels padded
    to 16 (HostWriter.padded_k)."""
    full, cfg = sp.plan.full_spec, sp.cfg
    if full is None or full.groups < 1:
        return None
    ct = full.out_channels // full.groups
    cin = -(-full.in_per_group // 16) * 16 if padded_k else full.in_per_group
    bm, bk = cfg.BLOCK_M, fit_block(cin, cfg.BLOCK_K, 16, FIT_OVER_K)
    if cfull:
        bn = max(lo, _npow2(ct))
        while bm * bn > 16384 and bm > lo:
            bm //= 2
    elif sp.gemm:
        bn = fit_block(ct, cfg.BLOCK_N, lo, FIT_OVER_N)
    else:
        bn = max(lo, min(cfg.BLOCK_N, _npow2(ct)))
    return bm, bn, bk


def _npow2(v: int) -> int:
    """The launcher's _kw_npow2 at write time."""
    return 1 << max(0, (int(v) - 1).bit_length())


def _wrapped_call(h: Code, callee: str, args: list[str], tail: str) -> None:
    """`callee(` with the arguments packed into lines of about 96 characters, `tail` (the launch's
    keyword arguments) ending the last line, then `)`."""
    h(callee + "(")
    with h.indent():
        line = ""
        for piece in [p + ", " for p in args]:
            if len(line) + len(piece) > 96:
                h(line.rstrip())
                line = ""
            line += piece
        h((line + tail).rstrip())
    h(")")


def host_norm_stats(w: HostWriter, h: Code, st: Stage) -> None:
    """mean{i} and rstd{i} of stage i's normalisation, from the previous stage's partials."""
    i = st.index
    assert st.norm is not None
    # the statistics of the previous stage's value, combined
    prev = w.sp.stages[st.in_buf]
    norm = st.norm
    kind = norm.attrs["kind"]
    if kind == "group":
        h(f"G{i} = int({norm.attrs['groups']})")
    elif kind == "layer":
        h(f"G{i} = 1")
    else:
        h(f"G{i} = C{i}")
    h(f"CG{i} = C{i} // G{i}")
    per = kind != "batch"
    h(f"NB{i} = {'N' if per else '1'}")
    h(f"mean{i} = torch.empty((NB{i}, G{i}), device=x5.device, dtype=torch.float32)")
    h(f"rstd{i} = torch.empty((NB{i}, G{i}), device=x5.device, dtype=torch.float32)")
    h(f"smn{i} = {'G' + str(i) if per else '0'}")
    h(f"BC = min(64, _kw_npow2(CG{i}))")
    rows = f"TT{prev.index}" if per else f"N * TT{prev.index}"
    h(f"BT = max(1, min(2048 // BC, _kw_npow2({rows})))")

    def launch(update: str) -> str:
        return (
            f"_kw_launch(_kw_norm_stats, (NB{i} * G{i},), part{prev.index}, mean{i}, rstd{i}, TT{prev.index}, "
            f"C{i}, CG{i}, G{i}, N, float({norm.attrs['eps']}), {update}, PER_SAMPLE={per}, BLOCK_T=BT, "
            "BLOCK_C=BC)"
        )

    no_update = f"mean{i}, rstd{i}, mean{i}, 0.0, 1.0, UPDATE=False, HAS_NBT=False"
    bn = norm.attrs.get("running")
    if bn is None:
        h(launch(no_update))
        return
    # A BatchNorm with running statistics follows its module's mode, as PyTorch's does: in eval mode
    # the running statistics normalise; in train mode the batch statistics do, and the statistics
    # kernel also updates the running ones (a launch fewer: a depthwise stage's forward is host-bound).
    # A momentum of None (a cumulative average, 1 / batches counted) needs the count before every
    # channel's update: its own kernel after.
    assert not per, "running statistics are a batch norm's"
    update = (
        f"{bn}.running_mean, {bn}.running_var, mean{i} if nbt{i} is None else nbt{i}, "
        f"float({bn}.momentum), cnt{i} / max(cnt{i} - 1.0, 1.0), UPDATE=True, HAS_NBT=nbt{i} is not None"
    )
    h(f"if {bn}.training:")
    h(f"    cnt{i} = float(N * math.prod(S{prev.index}))")
    h(f"    if {bn}.momentum is not None:")
    h(f"        nbt{i} = {bn}.num_batches_tracked")
    h(f"        {launch(update)}")
    h("    else:")
    h(f"        {launch(no_update)}")
    h(f"        _kw_bn_running({bn}, mean{i}, rstd{i}, cnt{i})")
    h("else:")
    h(f"    mean{i}, rstd{i} = _kw_bn_eval_stats({bn}, C{i})")


def host_fold(w: HostWriter, h: Code, st: Stage) -> None:
    """Stage i as the fold kernel (plan.fold): the reduced buffer from the statistics partials."""
    i = st.index
    prev = w.sp.stages[st.in_buf]
    red = st.sreduce
    assert red is not None
    h(f"# stage {i}: statistics partials -> {red.attrs['fn']} of the normalised value (folded)")
    h(f"C{i} = OC")
    cb = "1" if w.plan.ops[st.value].cred else f"C{i}"
    h(f"b{i} = torch.empty((N, {cb}, 1, 1, 1), device=x5.device, dtype=torch.float32)")
    host_norm_stats(w, h, st)
    a = [f"part{prev.index}", f"TT{prev.index}", f"mean{i}", f"rstd{i}", f"smn{i}", f"CG{i}", "N", f"C{i}",
         f"b{i}", f"b{i}.stride(0)", f"b{i}.stride(1)"]  # fmt: skip
    for o in sorted({op.operand for op in st.ops if op.operand is not None}):
        operand = w.plan.operands[o]
        h(f"t{o} = {operand.expr}")
        if operand.kind == "scalar":
            a += [f"t{o}"]
        else:
            h(f"st{o} = _kw_ostrides(t{o}, {operand.align!r}, N, OC)")
            a += [f"t{o}", f"st{o}[1]"]
    a += [f"float({expr})" for _name, expr in w.sp.const_args(st)]
    h(f"BN = _kw_npow2(C{i})")
    h(f"BT = max(1, min(max(1, 4096 // BN), _kw_npow2(TT{prev.index})))")
    _wrapped_call(h, "_kw_launch", [f"_kw_stage{i}", "(N,)", *a], "BLOCK_T=BT, BLOCK_N=BN, num_warps=4,")
