"""The `kernelwright` command: one subcommand per public job.

Each subcommand lives in its own module (cli/<name>.py) exposing `add_parser(subparsers)` that
registers the subcommand with `set_defaults(func=...)`; `func(args) -> int` is the exit status.
Those modules import nothing heavy (torch, LangGraph, Chroma, rich) at module level: `--help`, `--version`
and argument errors answer before any of it loads.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import NoReturn

SUBCOMMANDS = ("optimize", "model", "bench", "eval", "show", "memory", "tasks")


def version() -> str:
    from kernelwright import __version__  # the one place it is written (pyproject.toml reads it there)

    return __version__


class OneLineParser(argparse.ArgumentParser):
    """Argument errors as one line (what was wrong, and where help is), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="kernelwright",
        description="Turn PyTorch reference programs into fast, verified Triton kernels.",
    )
    parser.add_argument("--version", action="version", version=f"kernelwright {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"kernelwright.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"kernelwright.cli.{name}":
                raise
            continue
        module.add_parser(sub)
    return parser


class _StderrLines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr, flush=True)  # the sys.stderr of each line's moment


def show_waits() -> None:
    """Lines of the `kernelwright.wait` logger (a model retried or slow to answer, a memory server not
    answering: providers/chat.py, memory/http_retry.py) go to stderr, one plain line each."""
    log = logging.getLogger("kernelwright.wait")
    if not log.handlers:
        log.addHandler(_StderrLines(logging.INFO))
        log.setLevel(logging.INFO)
        log.propagate = False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from kernelwright.hardware.isolation.confine import confine_level

    try:
        confine_level()  # a bad KERNELWRIGHT_CONFINE is one clear line, before anything runs
    except ValueError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    show_waits()
    if getattr(args, "json", False):
        from kernelwright.cli.stdout_json import json_only_stdout

        with json_only_stdout():  # stdout holds the JSON only; what tasks print goes to stderr
            return int(args.func(args) or 0)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
