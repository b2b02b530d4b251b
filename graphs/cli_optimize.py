"""`kernelwright optimize PATH`: search for a verified, faster Triton kernel for a task (or a folder).

    kernelwright optimize PATH [--model SPEC] [--base-url URL] [--budget N] [--device auto|cpu|cuda]
                          [--memory DIR] [--out DIR] [--workers N] [--resume RUN_DIR] [--allow-tf32]
                          [--seed N] [--json]

PATH is a task file (KernelBench format) or a folder of them (every *.py, then a summary table). The
run directory (--out DIR, else runs/<task>-<id>) gets kernel.py, result.json, report.html, the
checkpoints and the evaluation log; for a folder, --out DIR gets one subfolder per task. An
interrupted run continues with --resume RUN_DIR.

Progress is one line per finished candidate (node, action, result, best so far) on stderr when --json
is given (stdout then holds only the JSON result), else on stdout. Exit status: 0 when the run(s)
finished, whatever they found (the verdict says it plainly); 1 when a run failed; 2 for bad input
(a task that does not load, a model that cannot be used).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from graphs.context import Context
from graphs.optimize import Progress, run_optimize
from nodes import resources
from nodes.records import Attempt, OptimizeResult
from providers.chat import ProviderError
from tasks.errors import TaskError


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "optimize",
        help="search for a verified, faster Triton kernel for a task file or a folder of tasks",
        description="Search a tree of candidate Triton kernels for a KernelBench-format task.",
    )
    p.add_argument("path", nargs="?", help="task file or folder of task files (not needed with --resume)")
    p.add_argument("--model", default=None, help="offline | openai:<model> | provider:model | served name")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--budget", type=int, default=None, help="candidate kernels to try (default 8)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None, help="where candidates run")
    p.add_argument("--target", default=None, help="hardware profile to write for (default: detected)")
    p.add_argument(
        "--memory", default=None, metavar="DIR_OR_URL", help="memory location (default ~/.kernelwright)"
    )
    p.add_argument(
        "--out", default=None, metavar="DIR", help="run directory (folder PATH: one subfolder per task)"
    )
    p.add_argument("--workers", type=int, default=None, help="evaluation worker processes (default 1)")
    p.add_argument("--fanout", type=int, default=None, help="expansions in flight (default: one per worker)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue an interrupted run")
    p.add_argument("--allow-tf32", action="store_true", default=None, help="allow TF32 for fp32 matmul/conv")
    p.add_argument("--seed", type=int, default=None, help="search and verification seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the result(s) as JSON on stdout")
    p.set_defaults(func=main, path_is_dir=False)


def context_from_args(args: argparse.Namespace, base: Context | None = None) -> Context:
    """A Context from the flags given; flags not given keep `base` (or the env/defaults)."""
    ctx = base or Context()
    overrides = {
        "model": args.model,
        "base_url": args.base_url,
        "budget": args.budget,
        "device": args.device,
        "target": args.target,
        "memory": args.memory,
        "workers": args.workers,
        "fanout": args.fanout,
        "allow_tf32": args.allow_tf32,
        "seed": args.seed,
    }
    return dataclasses.replace(ctx, **{k: v for k, v in overrides.items() if v is not None})


def _speed(a: Attempt | None) -> str:
    if a is None:
        return "none yet"
    s = a.timing.speedup_vs_eager
    if s is None:
        return f"{a.node_id} (correct, untimed)"
    tag = " [test timing]" if a.timing.origin == "test" else ""
    return f"{a.node_id} {s:.2f}x{tag}"


class ProgressPrinter:
    """One line per finished candidate: node, action, result, best so far."""

    def __init__(self, console: Console, label: str = "") -> None:
        self.console = console
        self.label = label

    def __call__(self, ev: Progress) -> None:
        c = self.console
        prefix = f"[dim]{self.label}[/] " if self.label else ""
        if ev.kind == "started" and ev.run is not None:
            r = ev.run
            c.print(
                f"{prefix}[bold]{r.task_name}[/]: model {r.model}, target {r.target}, device {r.device}, "
                f"budget {ev.budget} -> {r.run_dir}"
            )
            if not r.timing_meaningful:
                c.print(f"{prefix}[yellow]{r.timing_note}[/]")
        elif ev.kind == "attempt" and ev.attempt is not None:
            a = ev.attempt
            if a.status == "correct":
                s = a.timing.speedup_vs_eager
                plain = f"correct {s:.2f}x" if s is not None else "correct (untimed)"
                styled = f"[green]{plain}[/]"
            else:
                plain = f"{a.status} {a.result.error_kind or ''}".strip()
                styled = f"[red]{plain}[/]"
            design = re.search(r"design=(\S+)", a.candidate.meta or "")
            c.print(
                f"{prefix}[{ev.done:>3}/{ev.budget}] {a.node_id:>4} <- {a.parent:<4} {a.action:<10} "
                f"{(design.group(1) if design else '-')[:18]:<18} {styled}{' ' * max(1, 26 - len(plain))}"
                f"best: {_speed(ev.best)}",
                highlight=False,
            )
        elif ev.kind == "finished" and ev.result is not None:
            res = ev.result
            style = "green" if res.correct and res.slower_than_eager is not True else "bold red"
            c.print(f"{prefix}[{style}]{res.verdict}[/]")


def _task_files(path: Path) -> list[Path]:
    return sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))


def _print_paths(console: Console, result: OptimizeResult) -> None:
    rd = Path(result.run_dir)
    files = [rd / n for n in ("kernel.py", "result.json", "report.html") if (rd / n).exists()]
    console.print("wrote: " + ", ".join(str(f) for f in files), highlight=False)


def _summary_table(results: list[tuple[str, OptimizeResult | None, str]]) -> Table:
    table = Table(title="kernelwright optimize: summary")
    for col in ("task", "correct", "speedup vs eager", "vs torch.compile", "candidates", "verdict"):
        table.add_column(col)
    for name, res, err in results:
        if res is None:
            table.add_row(name, "error", "-", "-", "-", err)
            continue
        b = res.best
        table.add_row(
            name,
            "yes" if res.correct else "no",
            f"{b.speedup_vs_eager:.2f}x" if b and b.speedup_vs_eager is not None else "-",
            f"{b.speedup_vs_compile:.2f}x" if b and b.speedup_vs_compile is not None else "-",
            str(res.search.get("finished", "-")),
            res.verdict,
        )
    return table


def main(args: argparse.Namespace) -> int:
    out = Console(file=sys.stderr if args.json else sys.stdout, soft_wrap=True)
    err = Console(file=sys.stderr, soft_wrap=True)
    try:
        return _main(args, out)
    except (TaskError, ProviderError, ValueError, FileNotFoundError) as exc:
        err.print(f"kernelwright optimize: {exc}", highlight=False, markup=False)
        return 2
    except KeyboardInterrupt:
        err.print("kernelwright optimize: interrupted; continue with --resume RUN_DIR", highlight=False)
        return 130
    finally:
        resources.close_all()


def _main(args: argparse.Namespace, console: Console) -> int:
    if args.resume:
        rd = Path(args.resume)
        base = None
        if (rd / "run.json").is_file():
            saved = json.loads((rd / "run.json").read_text(encoding="utf-8"))
            base = Context.from_json(saved.get("context", {}))
        ctx = context_from_args(args, base)
        result = run_optimize(None, ctx, rd, resume=True, on_progress=ProgressPrinter(console))
        return _finish(args, console, [(result.task, result, "")])
    if not args.path:
        raise ValueError("give a task file or folder (or --resume RUN_DIR)")
    path = Path(args.path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such task file or folder")
    ctx = context_from_args(args)
    if path.is_file():
        from tasks.loader import load_task

        load_task(path)  # a task that does not load is a one-line error before anything starts
        result = run_optimize(path, ctx, args.out, on_progress=ProgressPrinter(console))
        return _finish(args, console, [(path.stem, result, "")])
    args.path_is_dir = True
    files = _task_files(path)
    if not files:
        raise ValueError(f"{path}: no task files (*.py)")
    results: list[tuple[str, OptimizeResult | None, str]] = []
    for f in files:
        run_dir = Path(args.out) / f.stem if args.out else None
        try:
            res = run_optimize(
                f, ctx, run_dir, on_progress=ProgressPrinter(console, f.stem), close_pools=False
            )
            results.append((f.stem, res, ""))
        except (TaskError, ValueError) as exc:
            console.print(f"[red]{f.stem}: {exc}[/]", highlight=False)
            results.append((f.stem, None, str(exc)))
    return _finish(args, console, results)


def _finish(
    args: argparse.Namespace, console: Console, results: list[tuple[str, OptimizeResult | None, str]]
) -> int:
    if args.json:
        payload = [r.model_dump(mode="json") if r else {"task": n, "error": e} for n, r, e in results]
        print(json.dumps(payload[0] if len(payload) == 1 and not args.path_is_dir else payload, indent=2))
    else:
        if len(results) > 1 or getattr(args, "path_is_dir", False):
            console.print(_summary_table(results))
        for _, r, _ in results:
            if r is not None:
                _print_paths(console, r)
    return 0 if all(r is not None for _, r, _ in results) else 1
