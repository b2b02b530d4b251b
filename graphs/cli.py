"""The `kernelwright` command: one subcommand per public job.

Each subcommand lives in its own module (graphs/cli_<name>.py) exposing `add_parser(subparsers)` that
registers the subcommand with `set_defaults(func=...)`; `func(args) -> int` is the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ("eval", "optimize", "memory")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelwright",
        description="Turn PyTorch reference programs into fast, verified Triton kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"graphs.cli_{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"graphs.cli_{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
