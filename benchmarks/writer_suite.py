"""The offline writer through the whole optimize graph, over the bundled suites.

One command does the measurement and writes `writer_suite.json` and `writer_suite.md` under --out
(default $OUT), rewritten after every task so that a cut-off run keeps what it measured:

    python benchmarks/writer_suite.py --out DIR [--levels level1,level2] [--budget 16] [--shard 0/2]
                                      [--tasks 14_matmul_square,...] [--allow-tf32]

Per task: whether a verified kernel was found, the best kernel's time, eager and torch.compile times
(measured by the harness in the same worker, interleaved), speedups, the roofline floor and the fraction
of it reached, the winning design, candidates evaluated and wall time, and every tried candidate (design,
time or error kind). `--allow-tf32` runs at the TF32 precision (labelled so in the output). `--shard i/n` takes every n-th
task (for one process per GPU: run n copies with CUDA_VISIBLE_DEVICES set).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from graphs.context import Context  # noqa: E402
from graphs.optimize import run_optimize  # noqa: E402
from nodes import resources  # noqa: E402
from tasks import bundled_suite_dir  # noqa: E402


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def design_of(code: str) -> str:
    first = code.splitlines()[0] if code else ""
    return first.removeprefix("# kernelwright:").strip() if first.startswith("# kernelwright:") else ""


def row_for(path: Path, level: str, args: argparse.Namespace, memory: str) -> dict:
    ctx = Context(
        model="offline",
        budget=args.budget,
        device=args.device,
        memory=memory,
        seed=args.seed,
        workers=1,
        roofline_stop=args.roofline_stop,
        compile_check=False,
        allow_tf32=args.allow_tf32,
    )
    t0 = time.perf_counter()
    run_dir = Path(args.runs_dir or Path(args.out) / "runs") / path.stem
    res = run_optimize(str(path), ctx, run_dir, close_pools=False)
    best = res.best
    return {
        "task": path.stem,
        "level": level,
        "correct": res.correct,
        "verdict": res.verdict,
        "slower_than_eager": res.slower_than_eager,
        "runtime_ms": best.runtime_ms if best else None,
        "eager_ms": best.eager_ms if best else None,
        "compile_ms": best.compile_ms if best else None,
        "speedup_vs_eager": best.speedup_vs_eager if best else None,
        "speedup_vs_compile": best.speedup_vs_compile if best else None,
        "floor_ms": res.roofline_floor_ms,
        "fraction_of_floor": best.fraction_of_floor if best else None,
        "design": design_of(best.code) if best else "",
        "evaluations": res.cost.evaluations,
        "gpu_s": round(res.cost.gpu_s, 1),
        "stop_reason": res.stop_reason,
        "wall_s": round(time.perf_counter() - t0, 1),
        "precision": res.precision,
        # every tried node: which design won where, and what the others cost
        "attempts": [
            {k: n.get(k) for k in ("id", "parent", "action", "status", "design", "runtime_ms", "error_kind")}
            for n in res.search.get("nodes_detail", [])  # type: ignore[union-attr]
            if n.get("action")
        ],
    }


def markdown(rows: list[dict], meta: dict) -> str:
    def f(x: float | None, spec: str = ".4g") -> str:
        return "-" if x is None else format(x, spec)

    out = [
        f"Offline writer, budget {meta['budget']} per task, precision {meta.get('precision', 'strict')}, "
        f"on {meta['device']} ({meta['date']}), "
        f"torch {meta['torch']}, triton {meta['triton']}",
        "",
        "| task | correct | best ms | eager ms | compile ms | vs eager | vs compile | floor ms | % floor | evals | design |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        frac = r.get("fraction_of_floor")
        out.append(
            f"| {r['task']} | {'yes' if r.get('correct') else 'NO'} | {f(r.get('runtime_ms'))} | "
            f"{f(r.get('eager_ms'))} | {f(r.get('compile_ms'))} | {f(r.get('speedup_vs_eager'), '.2f')} | "
            f"{f(r.get('speedup_vs_compile'), '.2f')} | {f(r.get('floor_ms'))} | "
            f"{'-' if frac is None else f'{100 * frac:.1f}%'} | {r.get('evaluations', '-')} | "
            f"{r.get('design') or r.get('error', '')} |"
        )
    out.append("")
    for level in sorted({r["level"] for r in rows}):
        rs = [r for r in rows if r["level"] == level]
        ok = sum(1 for r in rs if r.get("correct"))
        out.append(
            f"- {level}: correct {ok}/{len(rs)}; geo-mean speedup vs torch.compile "
            f"{f(geomean([r.get('speedup_vs_compile') for r in rs]), '.3f')}, vs eager "
            f"{f(geomean([r.get('speedup_vs_eager') for r in rs]), '.3f')} (over tasks with a correct kernel)"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--levels", default="level1,level2")
    ap.add_argument("--tasks", default="", help="comma-separated task stems (default: all)")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--device", default="cuda", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--roofline-stop", type=float, default=None, help="stop a task at this fraction of the floor"
    )
    ap.add_argument(
        "--allow-tf32",
        action="store_true",
        help="TF32 allowed (reference and candidates, TF32 tolerance); results are labelled tf32",
    )
    ap.add_argument("--shard", default="0/1", help="i/n: this process takes every n-th task from i")
    ap.add_argument("--memory", default="", help="memory dir (default: a fresh one under the runs dir)")
    ap.add_argument("--runs-dir", default="", help="where run directories go (default: OUT/runs)")
    args = ap.parse_args(argv)
    shard_i, shard_n = (int(x) for x in args.shard.split("/"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = Path(args.runs_dir or out / "runs")
    runs.mkdir(parents=True, exist_ok=True)
    memory = args.memory or tempfile.mkdtemp(prefix="kw-mem-", dir=runs)
    wanted = {t for t in args.tasks.split(",") if t}
    todo = []
    for level in [lv for lv in args.levels.split(",") if lv]:
        for p in sorted(bundled_suite_dir(level).glob("[0-9]*.py")):
            if not wanted or p.stem in wanted:
                todo.append((level, p))
    todo = todo[shard_i::shard_n]

    import torch
    import triton

    meta = {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "budget": args.budget,
        "seed": args.seed,
        "shard": args.shard,
        "memory": memory,
        "precision": "tf32" if args.allow_tf32 else "strict",
    }
    suffix = "" if shard_n == 1 else f"_{shard_i}of{shard_n}"
    rows: list[dict] = []
    for level, path in todo:
        try:
            row = row_for(path, level, args, memory)
        except Exception as exc:  # one task must not end the run; its error is the row
            row = {
                "task": path.stem,
                "level": level,
                "correct": False,
                "error": f"{type(exc).__name__}: {exc}"[:300],
            }
        rows.append(row)
        print(
            f"{row['task']}: correct={row.get('correct')} best={row.get('runtime_ms')} "
            f"vs_compile={row.get('speedup_vs_compile')} floor%={row.get('fraction_of_floor')} "
            f"evals={row.get('evaluations')} {row.get('wall_s')}s {row.get('error', '')}",
            flush=True,
        )
        (out / f"writer_suite{suffix}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
        (out / f"writer_suite{suffix}.md").write_text(markdown(rows, meta))
    resources.close_pools()
    print(markdown(rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
