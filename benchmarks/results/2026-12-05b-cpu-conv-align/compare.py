"""Spills at unseen sizes before (../2026-12-05-cpu-unseen-spills, at c10749a) and after (all.jsonl here): per
task whose root program spills, or fails to compile, at some size in either sweep, the most spill-store bytes
per thread of any of its kernels at its own size and at each unseen size.

    python benchmarks/results/2026-12-05b-cpu-conv-align/compare.py
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
BEFORE = HERE.parent / "2026-12-05-cpu-unseen-spills"


def _rows(*paths: Path) -> dict[str, dict]:
    return {row["task"]: row for p in paths for row in map(json.loads, p.read_text().splitlines())}


def _sizes(row: dict) -> list[object]:
    """Per size: the most spill bytes of a kernel, or the compile's error."""
    out: list[object] = []
    for r in row["rows"]:
        if "kernels" not in r:
            out.append(f"error {r.get('exc') or r.get('unseen_error')}")
        elif not r["ok"]:
            out.append(f"failed {r['err']}")
        else:
            out.append(max((k[2] or 0) for k in r["kernels"]))
    return out


def main() -> None:
    before = _rows(BEFORE / "l12.jsonl", BEFORE / "pub.jsonl")
    after = _rows(HERE / "all.jsonl")
    for task, row in after.items():
        a, b = _sizes(before[task]) if task in before else [], _sizes(row)
        if any(x != 0 for x in a + b):
            print(f"{task}: before {a} after {b}")
    print(f"{len(after)} tasks after, {len(before)} before")


if __name__ == "__main__":
    main()
