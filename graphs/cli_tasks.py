"""`kernelwright tasks generate --out DIR [--count N] [--seed S]`: write tasks no one wrote by hand.

Each file is a KernelBench-format task (a head: Linear, matmul, batched matmul or Conv2d; one to three
pointwise ops; an optional reduction, softmax or norm), with small inputs for the CPU interpreter, drawn
with the seed (tasks.generate). The folder also gets `tasks.json` (seed, count, each task's chain) and
works as given with `kernelwright optimize DIR` and `kernelwright bench DIR`.

Exit status 0 when the tasks were written; 2 for bad input (a count below 1, a folder that is not empty
or cannot be made), with one line that says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

PROG = "kernelwright tasks"
MANIFEST = "tasks.json"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tasks",
        help="make tasks: `tasks generate` writes seeded, random chains of supported operators",
        description="Make task files.",
    )
    sub = p.add_subparsers(dest="tasks_command", metavar="ACTION")
    g = sub.add_parser(
        "generate",
        help="write random but valid KernelBench-format tasks, reproducibly from a seed",
        description=(__doc__ or "").split("\n\n")[1],
    )
    g.add_argument("--out", required=True, metavar="DIR", help="folder to write into (new or empty)")
    g.add_argument("--count", type=int, default=30, help="how many tasks (default: 30)")
    g.add_argument("--seed", type=int, default=0, help="seed of the draw (default: 0)")
    g.set_defaults(func=generate)

    def no_action(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=no_action)


def generate(args: argparse.Namespace) -> int:
    from kernelwright.graphs.cli_optimize import UsageError, check_output_folder
    from kernelwright.tasks.generate import generate_tasks

    out = Path(args.out)
    try:
        if args.count < 1:
            raise UsageError(f"--count {args.count}: give at least 1")
        check_output_folder(out, "--out")
        if out.is_dir() and any(out.iterdir()):
            raise UsageError(f"--out {out}: the folder is not empty; give a new or empty folder")
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    tasks = generate_tasks(args.count, args.seed)
    out.mkdir(parents=True, exist_ok=True)
    for t in tasks:
        (out / f"{t.name}.py").write_text(t.source, encoding="utf-8")
    manifest = {"seed": args.seed, "count": args.count,
                "tasks": [{"name": t.name, "chain": list(t.chain)} for t in tasks]}  # fmt: skip
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    for t in tasks:
        print(f"{t.name}.py")
    print(f"wrote {len(tasks)} tasks (seed {args.seed}) to {out}", file=sys.stderr)
    return 0
