"""`kernelwright tasks generate --out DIR [--count N] [--seed S] [--heads H,H]`: write tasks no one wrote by hand;
`kernelwright tasks variant --dtype bfloat16|float16 --out DIR PATH ...`: the same tasks in bf16 or fp16.

Each file is a KernelBench-format task (a head: Linear, matmul, batched matmul or Conv2d; one to three
pointwise ops; an optional reduction, softmax or norm), with small inputs for the CPU interpreter, drawn
with the seed (tasks.generate). The folder also gets `tasks.json` (seed, count, each task's chain) and
works as given with `kernelwright optimize DIR` and `kernelwright bench DIR`.

A variant (tasks.variant) is a task's own text with its model's parameters and buffers and its
floating-point inputs in the dtype; PATH are task files or folders of them.

Exit status 0 when the tasks were written; 2 for bad input (a count below 1, a folder that is not empty
or cannot be made, a file that is not a task), with one line that says so.
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
    g.add_argument(
        "--heads",
        default="",
        metavar="H,H",
        help="draw the heads from these (default: linear,matmul,bmm,conv2d); also conv2d_depthwise and "
        "conv2d_few_channels, drawn only when named",
    )
    g.set_defaults(func=generate)
    v = sub.add_parser(
        "variant",
        help="write tasks again with their model and inputs in bfloat16 or float16",
        description=(__doc__ or "").split("\n\n")[2],
    )
    v.add_argument("paths", nargs="+", metavar="PATH", help="task files, or folders of task files")
    v.add_argument("--dtype", required=True, choices=["bfloat16", "float16"])
    v.add_argument("--out", required=True, metavar="DIR", help="folder to write into (new or empty)")
    v.set_defaults(func=variant)

    def no_action(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=no_action)


def _new_or_empty(out: Path) -> None:
    """--out must be a folder that can be made or written, new or empty (UsageError otherwise)."""
    from kernelwright.cli.optimize import UsageError, check_output_folder

    check_output_folder(out, "--out")
    if out.is_dir() and any(out.iterdir()):
        raise UsageError(f"--out {out}: the folder is not empty; give a new or empty folder")


def generate(args: argparse.Namespace) -> int:
    from kernelwright.cli.optimize import UsageError
    from kernelwright.tasks.generate import HEADS, check_heads, generate_tasks

    out = Path(args.out)
    heads: tuple[str, ...] = HEADS
    try:
        if args.count < 1:
            raise UsageError(f"--count {args.count}: give at least 1")
        if args.heads:
            try:
                heads = check_heads(tuple(h.strip() for h in args.heads.split(",") if h.strip()))
            except ValueError as exc:
                raise UsageError(f"--heads {args.heads}: {exc}") from None
        _new_or_empty(out)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    tasks = generate_tasks(args.count, args.seed, heads)
    out.mkdir(parents=True, exist_ok=True)
    for t in tasks:
        (out / f"{t.name}.py").write_text(t.source, encoding="utf-8")
    manifest: dict[str, Any] = {"seed": args.seed, "count": args.count}
    if heads != HEADS:
        manifest["heads"] = list(heads)
    manifest["tasks"] = [{"name": t.name, "chain": list(t.chain)} for t in tasks]
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    for t in tasks:
        print(f"{t.name}.py")
    print(f"wrote {len(tasks)} tasks (seed {args.seed}) to {out}", file=sys.stderr)
    return 0


def variant(args: argparse.Namespace) -> int:
    from kernelwright.cli.optimize import UsageError
    from kernelwright.tasks.variant import dtype_variant

    out = Path(args.out)
    try:
        _new_or_empty(out)
        files: list[Path] = []
        for raw in args.paths:
            path = Path(raw)
            if path.is_dir():
                files += sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
            elif path.is_file():
                files.append(path)
            else:
                raise UsageError(f"{raw}: no such task file or folder")
        if not files:
            raise UsageError("no task files in " + ", ".join(args.paths))
        written = {}
        for f in files:
            try:
                written[f.name] = dtype_variant(f.read_text(encoding="utf-8"), args.dtype)
            except ValueError as exc:
                raise UsageError(f"{f}: {exc}") from None
        if len(written) < len(files):
            raise UsageError("two task files of one name: write them to separate folders")
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for name, text in written.items():
        (out / name).write_text(text, encoding="utf-8")
        print(name)
    variants = "variant" if len(written) == 1 else "variants"
    print(f"wrote {len(written)} {args.dtype} {variants} to {out}", file=sys.stderr)
    return 0
