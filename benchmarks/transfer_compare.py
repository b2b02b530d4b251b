"""Transfer: the same tasks benched with a memory and with `--memory off` (issue: learning, measured).

    python benchmarks/transfer_compare.py --with W [W ...] --without O [O ...] [--json OUT]

W and O are bench folders or suite.json files (several are merged, a pass finished in parts; the later one
wins per task). Only tasks finished in both count. Per mode: correct share, geometric-mean speedup over
eager and over torch.compile (correct tasks), evaluations, and evaluations to each task's best kernel.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from warm_cold import best_at, merged_rows, runtimes


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows: dict[str, dict[str, Any]], tasks: list[str]) -> dict[str, Any]:
    correct = [rows[t] for t in tasks if rows[t].get("correct")]
    to_best = sum(best_at(rows[t]) or 0 for t in tasks)
    return {
        "tasks": len(tasks),
        "correct": len(correct),
        "geomean_vs_eager": _geomean([r["speedup_vs_eager"] for r in correct if r.get("speedup_vs_eager")]),
        "geomean_vs_compile": _geomean(
            [r["speedup_vs_compile"] for r in correct if r.get("speedup_vs_compile")]
        ),
        "evaluations": sum(len(runtimes(rows[t])) for t in tasks),
        "evaluations_to_best": to_best,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--with", dest="with_", type=Path, nargs="+", required=True)
    ap.add_argument("--without", type=Path, nargs="+", required=True)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    with_, without = merged_rows(args.with_), merged_rows(args.without)
    tasks = sorted(set(with_) & set(without))
    got = {
        "with": summary(with_, tasks),
        "without": summary(without, tasks),
        "per_task": [
            {
                "task": t,
                "with": with_[t].get("speedup_vs_compile"),
                "without": without[t].get("speedup_vs_compile"),
            }
            for t in tasks
        ],
    }
    if args.json:
        args.json.write_text(json.dumps(got, indent=1) + "\n")
    for mode in ("with", "without"):
        s = got[mode]
        print(
            f"{mode:>8}: correct {s['correct']}/{s['tasks']}, geomean {s['geomean_vs_eager']:.3f}x vs eager, "
            f"{s['geomean_vs_compile']:.3f}x vs torch.compile, {s['evaluations']} evaluations "
            f"({s['evaluations_to_best']} to best)"
        )
    better = sum(1 for r in got["per_task"] if (r["with"] or 0) > 1.05 * (r["without"] or 0))
    worse = sum(1 for r in got["per_task"] if (r["without"] or 0) > 1.05 * (r["with"] or 0))
    print(f"per task vs torch.compile: with memory >5% faster on {better}, >5% slower on {worse}")


if __name__ == "__main__":
    main()
