"""Failed candidates per 100, by error kind, from one or more bench folders (their tasks.jsonl).

    python benchmarks/failures_by_kind.py BENCH_DIR [BENCH_DIR ...] [--json]

Used for the rules figure: the same tasks benched with `--rules on` and `--rules off`; a rule that
works prevents the failure it was learned from, so the rate of that kind drops. Also the repeated
failures per 100 candidates (judged candidates that repeated an earlier failure of their task: the same
program up to its config, the same error; nodes/repeats.py), the repeats stopped before the judge, and,
from `bench --unseen`, the share of best kernels that hold at unseen sizes.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def rates(bench: Path) -> dict[str, object]:
    latest: dict[str, dict] = {}
    for line in (bench / "tasks.jsonl").read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        latest[row["id"]] = row
    attempts = [a for row in latest.values() for a in row.get("attempts") or []]
    failed = Counter(a.get("error_kind") or "unknown" for a in attempts if a.get("status") != "correct")
    n = len(attempts)
    candidates = sum(int(r.get("candidates") or len(r.get("attempts") or [])) for r in latest.values())
    repeats = sum(int(r.get("repeats") or 0) for r in latest.values())
    blocked = sum(int(r.get("blocked") or 0) for r in latest.values())
    checked = [r for r in latest.values() if r.get("holds_unseen") is not None]
    return {
        "bench": str(bench),
        "tasks": len(latest),
        "correct_tasks": sum(1 for r in latest.values() if r.get("correct")),
        "candidates": n,
        "failed": sum(failed.values()),
        "failed_per_100": round(100 * sum(failed.values()) / n, 2) if n else None,
        "by_kind_per_100": {k: round(100 * v / n, 2) for k, v in failed.most_common()} if n else {},
        "repeats": repeats,
        "repeats_per_100": round(100 * repeats / candidates, 2) if candidates else None,
        "blocked": blocked,
        "unseen_checked": len(checked),
        "holds_unseen": sum(1 for r in checked if r.get("holds_unseen")),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benches", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    got = [rates(b) for b in args.benches]
    if args.json:
        print(json.dumps(got, indent=2))
        return
    for r in got:
        kinds = ", ".join(f"{k} {v}" for k, v in r["by_kind_per_100"].items()) or "none"  # type: ignore[union-attr]
        print(f"{r['bench']}: {r['tasks']} tasks ({r['correct_tasks']} correct), {r['candidates']} candidates, "
              f"{r['failed']} failed = {r['failed_per_100']} per 100 ({kinds}); repeated failures "
              f"{r['repeats']} = {r['repeats_per_100']} per 100, {r['blocked']} stopped before the judge; "
              f"{r['holds_unseen']}/{r['unseen_checked']} best kernels hold at unseen sizes")  # fmt: skip


if __name__ == "__main__":
    main()
