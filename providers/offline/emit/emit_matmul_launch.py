"""The Python launcher of a matmul kernel: operand shapes and strides, outputs, the grid and the TMA or
Gluon twin's launch where the config asks for one. A function of a `MatmulGen` (emit_matmul.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from kernelwright.providers.offline.emit.emit import Code, sizes_product
from kernelwright.providers.offline.frontend.ir import SymScalar, Value

if TYPE_CHECKING:
    from kernelwright.providers.offline.emit.emit_matmul import MatmulGen


def launcher_source(
    gen: MatmulGen, name: str, symmap: dict[sympy.Symbol, str]
) -> tuple[str, list[Value], list[SymScalar]]:
    cfg = gen.cfg
    c = Code()
    tensors = [gen.A, *gen.Bs] + [ld.value for ld in gen.loads.values()]
    loads = [ld.name for ld in gen.loads.values()]
    snames = [n for n, _ in gen.syms.values()]
    bs = list(gen.bp)
    c(f"def _launch_{name}({', '.join(['a', *bs] + loads + snames)}):")
    with c.indent():
        if cfg.KMAJOR:
            # TF32 tensor-core MMAs read both operands K-major: one transpose copy of an operand
            # that is not K-contiguous (a row-major B) costs far less than the slow MMA path.
            c("if a.stride(-1) != 1 and a.shape[-1] > 1:")
            c("    a = a.mT.contiguous().mT")
            gen.ctx.use("_kw_kmajor")  # B's copy padded too: at an odd K an aligning copy would follow
            for p in bs:
                c(f"{p} = _kw_kmajor({p})")
        if cfg.ALIGN:
            # unaligned rows (an odd K or N) keep every tile load scalar: one aligned copy instead
            gen.ctx.use("_kw_align")
            for x in ["a", *bs]:
                c(f"{x} = _kw_align({x})")
        c("batch = tuple(_bshapes(a.shape[:-2], b.shape[:-2]))")
        c("shape = batch + (a.shape[-2], b.shape[-1])")
        c("K, N = a.shape[-1], b.shape[-1]")
        groups = [dims for _, dims in gen.groups]
        c(f"groups = {groups!r}")
        for gi, dims in enumerate(groups):
            c(f"G{gi} = {sizes_product([dims])}")
        c(f"M = {sizes_product([groups[gi] for gi in gen.mg])}")
        c(f"NB = {sizes_product([groups[gi] for gi in gen.bg])}")
        r = gen.rank
        a_groups = [groups[gi] for gi in gen.a_groups] + [[r - 1]]
        b_groups = [groups[gi] for gi in gen.b_groups] + [[r - 2], [r - 1]]
        c(f"a, sa = _group_strides(a, batch + (a.shape[-2], K), {a_groups!r})")
        ab = [f"sa[{i}]" for i in range(len(a_groups))]
        for p in bs:
            c(f"{p}, s{p} = _group_strides({p}, batch + (K, N), {b_groups!r})")
            ab += [f"s{p}[{i}]" for i in range(len(b_groups))]
        ep = []
        for ld in gen.loads.values():
            c(f"{ld.name}, st{ld.name} = _group_strides({ld.name}, shape, groups)")
            ep += [f"st{ld.name}[{gi}]" for gi in ld.groups]
        outs = []
        for i, v in enumerate(gen.k.outputs):
            c(f"out{i} = torch.empty(shape, device=a.device, dtype={gen.s.store_dtype(v)})")
            c(f"_, stout{i} = _group_strides(out{i}, shape, groups)")
            ep += [f"stout{i}[{gi}]" for gi in range(len(groups))]
            outs.append(f"out{i}")
        ret = f"return {outs[0]}," if len(outs) == 1 else f"return {', '.join(outs)}"
        sizes = ["M", "N", "K", "NB", "WN"] + [f"G{gi}" for gi in range(len(groups))]
        gen.ctx.use("_kw_wrap")
        c(f"WN = min(_kw_wrap(N, x) for x in ({', '.join(bs)},))")
        c(f"BLOCK_M = min({cfg.BLOCK_M}, max(16, _np2(M)))")
        c(f"BLOCK_N = min({cfg.BLOCK_N}, max(16, _np2(N)))")
        if cfg.PREC == "tf32x3" and cfg.BLOCK_K > 32:
            # Sizes that are not multiples of 16 (at run time: a size other than the traced one) make
            # the 3xTF32 kernel spill with 64-wide K steps: compiled for an H200 at 6143^2, 788 B per thread
            # (255 registers), none with 32-wide (251); at 6143^2 it ran 9.4 ms where 8192^2 took 11.9.
            # kind_matmul picks 32 for traced sizes like these (published/24: 4.16 ms).
            c(f"BLOCK_K = min({cfg.BLOCK_K} if M % 16 == 0 and N % 16 == 0 and K % 16 == 0 else 32, "
              "max(16, _np2(K)))")  # fmt: skip
        else:
            c(f"BLOCK_K = min({cfg.BLOCK_K}, max(16, _np2(K)))")
        c("tiles = _cdiv(M, BLOCK_M) * _cdiv(N, BLOCK_N) * NB")
        meta = (
            f"BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M={cfg.GROUP_M}, "
            "HINT_M=M % 16 == 0, HINT_N=WN % 16 == 0"
        )
        launch = f"num_warps={cfg.num_warps}, num_stages={cfg.num_stages}"
        if cfg.mode == "split_k":
            c(f"SPLIT_K = max(1, min({cfg.SPLIT_K}, _cdiv(K, BLOCK_K)))")
            c("ws = torch.empty((SPLIT_K, NB, M, N), device=a.device, dtype=torch.float32)")
            c(f"_kw_launch({name}_partial, (tiles, SPLIT_K),")
            with c.indent():
                c(", ".join(["a", "b", "ws"] + sizes + ab) + ",")
                c(f"{meta}, SPLIT_K=SPLIT_K, {launch},")
            c(")")
            c(f"_kw_launch({name}_reduce, (tiles,),")
            with c.indent():
                c(", ".join(loads + ["ws"] + outs + snames + sizes + ep) + ",")
                c(f"{meta}, SPLIT_K=SPLIT_K, num_warps=4,")
            c(")")
        else:
            grid = "tiles"
            if cfg.mode == "persistent":
                per_sm = "" if int(cfg.PER_SM) <= 1 else f"{int(cfg.PER_SM)} * "
                c(f"NUM_PROGS = max(1, min(tiles, {per_sm}_num_sms(a.device)))")
                meta += ", NUM_PROGS=NUM_PROGS"
                grid = "NUM_PROGS"
            if gen.ws_kernel():
                # Hopper's warp-specialized GEMM (Gluon) where the device and the layouts allow
                gen.ctx.use("_kw_ws_gemm")
                args = f"{cfg.GROUP_M}, {int(cfg.WS)}, {int(cfg.WS_COOP)}"
                c(f"if _kw_ws_gemm(a, sa, b, sb, out0, M, N, K, NB, {args}):")
                c(f"    {ret}")
            if gen.tma_twin():
                # tensor descriptors where the device and both operands' layouts allow
                i = 1 if gen.bg else 0  # sa / sb: [batch,] rows, cols
                nb = ", NB, sa[0]" if gen.bg else ""
                c(f"td = [_kw_tma(a, M, K, sa[{i}], sa[{i + 1}], BLOCK_M, BLOCK_K{nb})]")
                for p in bs:
                    nb = f", NB, s{p}[0]" if gen.bg else ""
                    c(f"td.append(_kw_tma({p}, K, N, s{p}[{i}], s{p}[{i + 1}], BLOCK_K, BLOCK_N{nb}))")
                c("if all(d is not None for d in td):")
                with c.indent():
                    flags = ", ".join(f"{x.upper()}_T=td[{i}][1]" for i, x in enumerate(["a", *bs]))
                    c(f"_kw_launch({name}_tma, ({grid},),")
                    with c.indent():
                        descs = [f"td[{i}][0]" for i in range(1 + len(bs))]
                        c(", ".join(descs + loads + outs + snames + sizes + ep) + ",")
                        c(f"{meta}, {flags}, {launch},")
                    c(")")
                    c(ret)
            c(f"_kw_launch({name}, ({grid},),")
            with c.indent():
                c(", ".join(["a", *bs] + loads + outs + snames + sizes + ab + ep) + ",")
                c(f"{meta}, {launch},")
            c(")")
        c(ret)
    return c.text(), tensors, [s for _, s in gen.syms.values()]
