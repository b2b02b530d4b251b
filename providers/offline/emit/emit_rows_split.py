"""The split row design: few long rows split over many programs.

Kernels `{name}_p{l}` write each program's partial statistics of pass l, `{name}_c{l}` combine a row's
partials into a per-row buffer, and `{name}_apply` writes the per-element outputs from those buffers.
A pass holds one level of statistics; with `MERGE` (the default) a variance around a mean is computed in
the mean's pass: each program keeps Welford accumulators per lane and writes (mean, sum of squared
deviations, count) partials, which the combine kernel merges with Chan's formula. A norm then reads its
input twice (statistics, then the write) instead of three times. Functions of a `RowKernelGen`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelwright.providers.offline.emit.emit import Code, Operand
from kernelwright.providers.offline.emit.emit_rows_looped import (
    row_prereqs,
    welford_init,
    welford_lanes,
    welford_step,
)
from kernelwright.providers.offline.frontend.ir import Value

if TYPE_CHECKING:
    from kernelwright.providers.offline.emit.emit_rows import RowKernelGen


def split_sources(gen: RowKernelGen, name: str) -> str:
    """Kernels `{name}_p{l}` (partials of level l), `{name}_c{l}` (combine), `{name}_apply` (write)."""
    gen.out_names = {v.id: f"out{i}" for i, v in enumerate(gen.k.outputs)}
    levels, welford = gen.split_passes(bool(gen.cfg.MERGE))
    done = [with_merged(group, welford) for group in levels]  # the statistics each pass finishes
    all_stats = [st for group in done for st in group]
    sbufs = [f"sb{st.id}" for st in all_stats]
    loads = [ld.name for ld in gen.loads.values()]
    syms = [n for n, _ in gen.syms.values()]
    sizes = [gen.gname(gi) for gi in range(len(gen.groups))]
    strides = [x for ld in gen.loads.values() for x in gen.load_strides(ld)]
    c = Code()
    for li, group in enumerate(levels):
        parts = [x for st in group for x in partial_buffers(st, welford)]
        # Partials of this level: each program reduces CHUNKS chunks of its rows.
        c.jit_def(f"{name}_p{li}", loads + sbufs + parts + syms + split_sizes(gen) + ["SPLIT", "CHUNKS"]
                           + sizes + strides + split_meta(gen))  # fmt: skip
        with c.indent():
            gen.stat_names = {}
            gen.row_memo = {}
            gen.single = False
            gen.evict = None
            gen.stat_buffers = {st.id for g in done[:li] for st in g}
            (gen.header_rows if gen.layout == "rows" else gen.header_cols)(c)
            c("ps = tl.program_id(1)")
            row_prereqs(gen, c, group)
            tile = "[BLOCK_M, BLOCK_R]" if gen.layout == "rows" else "[BLOCK_R, BLOCK_I]"
            ax = gen.AX
            for st in group:
                if st.id in welford:
                    welford_init(c, st, tile)
                    continue
                c(f"a{st.id} = tl.full({tile}, {gen._neutral(st)}, {gen._acc_dtype(st)})")
                if st.op in ("argmax", "argmin"):
                    c(f"i{st.id} = tl.zeros({tile}, dtype=tl.int32)")
            c("for ci in range(0, CHUNKS):")
            with c.indent():
                gen.after_chunk = []
                gen.chunk_setup(c, "(ps * CHUNKS + ci) * BLOCK_R")
                gen.full_memo = {}
                for st in group:
                    if st.id in welford:
                        welford_step(gen, c, st, "ci")
                    else:
                        accumulate(gen, c, st)
            rid, rmask = gen.rowid, gen.rowmask
            for st in group:
                a = f"a{st.id}"
                if st.id in welford:
                    welford_lanes(gen, c, st, ax)
                    for buf, acc in zip(partial_buffers(st, welford), ("wm", "wv", "wn"), strict=True):
                        c(f"tl.store({buf} + {rid} * SPLIT + ps, {acc}{st.id}, mask={rmask})")
                    continue
                if st.op in ("argmax", "argmin"):
                    red = "tl.max" if st.op == "argmax" else "tl.min"
                    big = "2147483647"
                    c(f"b{st.id} = {red}({a}, axis={ax}, keep_dims=True)")
                    c(
                        f"j{st.id} = tl.min(tl.where({a} == b{st.id}, i{st.id}, {big}), axis={ax}, keep_dims=True)"
                    )
                    c(f"tl.store(p{st.id} + {rid} * SPLIT + ps, b{st.id}, mask={rmask})")
                    c(f"tl.store(pi{st.id} + {rid} * SPLIT + ps, j{st.id}.to(tl.int64), mask={rmask})")
                else:
                    op = "sum" if st.op == "mean" else st.op
                    c(f"tl.store(p{st.id} + {rid} * SPLIT + ps, {gen._reduce_text(op, a, ax)}, mask={rmask})")
        c()
        # Combine: one program per BLOCK_M rows reads every partial of its rows.
        last = li == len(levels) - 1
        outs = [gen.out_names[v.id] for v in gen.row_outputs] if last else []
        c.jit_def(f"{name}_c{li}", loads + sbufs + parts + outs + syms + ["NK", "NR", "SPLIT"] + sizes
                           + strides + ["BLOCK_M: tl.constexpr", "BLOCK_S: tl.constexpr"])  # fmt: skip
        with c.indent():
            gen.stat_names = {}
            gen.row_memo = {}
            gen.stat_buffers = {st.id for g in done[:li] for st in g}
            # Partials are stored per flattened kept index, whatever the layout: combine walks rows.
            layout, gen.layout = gen.layout, "rows"
            gen.header_rows(c)
            c("sp = tl.arange(0, BLOCK_S)[None, :]")
            c("pmask = kmask & (sp < SPLIT)")
            for st in group:
                if st.id in welford:
                    combine_welford(gen, c, st, welford[st.id])
                    continue
                neutral = gen._neutral(st) if st.op != "mean" else "0.0"
                c(f"q{st.id} = tl.load(p{st.id} + rk * SPLIT + sp, mask=pmask, other={neutral})")
                if st.op in ("argmax", "argmin"):
                    red = "tl.max" if st.op == "argmax" else "tl.min"
                    big = "9223372036854775807"
                    c(f"qi{st.id} = tl.load(pi{st.id} + rk * SPLIT + sp, mask=pmask, other={big})")
                    c(f"b{st.id} = {red}(q{st.id}, axis=1, keep_dims=True)")
                    c(
                        f"s{st.id} = tl.min(tl.where(q{st.id} == b{st.id}, qi{st.id}, {big}), axis=1, keep_dims=True)"
                    )
                    gen.stat_names[st.id] = Operand(f"s{st.id}", "i")
                else:
                    op = "sum" if st.op == "mean" else st.op
                    gen._finish_stat(c, st, gen._reduce_text(op, f"q{st.id}", 1))
                c(f"tl.store(sb{st.id} + rk, s{st.id}, mask=kmask)")
            if last:
                for v in gen.row_outputs:
                    gen.store_row(c, v)
            gen.layout = layout
        c()
    if gen.full_outputs:
        outs = [gen.out_names[v.id] for v in gen.full_outputs]
        ostrides = [f"{o}_s{gi}" for o in outs for gi in range(len(gen.groups))]
        c.jit_def(f"{name}_apply", loads + sbufs + outs + syms + split_sizes(gen) + ["SPLIT", "CHUNKS"]
                           + sizes + strides + ostrides + split_meta(gen))  # fmt: skip
        with c.indent():
            gen.stat_names = {}
            gen.row_memo = {}
            gen.stat_buffers = {st.id for st in all_stats}
            gen.evict = None
            (gen.header_rows if gen.layout == "rows" else gen.header_cols)(c)
            c("ps = tl.program_id(1)")
            row_prereqs(gen, c, gen.full_outputs)
            c("for ci in range(0, CHUNKS):")
            with c.indent():
                gen.after_chunk = []
                gen.chunk_setup(c, "(ps * CHUNKS + ci) * BLOCK_R")
                gen.full_memo = {}
                for v in gen.full_outputs:
                    gen.store_full(c, v, gen.full_memo)
    gen.stat_buffers = set()
    return c.text()


def split_sizes(gen: RowKernelGen) -> list[str]:
    """The size parameters of the split kernels."""
    return ["NK", "NR"] + (["NI"] if gen.layout == "cols" else [])


def split_meta(gen: RowKernelGen) -> list[str]:
    """The block-size meta-parameters of the split kernels (by layout)."""
    if gen.layout == "rows":
        return ["BLOCK_M: tl.constexpr", "BLOCK_R: tl.constexpr"]
    return ["BLOCK_R: tl.constexpr", "BLOCK_I: tl.constexpr"]


def accumulate(gen: RowKernelGen, c: Code, st: Value) -> None:
    """Fold this chunk's masked values into statistic `st`'s tile accumulator."""
    m = gen._masked(c, st, gen.full_memo)
    a = f"a{st.id}"
    if st.op in ("sum", "mean"):
        c(f"{a} = {a} + {m}")
    elif st.op in ("max", "any"):
        c(f"{a} = tl.maximum({a}, {m})")
    elif st.op in ("min", "all"):
        c(f"{a} = tl.minimum({a}, {m})")
    elif st.op == "prod":
        c(f"{a} = {a} * {m}")
    else:
        cmp = ">" if st.op == "argmax" else "<"
        c(f"upd = {m} {cmp} {a}")
        c(f"{a} = tl.where(upd, {m}, {a})")
        c(f"i{st.id} = tl.where(upd, rr, i{st.id})")


def with_merged(group: list[Value], welford: dict[int, list[Value]]) -> list[Value]:
    """A pass's statistics followed by the variances merged into it."""
    return group + [d for st in group for d in welford.get(st.id, [])]


def partial_buffers(st: Value, welford: dict[int, list[Value]]) -> list[str]:
    """The (NK, SPLIT) partial buffers of statistic `st`: its value; an argmax's index; a Welford mean's
    sum of squared deviations and count."""
    if st.id in welford:
        return [f"p{st.id}", f"pm{st.id}", f"pn{st.id}"]
    return [f"p{st.id}"] + ([f"pi{st.id}"] if st.op in ("argmax", "argmin") else [])


def combine_welford(gen: RowKernelGen, c: Code, st: Value, merged: list[Value]) -> None:
    """Merge a row's Welford partials (Chan): mean `st` and the variances `merged` into it, each named
    and stored in its per-row buffer."""
    p, pm, pn = (f"{b} + rk * SPLIT + sp" for b in partial_buffers(st, {st.id: merged}))
    c(f"qm{st.id} = tl.load({p}, mask=pmask, other=0.0)")
    c(f"qv{st.id} = tl.load({pm}, mask=pmask, other=0.0)")
    c(f"qn{st.id} = tl.load({pn}, mask=pmask, other=0.0)")
    combine = gen.ctx.use("_kw_welford_combine")
    # each partial's mean is its own pivot (about which its mean is 0)
    c(f"qz{st.id} = tl.zeros_like(qm{st.id})")
    c(
        f"s{st.id}, mz{st.id}, mv{st.id}, n{st.id} = "
        f"tl.reduce((qm{st.id}, qz{st.id}, qv{st.id}, qn{st.id}), 1, {combine}, keep_dims=True)"
    )
    c(f"s{st.id} = s{st.id} + mz{st.id}")
    gen.stat_names[st.id] = Operand(f"s{st.id}", "f")
    c(f"tl.store(sb{st.id} + rk, s{st.id}, mask=kmask)")
    for d in merged:
        c(f"s{d.id} = mv{st.id}" + (" / NR" if d.op == "mean" else ""))
        gen.stat_names[d.id] = Operand(f"s{d.id}", "f")
        c(f"tl.store(sb{d.id} + rk, s{d.id}, mask=kmask)")
