"""From a whole model's file to every region's first program: how long the analysis takes.

For each KernelBench level-3 file at its published sizes: build the model with uninitialised weights and
fake inputs (tasks/regions.py analysis_model), split it once (shapes from fake tensors, no data), then ask
the offline writer for its first program for each distinct region signature (one prompt per signature,
as a search's root step asks). Per model: split s, regions, signatures, first-programs s (and how many
signatures got a program), total s. Each model runs in a child process of its own, so one model's
caches never help the next and a hang costs only its own time limit.

    .venv/bin/python benchmarks/level3_analysis.py /path/to/KernelBench/level3 \\
        --out benchmarks/results/2026-12-05-cpu-level3-analysis [--only 9,10] [--limit-s 300] [--profile 9]

Writes results.jsonl (one row per model), summary.md, and with --profile N a cProfile of model N's run
(profile_N.txt, the 40 most expensive functions by cumulative time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # a checkout without an install (the GPU machine): kernelwright from here
    sys.path.insert(0, str(ROOT))


def analyse(path: Path) -> dict[str, Any]:
    """One model, in this process: split and first programs, timed."""
    import types

    import torch

    from kernelwright.providers.offline import write_program
    from kernelwright.providers.protocol import render_section
    from kernelwright.tasks.regions import analysis_model, split_model

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    row: dict[str, Any] = {"model": path.stem}
    t0 = time.perf_counter()
    task = types.ModuleType(path.stem)
    task.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), task.__dict__)
    model, inputs = analysis_model(task)
    t1 = time.perf_counter()
    split = split_model(model, inputs, measure=False)
    t2 = time.perf_counter()
    groups = split.unique()
    row.update(build_s=round(t1 - t0, 3), split_s=round(t2 - t1, 3), regions=len(split.regions),
               signatures=len(groups), specialized=split.specialized)  # fmt: skip
    written = 0
    not_tasks = 0
    refusals: dict[str, int] = {}
    slowest: tuple[float, str] = (0.0, "")
    for signature, regions in groups.items():
        source = regions[0].source
        if not source:
            not_tasks += 1
            continue
        prompt = "\n\n".join([
            render_section("request", "Write a faster kernel.", kind="large_step"),
            render_section("task", source, name=f"region_{signature}"),
        ])  # fmt: skip
        s0 = time.perf_counter()
        answer = write_program(prompt)
        took = time.perf_counter() - s0
        if took > slowest[0]:
            slowest = (took, " + ".join(regions[0].ops))
        if answer.code is not None:
            written += 1
        else:
            why = answer.explanation.removeprefix("The offline writer cannot write this task: ")[:90]
            refusals[why] = refusals.get(why, 0) + 1
    t3 = time.perf_counter()
    row.update(first_programs_s=round(t3 - t2, 3), programs=written, not_tasks=not_tasks,
               refusals=refusals, slowest_signature_s=round(slowest[0], 3), slowest_ops=slowest[1],
               total_s=round(t3 - t0, 3))  # fmt: skip
    return row


def _child(path: Path, profile: Path | None) -> None:
    if profile is None:
        row = analyse(path)
    else:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        row = prof.runcall(analyse, path)
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(40)
        profile.write_text(out.getvalue(), encoding="utf-8")
    print("ROW " + json.dumps(row), flush=True)


def _number(path: Path) -> int:
    head = path.stem.split("_")[0]
    return int(head) if head.isdigit() else 10**6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("level3", type=Path, help="a KernelBench checkout's level3/ folder")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/2026-12-05-cpu-level3-analysis")
    ap.add_argument("--only", default="", help="comma-separated task numbers (default: all)")
    ap.add_argument("--limit-s", type=float, default=600.0, help="time limit per model (child killed)")
    ap.add_argument("--profile", default="", help="comma-separated task numbers to profile")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child-profile", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.child_profile)
        return 0
    if not args.level3.is_dir():
        print(f"{args.level3}: not a folder", file=sys.stderr)
        return 2
    only = {int(x) for x in args.only.split(",") if x.strip()}
    profiled = {int(x) for x in args.profile.split(",") if x.strip()}
    files = sorted((p for p in args.level3.glob("*.py") if _number(p) < 10**6), key=_number)
    files = [p for p in files if not only or _number(p) in only]
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "results.jsonl"
    rows: list[dict[str, Any]] = []
    env = dict(os.environ, PYTHONPATH=str(ROOT.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for path in files:
        cmd = [sys.executable, __file__, str(args.level3), "--child", str(path)]
        if _number(path) in profiled:
            cmd += ["--child-profile", str(args.out / f"profile_{_number(path)}.txt")]
        t0 = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit_s, env=env)
            line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")), None)
            if line is None:
                tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                row = {"model": path.stem, "error": tail[:300]}
            else:
                row = json.loads(line[4:])
        except subprocess.TimeoutExpired:
            row = {"model": path.stem, "error": f"over the {args.limit_s:.0f} s limit"}
        row["process_s"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
        with rows_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    _summary(rows, args.out / "summary.md")
    return 0


def _summary(rows: list[dict[str, Any]], path: Path) -> None:
    ok = [r for r in rows if "error" not in r]
    lines = [
        "| model | split s | regions | signatures | programs | first programs s | total s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | error: {r['error']} | | | | | |")
            continue
        lines.append(f"| {r['model']} | {r['split_s']:.2f} | {r['regions']} | {r['signatures']} | "
                     f"{r['programs']} | {r['first_programs_s']:.2f} | {r['total_s']:.2f} |")  # fmt: skip
    if ok:
        totals = sorted(r["total_s"] for r in ok)
        lines += [
            "",
            f"{len(ok)}/{len(rows)} models analysed; {sum(r['regions'] for r in ok)} regions, "
            f"{sum(r['signatures'] for r in ok)} signatures, {sum(r['programs'] for r in ok)} first programs; "
            f"total per model: median {totals[len(totals) // 2]:.2f} s, max {totals[-1]:.2f} s, "
            f"{sum(t <= 10 for t in totals)} at or under 10 s.",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
