"""Warm vs cold: how many evaluations a second pass with the first pass's memory needs to reach the first
pass's best kernel (issue: learning, measured).

    python benchmarks/warm_cold.py --cold COLD [--warm WARM ...] [--tolerance 0.03] [--json OUT]

COLD and WARM are bench folders (their tasks.jsonl) or suite.json files; several WARM sources are merged
(a pass finished in parts), the later one winning per task. Only tasks correct in both passes count.
Per task: the cold pass's best runtime and the evaluation that first reached it; in the warm pass, the
first evaluation whose runtime is within `tolerance` of the cold best (timing noise between two runs on
one GPU is a few percent), or "not reached". The figure is the sum over tasks of evaluations to reach,
warm against cold (a task not reached counts the warm pass's full evaluations).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from kernelwright.bench.folder import read_ledger


def load_rows(source: Path) -> dict[str, dict[str, Any]]:
    """The latest row per task of a bench folder (its ledger), or the tasks of a suite.json."""
    if source.is_dir():
        return {tid: row.model_dump(mode="json") for tid, row in read_ledger(source).items()}
    return {t["id"]: t for t in json.loads(source.read_text())["tasks"]}


def merged_rows(sources: list[Path]) -> dict[str, dict[str, Any]]:
    """The finished rows of several sources (a pass run in parts), the later source winning per task."""
    rows: dict[str, dict[str, Any]] = {}
    for source in sources:
        rows.update({k: v for k, v in load_rows(source).items() if v.get("status") != "pending"})
    return rows


def runtimes(row: dict[str, Any]) -> list[float | None]:
    """Runtime (ms) of each evaluated attempt in order; None where it was not correct."""
    return [
        a.get("runtime_ms") if a.get("status") == "correct" and a.get("runtime_ms") else None
        for a in row.get("attempts") or []
    ]


def best_at(row: dict[str, Any]) -> int | None:
    """The evaluation (from 1) of a row's fastest correct attempt, or None when none was correct."""
    times = runtimes(row)
    timed = [t for t in times if t is not None]
    return times.index(min(timed)) + 1 if timed else None


def first_within(times: list[float | None], target: float, tolerance: float) -> int | None:
    for i, t in enumerate(times, 1):
        if t is not None and t <= target * (1 + tolerance):
            return i
    return None


def designs(row: dict[str, Any]) -> list[str]:
    """The `# kernelwright:` header of each evaluated attempt, in order (the program's design and config)."""
    return [
        (a.get("design") or "").removeprefix("# kernelwright:").strip() for a in row.get("attempts") or []
    ]


def compare(
    cold: dict[str, dict[str, Any]], warm: dict[str, dict[str, Any]], tolerance: float
) -> dict[str, Any]:
    per_task = []
    for tid, c in cold.items():
        w = warm.get(tid)
        if not (w and c.get("correct") and w.get("correct")):
            continue
        ct, wt = runtimes(c), runtimes(w)
        cold_to_best = best_at(c)
        if cold_to_best is None:
            continue
        best = ct[cold_to_best - 1]
        assert best is not None
        reach = first_within(wt, best, tolerance)
        # The same kernel can time differently in two sessions (another GPU of the model, other clocks):
        # writing the cold pass's best program (its header) counts as reaching it too.
        best_header = designs(c)[cold_to_best - 1]
        wrote = next((i for i, (h, t) in enumerate(zip(designs(w), wt, strict=False), 1)
                      if h == best_header and t is not None), None)  # fmt: skip
        wbest = min(t for t in wt if t is not None)
        per_task.append({
            "task": tid,
            "cold_evaluations": len(ct),
            "cold_to_best": cold_to_best,
            "warm_evaluations": len(wt),
            "warm_to_reach": reach,
            "warm_to_kernel": wrote,
            "warm_to_either": min((x for x in (reach, wrote) if x is not None), default=None),
            "cold_speedup": c.get("speedup_vs_eager"),
            "warm_speedup": w.get("speedup_vs_eager"),
            "warm_best_vs_cold_best": best / wbest,
        })  # fmt: skip
    cold_sum = sum(r["cold_to_best"] for r in per_task)
    warm_sum = sum(r["warm_to_reach"] or r["warm_evaluations"] for r in per_task)
    either_sum = sum(r["warm_to_either"] or r["warm_evaluations"] for r in per_task)
    geo = (
        math.exp(sum(math.log(r["warm_best_vs_cold_best"]) for r in per_task) / len(per_task))
        if per_task
        else None
    )
    return {
        "tolerance": tolerance,
        "tasks": len(per_task),
        "cold_evaluations_to_best": cold_sum,
        "warm_evaluations_to_reach": warm_sum,
        "ratio": warm_sum / cold_sum if cold_sum else None,
        "warm_evaluations_to_kernel_or_time": either_sum,
        "ratio_kernel_or_time": either_sum / cold_sum if cold_sum else None,
        # every task takes at least one evaluation: beyond that floor, the search's own cost
        "cold_beyond_first": cold_sum - len(per_task),
        "warm_beyond_first": warm_sum - len(per_task),
        "warm_beyond_first_kernel_or_time": either_sum - len(per_task),
        "not_reached": [r["task"] for r in per_task if r["warm_to_reach"] is None],
        "reached_at_first": sum(1 for r in per_task if r["warm_to_reach"] == 1),
        "cold_best_at_first": sum(1 for r in per_task if r["cold_to_best"] == 1),
        "geomean_warm_best_over_cold_best": geo,
        "per_task": per_task,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cold", type=Path, required=True)
    ap.add_argument("--warm", type=Path, nargs="+", required=True)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--json", type=Path, help="write the full comparison here")
    args = ap.parse_args()
    got = compare(load_rows(args.cold), merged_rows(args.warm), args.tolerance)
    if args.json:
        args.json.write_text(json.dumps(got, indent=1) + "\n")
    print(
        f"{got['tasks']} tasks correct in both passes; evaluations to the cold pass's best (within "
        f"{100 * args.tolerance:.0f}%): cold {got['cold_evaluations_to_best']}, warm {got['warm_evaluations_to_reach']}"
        f" (ratio {got['ratio']:.2f}); warm reached it at evaluation 1 on {got['reached_at_first']} tasks (cold's"
        f" best was its first on {got['cold_best_at_first']}); not reached: {len(got['not_reached'])}"
        f" {got['not_reached']}; warm best / cold best runtime, geomean speedup {got['geomean_warm_best_over_cold_best']:.3f}"
    )
    print(
        f"counting a warm evaluation that wrote the cold best program as reaching it: warm"
        f" {got['warm_evaluations_to_kernel_or_time']} (ratio {got['ratio_kernel_or_time']:.2f}); beyond each task's"
        f" first evaluation: cold {got['cold_beyond_first']}, warm {got['warm_beyond_first']}"
        f" ({got['warm_beyond_first_kernel_or_time']} counting the program)"
    )


if __name__ == "__main__":
    main()
