"""The Python launcher of a row kernel: shapes and strides per group, outputs, block sizes and grid.

Written once per kernel; for the split design it also allocates the partial and per-row buffers and
launches the partial, combine and apply kernels in order. Functions of a `RowKernelGen`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from kernelwright.providers.offline.emit.emit import Code, sizes_product
from kernelwright.providers.offline.emit.emit_rows_split import partial_buffers, split_sizes, with_merged
from kernelwright.providers.offline.frontend.ir import SymScalar, Value, broadcast_shapes, is_one, simplified
from kernelwright.providers.offline.kinds.kernel_plan import RowPlanError
from kernelwright.providers.offline.kinds.row_plan import auto_warps_expr

if TYPE_CHECKING:
    from kernelwright.providers.offline.emit.emit_rows import RowKernelGen


def launcher_source(
    gen: RowKernelGen, name: str, symmap: dict[sympy.Symbol, str]
) -> tuple[str, list[Value], list[SymScalar]]:
    """Python launcher; returns (source, tensor arguments in order, runtime scalars in order)."""
    cfg = gen.cfg
    c = Code()
    tensors = [ld.value for ld in gen.loads.values()] + list(gen.shape_only.values())
    tnames = [ld.name for ld in gen.loads.values()] + [f"shp{i}" for i in range(len(gen.shape_only))]
    snames = [n for n, _ in gen.syms.values()]

    gen.shape_arg = None
    bshape0 = broadcast_shapes(*(t.shape for t in tensors)) if tensors else ()
    needs_shape = not (
        len(bshape0) == gen.rank and all(simplified(a - b) == 0 for a, b in zip(bshape0, gen.S, strict=True))
    )
    c(f"def _launch_{name}({', '.join(tnames + snames + (['shape'] if needs_shape else []))}):")
    with c.indent():
        bshape = broadcast_shapes(*(t.shape for t in tensors)) if tensors else ()
        exact = len(bshape) == gen.rank and all(
            simplified(a - b) == 0 for a, b in zip(bshape, gen.S, strict=True)
        )
        if exact:
            c(f"shape = _bshapes({', '.join(f'{n}.shape' for n in tnames)})")
        else:
            # The tensors read do not span the space (a broadcast constant): the forward passes it.
            gen.shape_arg = tuple(gen.S)
        dev = tnames[0] if tnames else None
        if dev is None:
            raise RowPlanError("a row kernel with no tensor input")
        groups = [dims for _, dims in gen.groups]
        c(f"groups = {groups!r}")
        for gi, dims in enumerate(groups):
            c(f"G{gi} = {sizes_product([dims])}")
        c(f"NK = {sizes_product([groups[gi] for gi in gen.kept])}")
        c(f"NR = {sizes_product([groups[gi] for gi in gen.red])}")
        if gen.layout == "cols":
            c(f"NI = {sizes_product([groups[gi] for gi in gen.inner])}")
        args = list(tnames[: len(gen.loads)])
        for ld in gen.loads.values():
            c(f"{ld.name}, st = _group_strides({ld.name}, shape, groups)")
            for gi in ld.groups:
                c(f"{ld.name}_s{gi} = st[{gi}]")
        outs = []
        for i, v in enumerate(gen.k.outputs):
            oshape = out_shape(gen, v)
            c(f"out{i} = torch.empty({oshape}, device={dev}.device, dtype={gen.s.store_dtype(v)})")
            outs.append(f"out{i}")
        size_args = (
            ["NK", "NR"] + (["NI"] if gen.layout == "cols" else []) + [f"G{gi}" for gi in range(len(groups))]
        )
        stride_args = [s for ld in gen.loads.values() for s in gen.load_strides(ld)]
        if cfg.mode == "split":
            launch_split(gen, c, args, outs, snames, stride_args)
        else:
            for v in gen.full_outputs:
                i = gen.k.outputs.index(v)
                c(f"_, st = _group_strides(out{i}, shape, groups)")
                stride_args += [f"st[{gi}]" for gi in range(len(groups))]
            launch_plain(gen, c, args + outs + snames + size_args + stride_args)
        ret = ", ".join(outs)
        c(f"return {ret}," if len(outs) == 1 else f"return {ret}")
    return c.text(), tensors, [s for _, s in gen.syms.values()]


def out_shape(gen: RowKernelGen, v: Value) -> str:
    """The launcher's expression for output `v`'s shape."""
    if gen.vclass(v) == "full":
        return "shape"
    # A per-row value: its dims are the kept dims in order, with size-1 dims where it has them.
    kept_dims = [d for d in range(gen.rank) if d not in gen.D]
    parts = []
    ki = 0
    nz_kept = [d for d in kept_dims if not is_one(gen.S[d])]
    for dim in v.shape:
        if is_one(dim):
            parts.append("1")
            continue
        while ki < len(nz_kept) and simplified(gen.S[nz_kept[ki]] - dim) != 0:
            ki += 1
        if ki >= len(nz_kept):
            raise RowPlanError(f"cannot place per-row output dims {v.shape} in {gen.S}")
        parts.append(f"shape[{nz_kept[ki]}]")
        ki += 1
    return "(" + "".join(p + ", " for p in parts) + ")"


def launch_plain(gen: RowKernelGen, c: Code, args: list[str]) -> None:
    """Block sizes, grid and warps for one kernel over the rows (every design but split), then the launch."""
    cfg = gen.cfg
    c("npow = _np2(max(NR, 1))")
    if gen.layout == "rows":
        if cfg.mode == "registers":
            full = f" and (npow <= {cfg.RFULL} or 4 * NR >= 3 * npow)" if cfg.RFULL else ""  # mostly padding
            c(f"single = npow <= {cfg.RMAX}{full}")
            c(f"BLOCK_R = npow if single else {cfg.BLOCK_R}")
            c(f"BLOCK_M = min(max(1, {cfg.TILE} // BLOCK_R), _np2(max(NK, 1))) if single else 1")
        else:
            c(f"BLOCK_R = min({cfg.BLOCK_R}, npow)")
            c(f"BLOCK_M = min({cfg.BLOCK_M}, _np2(max(NK, 1)))")
        if cfg.mode == "registers" and cfg.PERSIST:
            c(f"grid = (max(1, min(_cdiv(NK, BLOCK_M), {cfg.PERSIST} * _num_sms({args[0]}.device))),)")
        else:
            c("grid = (_cdiv(NK, BLOCK_M),)")
        tile = "BLOCK_M * BLOCK_R"
        meta = "BLOCK_M=BLOCK_M, BLOCK_R=BLOCK_R"
    else:
        c(f"BLOCK_I = min({cfg.BLOCK_I}, _np2(max(NI, 1)))")
        # One program per BLOCK_I kept columns walks the whole reduced dim: narrower column blocks where
        # fewer than three programs per SM would run. On an H200, argmax over the middle dim searched at
        # 128 x 4096 x 256 (BLOCK_I 64: 512 programs, 0.145 ms; 128: 256 programs, 0.140) ran at
        # 95 x 3071 x 191 in 0.403 ms with 128 (190 programs), 0.221 with 64, 0.119 with 32 (eager 0.127).
        c(f"while BLOCK_I > 16 and (NK // max(NI, 1)) * _cdiv(NI, BLOCK_I) < 3 * _num_sms({args[0]}.device):")
        c("    BLOCK_I //= 2")
        if cfg.mode == "registers":
            c(f"single = npow * BLOCK_I <= {cfg.TILE * 2}")
            # Not single: the reduced dim is walked in [BLOCK_R, BLOCK_I] tiles of at most TILE elements.
            # BLOCK_R alone (1024 x 128 columns) made a register tile of 131072 elements that took
            # Triton 191 s to compile for an H200 and then ran at 0.07x eager.
            c(f"BLOCK_R = npow if single else max(1, min({cfg.BLOCK_R}, {cfg.TILE} // BLOCK_I))")
        else:
            c(f"BLOCK_R = min({cfg.BLOCK_R}, npow)")
        c("grid = ((NK // max(NI, 1)) * _cdiv(NI, BLOCK_I),)")
        tile = "BLOCK_R * BLOCK_I"
        meta = "BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I"
    if cfg.mode == "registers":
        meta += ", SINGLE=single"
    if cfg.num_warps:
        c(f"num_warps = {cfg.num_warps}")
    elif cfg.mode == "registers" and gen.layout == "rows" and cfg.FALLBACK_WARPS:
        c(f"num_warps = ({auto_warps_expr(tile)}) if single else {cfg.FALLBACK_WARPS}")
    else:
        c(f"num_warps = {auto_warps_expr(tile)}")
    c(f"_kw_launch({gen.kname}, grid,")
    with c.indent():
        c(", ".join(args) + ",")
        c(f"{meta}, num_warps=num_warps, num_stages={cfg.num_stages},")
    c(")")


def launch_split(
    gen: RowKernelGen, c: Code, args: list[str], outs: list[str], snames: list[str], strides: list[str]
) -> None:
    """The split design's buffers and its partial, combine and apply launches, level by level."""
    cfg = gen.cfg
    dev = args[0]
    c(f"BLOCK_R = min({cfg.BLOCK_R}, _np2(max(NR, 1)))")
    if gen.layout == "rows":
        c(f"BLOCK_M = min({cfg.BLOCK_M}, _np2(max(NK, 1)))")
        c("blocks = _cdiv(NK, BLOCK_M)")
        meta = "BLOCK_M=BLOCK_M, BLOCK_R=BLOCK_R"
    else:
        c(f"BLOCK_I = min({cfg.BLOCK_I}, _np2(max(NI, 1)))")
        c("blocks = (NK // max(NI, 1)) * _cdiv(NI, BLOCK_I)")
        meta = "BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I"
    c("nchunks = _cdiv(NR, BLOCK_R)")
    c(f"want = max(1, {cfg.WAVES} * _num_sms({dev}.device) // blocks)")
    c("CHUNKS = _cdiv(nchunks, max(1, min(nchunks, want, 2048)))")
    c("SPLIT = _cdiv(nchunks, CHUNKS)")
    c("BLOCK_S = _np2(SPLIT)")
    c("BLOCK_MC = max(1, min(_np2(max(NK, 1)), 4096 // BLOCK_S))")
    levels, welford = gen.split_passes(bool(cfg.MERGE))
    sbufs = []
    for group in levels:
        for st in with_merged(group, welford):
            dt = (
                "torch.int64"
                if st.op in ("argmax", "argmin") or gen._acc_dtype(st) == "tl.int64"
                else "torch.float32"
            )
            if st.op in ("any", "all"):
                dt = "torch.bool"
            sbufs.append(f"sb{st.id}")
            c(f"sb{st.id} = torch.empty((NK,), device={dev}.device, dtype={dt})")
    sizes = [f"G{gi}" for gi in range(len(gen.groups))]
    loads = args[: len(gen.loads)]
    row_outs = [o for o, v in zip(outs, gen.k.outputs, strict=True) if v in gen.row_outputs]
    warps = cfg.num_warps or 8
    for li, group in enumerate(levels):
        parts = []
        for st in group:
            dt = "torch.float32" if gen._acc_dtype(st) == "tl.float32" else "torch.int64"
            if st.op in ("any", "all"):
                dt = "torch.int32"
            for i, buf in enumerate(partial_buffers(st, welford)):
                parts.append(buf)
                bdt = dt if i == 0 or st.id in welford else "torch.int64"  # an argmax's index: int64
                c(f"{buf} = torch.empty((NK, SPLIT), device={dev}.device, dtype={bdt})")
        c(f"_kw_launch({gen.kname}_p{li}, (blocks, SPLIT),")
        with c.indent():
            args_p = loads + sbufs + parts + snames + split_sizes(gen) + ["SPLIT", "CHUNKS"] + sizes + strides
            c(", ".join(args_p) + ",")
            c(f"{meta}, num_warps={warps}, num_stages={cfg.num_stages},")
        c(")")
        last = li == len(levels) - 1
        c(f"_kw_launch({gen.kname}_c{li}, (_cdiv(NK, BLOCK_MC),),")
        with c.indent():
            c(", ".join(loads + sbufs + parts + (row_outs if last else []) + snames + ["NK", "NR", "SPLIT"] + sizes
                        + strides) + ",")  # fmt: skip
            c("BLOCK_M=BLOCK_MC, BLOCK_S=BLOCK_S, num_warps=4,")
        c(")")
    if gen.full_outputs:
        full_outs = []
        ostrides = []
        for o, v in zip(outs, gen.k.outputs, strict=True):
            if v in gen.full_outputs:
                full_outs.append(o)
                c(f"_, st{o} = _group_strides({o}, shape, groups)")
                ostrides += [f"st{o}[{gi}]" for gi in range(len(gen.groups))]
        split, chunks = "SPLIT", "CHUNKS"
        if cfg.WRITE_CHUNKS:
            # The write pass in short programs of its own (a grid's second axis holds at most 65535)
            split, chunks = "SPLIT_W", "CHUNKS_W"
            c(f"CHUNKS_W = max({cfg.WRITE_CHUNKS}, _cdiv(nchunks, 65535))")
            c("SPLIT_W = _cdiv(nchunks, CHUNKS_W)")
        c(f"_kw_launch({gen.kname}_apply, (blocks, {split}),")
        with c.indent():
            args_a = loads + sbufs + full_outs + snames + split_sizes(gen) + [split, chunks] + sizes
            c(", ".join(args_a + strides + ostrides) + ",")
            c(f"{meta}, num_warps={warps}, num_stages={cfg.num_stages},")
        c(")")
