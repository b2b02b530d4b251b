"""`kernelwright optimize-model FILE[:CLASS]`: optimize a whole model region by region (graphs/model.py).

FILE is a KernelBench-format file (its get_init_inputs builds the model, its get_inputs are the example
inputs); CLASS names the model class when it is not `Model`. Progress goes to stderr, one line per region
signature (regions done / total, evaluations, best region speedup so far); the region table is in the run
folder's model.md and model.json. Exit status: 0 finished (whatever was found), 1 the run failed, 2 bad
input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kernelwright.cli.optimize import int_at_least

PROG = "kernelwright optimize-model"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "optimize-model",
        help="optimize a whole model region by region, then judge the stitched model",
        description="Split a model into regions (a library operation with its epilogue, or a chain of "
        "pointwise/reduction/norm operators), search each distinct region once (reusing kernels memory "
        "holds), stitch the kernels into one ModelNew and judge it as a candidate of the model's task.",
        epilog="Exit status: 0 finished, 1 the run failed, 2 bad input.",
    )
    p.add_argument("path", metavar="FILE[:CLASS]", help="a KernelBench-format model file, optionally :CLASS")
    p.add_argument("--model", default=None, help="chat model (default: offline; $KERNELWRIGHT_MODEL)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server ($KERNELWRIGHT_BASE_URL)")
    p.add_argument(
        "--budget", type=int_at_least(1), default=None, help="candidates per region signature (default: 8)"
    )
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None, help="where candidates run")
    p.add_argument("--target", default=None, help="hardware profile to write for")
    p.add_argument("--memory", default=None, metavar="DIR_OR_URL", help="memory location; off; fresh")
    p.add_argument("--rules", choices=["on", "off"], default=None, help="inject and learn validity rules")
    p.add_argument(
        "--out", default=None, metavar="DIR", help="run folder (default: ~/.kernelwright/runs/...)"
    )
    p.add_argument("--workers", type=int_at_least(1), default=None, help="evaluation worker processes")
    p.add_argument(
        "--fanout", type=int_at_least(0), default=None, help="expansions in flight (0: one per worker)"
    )
    p.add_argument("--allow-tf32", action="store_true", default=None, help="allow TF32 for fp32 matmul/conv")
    p.add_argument("--seed", type=int, default=None, help="search and verification seed")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=main)


def _fail(message: str, status: int = 2) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return status


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kernelwright.cli.optimize import context_from_args
    from kernelwright.graphs.model import ModelProgress, optimize_model_file
    from kernelwright.nodes import resources
    from kernelwright.tasks.regions import SplitError

    file, _, class_name = str(args.path).partition(":")
    if not Path(file).is_file():
        return _fail(f"model file not found: {file}")
    try:
        ctx = context_from_args(args)
        ctx.check_usable()
    except ValueError as exc:
        return _fail(str(exc))

    def show(p: ModelProgress) -> None:
        best = f"{p.best:.2f}x" if p.best is not None else "untimed"
        print(f"{p.model}: {p.done}/{p.total} region signatures, {p.evaluations} evaluations, best region "
              f"{best} | {p.line}", file=sys.stderr, flush=True)  # fmt: skip

    try:
        result = optimize_model_file(file, class_name or None, ctx, run_dir=args.out, on_progress=show)
    except (SplitError, ValueError) as exc:
        return _fail(str(exc).splitlines()[0])
    except Exception as exc:
        return _fail(
            f"the run failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1
        )
    finally:
        resources.close_all()
    if args.json:
        from kernelwright.cli.stdout_json import print_json

        print_json(result.model_dump_json(indent=2))
    else:
        print(Path(result.run_dir, "model.md").read_text(encoding="utf-8"))
        print(f"run folder: {result.run_dir}")
    return 0
