"""The looped and online row designs: one pass over the row per level of statistics, then a writing pass.

Accumulators are tiles ([BLOCK_M, BLOCK_R] or [BLOCK_R, BLOCK_I]) reduced once after the loop. In the
online design dependent statistics are merged into one pass (online softmax: a running max and a
rescaled sum of exp; Welford per lane for mean and variance, lanes combined with Chan's formula).
Functions of a `RowKernelGen`, whose state (names of finished statistics, memos) they extend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelwright.providers.offline.emit.emit import Code, Operand, as_float
from kernelwright.providers.offline.frontend.ir import Value

if TYPE_CHECKING:
    from kernelwright.providers.offline.emit.emit_rows import RowKernelGen


def looped_body(gen: RowKernelGen, c: Code, online: bool) -> None:
    """One pass per level of statistics (levels merged where `online`), then the writing pass."""
    gen.single = False
    merges = gen.merges() if online else {}
    merged_into: dict[int, list[tuple[Value, str, Value | None]]] = {}
    for sid, (kind, base, extra) in merges.items():
        merged_into.setdefault(base.id, []).append((next(s for s in gen.stats if s.id == sid), kind, extra))
    skip = set(merges)
    levels = sorted({gen.level[s.id] for s in gen.stats if s.op != "numel" and s.id not in skip})
    for lv in levels:
        group = [s for s in gen.stats if gen.level[s.id] == lv and s.op != "numel" and s.id not in skip]
        stat_pass(gen, c, group, merged_into)
    # The writing pass: the last read of each element.
    gen.evict = "evict_first" if gen.cfg.EVICT else None
    if gen.full_outputs:
        row_prereqs(gen, c, gen.full_outputs)
        gen.carries = {}
        for v in scans_needed(gen, gen.full_outputs):
            gen.carries[v.id] = f"carry{v.id}"
            neutral = "1.0" if v.op == "cumprod" else "0.0"
            shape = "[BLOCK_M, 1]" if gen.layout == "rows" else "[1, BLOCK_I]"
            c(f"carry{v.id} = tl.full({shape}, {neutral}, tl.float32)")
        c("for rbase in range(0, NR, BLOCK_R):")
        with c.indent():
            gen.after_chunk = []
            gen.chunk_setup(c, "rbase")
            memo: dict[int, Operand] = {}
            gen.full_memo = memo
            for v in gen.full_outputs:
                gen.store_full(c, v, memo)
            for line in gen.after_chunk:
                c(line)
    for v in gen.row_outputs:
        gen.store_row(c, v)


def scans_needed(gen: RowKernelGen, targets: list[Value]) -> list[Value]:
    """The scans `targets` read (not through a statistic), in id order: each needs a running carry."""
    out: list[Value] = []
    seen: set[int] = set()
    stack = list(targets)
    while stack:
        v = stack.pop()
        if v.id in seen or gen.is_load(v) or (v.kind == "reduce"):
            continue
        seen.add(v.id)
        if v.kind == "scan":
            out.append(v)
        stack.extend(v.tensor_args)
    return sorted(out, key=lambda v: v.id)


def row_prereqs(gen: RowKernelGen, c: Code, targets: list[Value]) -> None:
    """Emit (before a loop) the row values the loop body will read."""
    need: list[Value] = []
    seen: set[int] = set()
    stack = list(targets)
    while stack:
        v = stack.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        if gen.vclass(v) == "row" and not (v.kind == "reduce" and v.id in gen.owned and v in targets):
            need.append(v)
            continue
        if gen.is_load(v):
            continue
        if v.kind == "reduce" and v.id in gen.owned:
            stack.append(v.args[0])
            continue
        stack.extend(v.tensor_args)
    for v in sorted(need, key=lambda v: v.id):
        gen.emit(c, v, "row", gen.row_memo)


def stat_pass(gen: RowKernelGen, c: Code, group: list[Value], merged_into: dict) -> None:
    """One loop over the row accumulating the statistics of `group` (and those merged into them)."""
    gen.evict = "evict_last" if gen.cfg.EVICT and gen.full_outputs else None
    row_prereqs(gen, c, group)
    ax = gen.AX
    tile = "[BLOCK_M, BLOCK_R]" if gen.layout == "rows" else "[BLOCK_R, BLOCK_I]"
    rowshape = "[BLOCK_M, 1]" if gen.layout == "rows" else "[1, BLOCK_I]"
    welford = {s.id for s in group for (_, kind, _) in merged_into.get(s.id, []) if kind == "welford"}
    softmax = {s.id: [(d, extra) for (d, kind, extra) in merged_into.get(s.id, []) if kind == "softmax"]
               for s in group}  # fmt: skip
    gen.carries = {}
    for s in group:
        acc = gen._acc_dtype(s)
        if s.id in welford:
            welford_init(c, s, tile)
            continue
        c(f"a{s.id} = tl.full({tile}, {gen._neutral(s)}, {acc})")
        if s.op in ("argmax", "argmin"):
            c(f"i{s.id} = tl.zeros({tile}, dtype=tl.int32)")
        for d, _ in softmax.get(s.id, []):
            c(f"e{d.id} = tl.zeros({tile}, dtype=tl.float32)")
    for v in scans_needed(gen, [s.args[0] for s in group]):
        gen.carries[v.id] = f"carry{v.id}"
        c(f"carry{v.id} = tl.full({rowshape}, {'1.0' if v.op == 'cumprod' else '0.0'}, tl.float32)")
    c("for rbase in range(0, NR, BLOCK_R):")
    with c.indent():
        gen.after_chunk = []
        gen.chunk_setup(c, "rbase")
        memo: dict[int, Operand] = {}
        gen.full_memo = memo
        for s in group:
            if s.id in welford:
                welford_step(gen, c, s, "rbase // BLOCK_R")
                continue
            m = gen._masked(c, s, memo)
            a = f"a{s.id}"
            if s.op in ("sum", "mean"):
                c(f"{a} = {a} + {m}")
            elif s.op in ("max", "any"):
                if softmax.get(s.id):
                    c(f"mnew = tl.maximum({a}, {m})")
                    c(f'msafe_old = tl.where({a} == -float("inf"), 0.0, {a})')
                    c('msafe = tl.where(mnew == -float("inf"), 0.0, mnew)')
                    for d, _ in softmax[s.id]:
                        c(f"e{d.id} = e{d.id} * tl.exp(msafe_old - msafe) + tl.exp({m} - msafe)")
                    c(f"{a} = mnew")
                else:
                    c(f"{a} = tl.maximum({a}, {m})")
            elif s.op in ("min", "all"):
                c(f"{a} = tl.minimum({a}, {m})")
            elif s.op == "prod":
                c(f"{a} = {a} * {m}")
            elif s.op in ("argmax", "argmin"):
                cmp = ">" if s.op == "argmax" else "<"
                c(f"upd = {m} {cmp} {a}")
                c(f"{a} = tl.where(upd, {m}, {a})")
                c(f"i{s.id} = tl.where(upd, rr, i{s.id})")
        for line in gen.after_chunk:
            c(line)
    # Reduce the accumulators to one value per row.
    for s in group:
        if s.id in welford:
            welford_lanes(gen, c, s, ax)
            gen.stat_names[s.id] = Operand(f"wm{s.id}", "f")
            for d, kind, _ in merged_into.get(s.id, []):
                if kind == "welford":
                    c(f"s{d.id} = wv{s.id}" + (" / NR" if d.op == "mean" else ""))
                    gen.stat_names[d.id] = Operand(f"s{d.id}", "f")
            continue
        a = f"a{s.id}"
        if s.op in ("argmax", "argmin"):
            red = "tl.max" if s.op == "argmax" else "tl.min"
            c(f"b{s.id} = {red}({a}, axis={ax}, keep_dims=True)")
            c(
                f"s{s.id} = tl.min(tl.where({a} == b{s.id}, i{s.id}, 2147483647), axis={ax}, keep_dims=True).to(tl.int64)"
            )
            gen.stat_names[s.id] = Operand(f"s{s.id}", "i")
            continue
        gen._finish_stat(c, s, gen._reduce_text(s.op, a, ax))
        for d, extra in softmax.get(s.id, []):
            mx = gen.emit(c, extra, "row", gen.row_memo)
            c(f'msafe = tl.where({a} == -float("inf"), 0.0, {a})')
            c(f"s{d.id} = tl.sum(e{d.id} * tl.exp(msafe - {mx.text}), axis={ax}, keep_dims=True)")
            gen.stat_names[d.id] = Operand(f"s{d.id}", "f")


# Welford per lane of a tile, for a mean and the variance around it in one pass: accumulators wn (count),
# wm (mean) and wv (sum of squared deviations) per lane, no cross-thread reduction inside the loop, then one
# Chan combine across the lanes. The looped design (online) and the split design's partials both use them.
# Each lane works about a pivot wp, its first value: on data far from zero (rows near 300) a running mean
# kept as is rounds by ulp(300) at every update and every merge of the lanes' tree, several times the
# reference's error; about the pivot the means stay near zero and the pivot comes back once, at the end.


def welford_init(c: Code, st: Value, tile: str) -> None:
    """Zero mean `st`'s per-lane accumulators (wp, wn, wm, wv) over `tile`."""
    for acc in ("wp", "wn", "wm", "wv"):
        c(f"{acc}{st.id} = tl.zeros({tile}, dtype=tl.float32)")


def welford_step(gen: RowKernelGen, c: Code, st: Value, chunk: str) -> None:
    """Fold this chunk (number `chunk` of the walk, from 0) into mean `st`'s per-lane accumulators."""
    x = as_float(gen.emit(c, st.args[0], "full", gen.full_memo))
    # A lane in bounds in this chunk was in bounds in every earlier chunk of the walk (chunks walk the row
    # upward), so its count is the chunk's number: one reciprocal per chunk, not a division per element;
    # and its pivot is its value in chunk 0.
    c(f"wp{st.id} = tl.where(fmask & ({chunk} == 0), {x}, wp{st.id})")
    c(f"wx = {x} - wp{st.id}")
    c(f"inv_n = 1.0 / ({chunk} + 1)")
    c(f"wd = tl.where(fmask, wx - wm{st.id}, 0.0)")
    c(f"wm{st.id} = wm{st.id} + wd * inv_n")
    c(f"wv{st.id} = wv{st.id} + wd * tl.where(fmask, wx - wm{st.id}, 0.0)")
    c(f"wn{st.id} = wn{st.id} + fmask.to(tl.float32)")


def welford_lanes(gen: RowKernelGen, c: Code, st: Value, ax: int) -> None:
    """Merge mean `st`'s lanes along `ax` (Chan): wm, wv and wn become the walk's mean, sum of squared
    deviations and count."""
    w = f"wp{st.id}, wm{st.id}, wv{st.id}, wn{st.id}"
    c(f"{w} = tl.reduce(({w}), {ax}, {gen.ctx.use('_kw_welford_combine')}, keep_dims=True)")
    c(f"wm{st.id} = wp{st.id} + wm{st.id}")
