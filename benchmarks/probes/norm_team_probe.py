"""Norms over long rows with one read from memory: a team of programs per row, its second pass from L2.

A norm over a row needs the row's statistics before it can write any of it. When a row is longer than a
program can hold (instance norm over a 512 x 512 plane: 1 MiB; layer norm over 64 x 256 x 256: 16 MiB),
today's kernels, the writer's and torch.compile's alike, read the row twice from memory (statistics,
then normalize) and write it once: 3 bytes moved per byte of input where 2 would do.

Here a row is split into S chunks, one per program of a *team*; all programs are resident at once (a
cooperative launch: the launch fails rather than hang if they cannot be), and a team's programs meet
once per row: each writes its chunk's partial sums, counts itself in the row's counter and waits until
all S have. Each then re-reads only its own chunk to normalize it, a chunk it read moments ago: while
every resident program holds CHUNK bytes between its two passes (`programs x CHUNK`, e.g. 264 x 64 KiB
= 16.5 MiB), the chunk should still be in the H200's 50 MiB L2, and memory see one read and one write.
Measured on an H200 (benchmarks/RESULTS.md, 2026-12-03): L2 served about half of the second pass, and the
statistics pass is latency-bound at the two programs per SM a cooperative launch fits; instance norm at best
1.21x torch.compile (the copy floor is 1.58x), layer norm no faster.

This is a probe, outside the writer: each variant is checked against torch on the task's shape and
timed with triton.testing.do_bench (L2 flushed before each call) next to eager and torch.compile.
The statistics are shifted sums (around the row's first element), merged from S partials in fp32.

Usage, from the repository root:
    python benchmarks/probes/norm_team_probe.py [--out DIR] [--only instance|layer]   (a CUDA machine)
    TRITON_INTERPRET=1 python benchmarks/probes/norm_team_probe.py --check              (CPU: S = 1 only; a
        team of S > 1 waits on programs the interpreter runs after it)
Writes DIR/norm_team_probe.json (DIR defaults to $OUT, else ./norm-team-probe-out) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _chunk_sums(x_ptr, base, lo, L, shift, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    """Sum and sum of squares of x - shift over one chunk [lo, lo + CHUNK) of a row (cut at L)."""
    s1 = tl.zeros([BLOCK], dtype=tl.float32)
    s2 = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(lo, lo + CHUNK, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        ok = idx < L
        v = tl.where(ok, tl.load(x_ptr + base + idx, mask=ok, other=0.0) - shift, 0.0)
        s1 += v
        s2 += v * v
    return tl.sum(s1, axis=0), tl.sum(s2, axis=0)


@triton.jit
def _publish(part_ptr, cnt_ptr, row, member, a, b, S: tl.constexpr):
    """This member's sums of `row`, then its count in the row's counter (release: the sums first)."""
    pp = part_ptr + (row * S + member) * 2
    tl.store(pp, a)
    tl.store(pp + 1, b)
    tl.debug_barrier()  # every thread's part written before the count says so
    tl.atomic_add(cnt_ptr + row, 1, sem="release")


@triton.jit
def _gather(part_ptr, cnt_ptr, row, S: tl.constexpr):
    """Wait until all S members of `row` have counted themselves, then the row's sums."""
    seen = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    while seen < S:
        seen = tl.atomic_add(cnt_ptr + row, 0, sem="acquire")
    ms = tl.arange(0, S)
    a = tl.sum(tl.load(part_ptr + (row * S + ms) * 2, volatile=True), axis=0)
    b = tl.sum(tl.load(part_ptr + (row * S + ms) * 2 + 1, volatile=True), axis=0)
    return a, b


@triton.jit
def _write_chunk(x_ptr, y_ptr, w_ptr, b_ptr, base, lo, L, mean, rstd, CHUNK: tl.constexpr,
                 BLOCK: tl.constexpr, AFFINE: tl.constexpr, REVERSE: tl.constexpr):  # fmt: skip
    for i in range(0, CHUNK, BLOCK):
        if REVERSE:  # the block read last is re-read first
            off = lo + CHUNK - BLOCK - i
        else:
            off = lo + i
        idx = off + tl.arange(0, BLOCK)
        ok = idx < L
        y = (tl.load(x_ptr + base + idx, mask=ok, other=0.0) - mean) * rstd
        if AFFINE:
            y = y * tl.load(w_ptr + idx, mask=ok, other=0.0) + tl.load(b_ptr + idx, mask=ok, other=0.0)
        tl.store(y_ptr + base + idx, y, mask=ok)


@triton.jit
def team_norm(
    x_ptr, x2_ptr, y_ptr, w_ptr, b_ptr, part_ptr, cnt_ptr, R, L, eps,
    S: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, AFFINE: tl.constexpr, REVERSE: tl.constexpr,
    PIPE: tl.constexpr, WRITE: tl.constexpr,
):  # fmt: skip
    """PIPE: a member sums its chunk of the team's next row before it waits for this row's sums, so the
    wait is mostly over when it starts (at the price of one more chunk held in L2 per program).
    Diagnostics: the second pass reads x2 (x itself, or a copy of it, which the first pass left out of
    L2); WRITE=False leaves the second pass out (statistics only, needs S > 1)."""
    p = tl.program_id(0)
    teams = tl.num_programs(0) // S
    team = p // S
    member = p - team * S
    lo = member * CHUNK  # this program's chunk of every row its team takes
    if PIPE:
        row = team
        if row < R:
            base = tl.cast(row, tl.int64) * L
            a, b = _chunk_sums(x_ptr, base, lo, L, tl.load(x_ptr + base), CHUNK, BLOCK)
            _publish(part_ptr, cnt_ptr, row, member, a, b, S)
        while row < R:
            nxt = row + teams
            if nxt < R:
                nbase = tl.cast(nxt, tl.int64) * L
                a, b = _chunk_sums(x_ptr, nbase, lo, L, tl.load(x_ptr + nbase), CHUNK, BLOCK)
                _publish(part_ptr, cnt_ptr, nxt, member, a, b, S)
            base = tl.cast(row, tl.int64) * L
            shift = tl.load(x_ptr + base)
            a, b = _gather(part_ptr, cnt_ptr, row, S)
            m = a / L
            rstd = 1.0 / tl.sqrt(tl.maximum(b / L - m * m, 0.0) + eps)
            if WRITE:
                _write_chunk(x2_ptr, y_ptr, w_ptr, b_ptr, base, lo, L, m + shift, rstd, CHUNK, BLOCK, AFFINE,
                             REVERSE)  # fmt: skip
            row = nxt
    else:
        for row in range(team, R, teams):
            base = tl.cast(row, tl.int64) * L
            # the same shift for the whole team: sums around it lose less to cancellation
            shift = tl.load(x_ptr + base)
            a, b = _chunk_sums(x_ptr, base, lo, L, shift, CHUNK, BLOCK)
            if S > 1:
                _publish(part_ptr, cnt_ptr, row, member, a, b, S)
                a, b = _gather(part_ptr, cnt_ptr, row, S)
            m = a / L
            rstd = 1.0 / tl.sqrt(tl.maximum(b / L - m * m, 0.0) + eps)
            if WRITE:
                _write_chunk(x2_ptr, y_ptr, w_ptr, b_ptr, base, lo, L, m + shift, rstd, CHUNK, BLOCK, AFFINE,
                             REVERSE)  # fmt: skip


def run(x2: torch.Tensor, w, b, eps: float, *, s: int, chunk: int, block: int, per_sm: int, warps: int,
        reverse: bool, pipe: bool = False, second: torch.Tensor | None = None, write: bool = True
        ) -> torch.Tensor:  # fmt: skip
    """x2: [R, L] contiguous; w, b: [L] or None. `s` programs per row (1: a program takes whole rows)."""
    r, length = x2.shape
    if s * chunk < length or (s - 1) * chunk >= length:
        raise ValueError(f"{s} chunks of {chunk} do not cover a row of {length}")
    y = torch.empty_like(x2)
    if x2.is_cuda:
        sms = torch.cuda.get_device_properties(x2.device).multi_processor_count
        programs = (sms * per_sm // s) * s
    else:
        programs = min(r, 4) * s
    if programs == 0:
        raise ValueError(f"a team of {s} does not fit {per_sm} programs per SM")
    part = torch.empty(r * s * 2, device=x2.device, dtype=torch.float32)
    cnt = torch.zeros(r, device=x2.device, dtype=torch.int32)
    wb = (w, b) if w is not None else (x2, x2)
    extra = {"launch_cooperative_grid": True} if (x2.is_cuda and s > 1) else {}
    team_norm[(programs,)](
        x2, x2 if second is None else second, y, wb[0], wb[1], part, cnt, r, length, eps, S=s, CHUNK=chunk,
        BLOCK=block, AFFINE=w is not None, REVERSE=reverse, PIPE=pipe, WRITE=write, num_warps=warps, **extra,
    )  # fmt: skip
    return y


# (name, shape, rows, affine): instance norm of published/11 (rows = planes), layer norm of published/09
CASES = {
    "instance": ((112, 64, 512, 512), 112 * 64, False),
    "layer": ((16, 64, 256, 256), 16, True),
}
# (S, CHUNK, BLOCK, programs per SM, warps, reverse, pipelined) per case; S = 1: the fused kernel without a
# team. The first three runs (2026-12-03, results/2026-12-03-h200-norm-team/probe.log, probe2.log, probe3.log)
# timed instance norm at S = 1, 8, 16, 32, 64 and layer norm at S = 128, 256, 512, pipelined or not, with 2048-
# to 8192-wide blocks; the lists below are the fourth run's (probe4.log). DIAGNOSE: each list's first variant
# again with the statistics pass alone, and with its second pass reading a copy of the input (which the first
# pass did not bring into L2).
VARIANTS = {
    "instance": [
        (16, 16384, 8192, 2, 8, True, False),
        (16, 16384, 16384, 1, 16, True, False),
        (16, 16384, 8192, 1, 16, True, False),
        (8, 32768, 8192, 2, 8, True, False),
        (32, 8192, 8192, 1, 16, True, False),
    ],
    "layer": [
        (128, 32768, 8192, 1, 16, True, False),
        (128, 32768, 16384, 1, 16, True, False),
        (256, 16384, 4096, 2, 8, True, False),
    ],
}
DIAGNOSE = ("statistics only", "second pass from a copy")


def _reference(x: torch.Tensor, w, b, eps: float, case: str) -> torch.Tensor:
    if case == "instance":
        return F.instance_norm(x, eps=eps)
    return F.layer_norm(x, x.shape[1:], w, b, eps=eps)


def check() -> None:
    """CPU (interpreter): S = 1 on small rows, both cases, against torch."""
    torch.manual_seed(0)
    for case, shape in (("instance", (2, 3, 7, 9)), ("layer", (3, 2, 5, 7))):
        x = torch.randn(shape) * 3 + 5
        w = torch.randn(shape[1:]) if case == "layer" else None
        b = torch.randn(shape[1:]) if case == "layer" else None
        rows = shape[0] * shape[1] if case == "instance" else shape[0]
        length = x.numel() // rows
        y = run(x.reshape(rows, length), w.reshape(-1) if w is not None else None,
                b.reshape(-1) if b is not None else None, 1e-5, s=1, chunk=128, block=16, per_sm=1, warps=4,
                reverse=True)  # fmt: skip
        err = (y.reshape(shape) - _reference(x, w, b, 1e-5, case)).abs().max().item()
        print(f"{case} {tuple(shape)}: max abs error {err:.2e}")
        assert err < 1e-4, err


def time_case(case: str) -> list[dict]:
    from triton.testing import do_bench

    shape, rows, affine = CASES[case]
    eps = 1e-5
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda")
    w = torch.randn(shape[1:], device="cuda") if affine else None
    b = torch.randn(shape[1:], device="cuda") if affine else None
    length = x.numel() // rows
    x2 = x.view(rows, length)
    w1 = w.reshape(-1) if affine else None
    b1 = b.reshape(-1) if affine else None
    ref = _reference(x, w, b, eps, case)

    def eager():
        return _reference(x, w, b, eps, case)

    compiled = torch.compile(eager)
    compiled()
    out = []

    def copy():  # one read and one write: the floor a one-read norm would reach
        return x.clone()

    for name, fn in (("copy (one read, one write)", copy), ("eager", eager), ("torch.compile", compiled)):
        ms = do_bench(fn, warmup=25, rep=300)
        out.append({"case": case, "variant": name, "ms": ms, "err": 0.0})
        print(f"{case:8s} {name:44s} {ms:8.3f} ms", flush=True)
    del compiled
    for s, chunk, block, per_sm, warps, rev, pipe in VARIANTS[case]:
        name = f"S={s} CHUNK={chunk} BLOCK={block} {per_sm}/SM {warps}w{' rev' if rev else ''}{' pipe' if pipe else ''}"

        def ours(s=s, chunk=chunk, block=block, per_sm=per_sm, warps=warps, rev=rev, pipe=pipe):
            return run(
                x2,
                w1,
                b1,
                eps,
                s=s,
                chunk=chunk,
                block=block,
                per_sm=per_sm,
                warps=warps,
                reverse=rev,
                pipe=pipe,
            )

        try:
            y = ours()
            torch.cuda.synchronize()
            err = (y.view(shape) - ref).abs().max().item()
            del y
            ms = do_bench(ours, warmup=25, rep=300)
        except Exception as e:  # noqa: BLE001 - a variant that cannot launch is a row of the table
            out.append({"case": case, "variant": name, "error": f"{type(e).__name__}: {e}"[:300]})
            print(f"{case:8s} {name:44s} failed: {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        out.append({"case": case, "variant": name, "ms": ms, "err": err})
        print(f"{case:8s} {name:44s} {ms:8.3f} ms  max abs error {err:.2e}", flush=True)
    s, chunk, block, per_sm, warps, rev, pipe = VARIANTS[case][0]
    kw = dict(s=s, chunk=chunk, block=block, per_sm=per_sm, warps=warps, reverse=rev, pipe=pipe)
    copy2 = x2.clone()
    for what in DIAGNOSE:
        extra = {"write": False} if what == "statistics only" else {"second": copy2}
        ms = do_bench(lambda extra=extra: run(x2, w1, b1, eps, **kw, **extra), warmup=25, rep=300)
        out.append({"case": case, "variant": f"{s}/{chunk}/{block}: {what}", "ms": ms})
        print(f"{case:8s} {s}/{chunk}/{block}: {what:36s} {ms:8.3f} ms", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "norm-team-probe-out"))
    ap.add_argument("--only", choices=sorted(CASES), default="")
    ap.add_argument("--check", action="store_true", help="CPU check of the kernel (S = 1) and exit")
    args = ap.parse_args(argv)
    if args.check:
        check()
        return 0
    rows = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for case in [args.only] if args.only else list(CASES):
        rows += time_case(case)
        (out / "norm_team_probe.json").write_text(json.dumps({
            "device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "rows": rows}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
