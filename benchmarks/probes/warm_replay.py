"""Would a warm pass start from the cold pass's best kernel? An offline replay of the root step.

    python benchmarks/probes/warm_replay.py COLD_BENCH_DIR [--hardware nvidia-h200] [--json OUT]

For every task the cold bench (`kernelwright bench ... --memory fresh`) finished correct, the root large
step's prompt is built as the graph's context node builds it (nodes/context_builder.build_context, with
the cold pass's memory, a copy of it, and the cold run's target) and answered by the offline writer.
Counted: tasks whose first program is the cold pass's best kernel (same family, design and config), i.e.
where a warm pass would reach the cold best at its first evaluation. Nothing is timed: this checks the
mechanism (retrieval, then the writer's pick) on the recorded experience, without a GPU. The speed figure
itself is benchmarks/warm_cold.py on two real passes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from kernelwright.hardware.targets import get_target
from kernelwright.memory import open_memory
from kernelwright.tasks import load_task

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common, warm_cold
from _common import root_program  # noqa: E402
from warm_cold import best_at, designs, load_rows  # noqa: E402


def _header(design: str) -> str:
    return design.removeprefix("# kernelwright:").strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cold", type=Path)
    ap.add_argument("--hardware", default="nvidia-h200")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    bench = json.loads((args.cold / "bench.json").read_text())
    ctx = bench["context"]
    target = get_target(args.hardware)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "memory"
        shutil.copytree(args.cold / "memory", store)
        memory = open_memory(str(store))
        rows = []
        for tid, row in load_rows(args.cold).items():
            if not row.get("correct"):
                continue
            cold_best_at = best_at(row)
            assert cold_best_at is not None  # a correct row has a correct attempt
            best = designs(row)[cold_best_at - 1]
            task = load_task(row["path"] if Path(row["path"]).exists() else Path("tasks") / f"{tid}.py")
            answer = root_program(
                task, target, memory=memory, budget=ctx.get("context_tokens") or 6000,
                precision="tf32" if ctx.get("allow_tf32") else "strict", seed=ctx.get("seed") or 0,
                hardware=args.hardware,
            )  # fmt: skip
            first = _header((answer.code or "").splitlines()[0] if answer.code else "")
            rows.append({"task": tid, "cold_best_at": cold_best_at, "first_is_cold_best": first == best,
                         "first": first, "cold_best": best})  # fmt: skip
        memory.close()
    hit = sum(r["first_is_cold_best"] for r in rows)
    later = [r for r in rows if r["cold_best_at"] > 1]
    hit_later = sum(r["first_is_cold_best"] for r in later)
    print(f"{hit}/{len(rows)} tasks: the root program is the cold pass's best kernel "
          f"({hit_later}/{len(later)} of those whose cold best came after evaluation 1)")  # fmt: skip
    if args.json:
        args.json.write_text(
            json.dumps({"tasks": len(rows), "first_is_cold_best": hit, "rows": rows}, indent=1)
        )


if __name__ == "__main__":
    main()
