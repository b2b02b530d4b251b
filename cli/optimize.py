"""`kernelwright optimize PATH`: search for a verified, faster Triton kernel for a task (or a folder).

    kernelwright optimize PATH [--model SPEC] [--base-url URL] [--budget N] [--device auto|cpu|cuda]
                          [--memory DIR|URL|off|fresh] [--rules on|off] [--out DIR] [--workers N]
                          [--resume RUN_DIR] [--allow-tf32] [--seed N] [--json]

PATH is a task file (KernelBench format) or a folder of them (every *.py not starting with "_"). The
run directory (--out DIR, else <runs root>/<task>-<id>, the runs root being ~/.kernelwright/runs or
$KERNELWRIGHT_RUNS) gets kernel.py, result.json, report.html, the checkpoints and the evaluation log.
For a folder, --out DIR (else <runs root>/<folder>-<id>) gets one subfolder per task and summary.json
and summary.txt. An interrupted run continues with --resume RUN_DIR.

Everything is checked before anything starts or is made: the flags (a GPU asked for must be visible, a
target must be known), the output folder (one that holds another run is refused: resume that run or give
another folder), the memory (it must be writable), the model, and every task (a folder's broken tasks are
named at once and skipped).

Progress is one line per finished candidate (node, action, design, result and, for a failure, the first
line of its error, best so far) on stderr when --json is given (stdout then holds only the JSON
result), else on stdout.

Exit status: 0 when the run(s) finished, whatever they found (the verdict says it plainly); 1 when a
run failed, or a task of a folder did not load; 2 for bad input (flags, a task that does not load, an
output folder or memory that cannot be used, a model that cannot be used); 3 when a service the run
depends on kept failing past its retry time, the model provider (KERNELWRIGHT_LLM_RETRY_S) or the memory
server (KERNELWRIGHT_MEMORY_RETRY_S): the run is checkpointed, continue it with --resume RUN_DIR; 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import textwrap
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from kernelwright.graphs.optimize import Progress
    from kernelwright.nodes.records import Attempt, OptimizeResult
    from kernelwright.nodes.run_context import Context

PROG = "kernelwright optimize"
EXIT_FAILED, EXIT_BAD_INPUT, EXIT_PROVIDER, EXIT_INTERRUPTED = 1, 2, 3, 130
SUMMARY_JSON, SUMMARY_TEXT = "summary.json", "summary.txt"
WIDTH = 80
"""Printed summaries fit this many columns, also when piped."""


class UsageError(ValueError):
    """Bad input found before anything started; the message is one line."""


def int_at_least(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "optimize",
        help="search for a verified, faster Triton kernel for a task file or a folder of tasks",
        description="Search a tree of candidate Triton kernels for a KernelBench-format task. Flags not "
        "given fall back to the KERNELWRIGHT_* environment variables, then to the defaults shown.",
        epilog="Exit status: 0 finished (whatever was found), 1 a run failed or a task of a folder did "
        "not load, 2 bad input, 3 the model provider or the memory server kept failing (continue with "
        "--resume RUN_DIR), "
        "130 interrupted.",
    )
    p.add_argument(
        "path",
        nargs="?",
        help="task file or folder of task files, or a bundled task or suite by name (level1/09_softmax, "
        "level1); not needed with --resume",
    )
    p.add_argument(
        "--model",
        default=None,
        help="offline | openai:<model> | provider:model | served name (default: offline; $KERNELWRIGHT_MODEL)",
    )
    p.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (default: none; $KERNELWRIGHT_BASE_URL)",
    )
    p.add_argument(
        "--budget",
        type=int_at_least(1),
        default=None,
        help="candidate kernels to try, at least 1 (default: 8; $KERNELWRIGHT_BUDGET)",
    )
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default=None,
        help="where candidates run (default: auto, a GPU when there is one; $KERNELWRIGHT_DEVICE)",
    )
    p.add_argument(
        "--target", default=None, help="hardware profile to write for (default: detected from --device)"
    )
    p.add_argument(
        "--memory",
        default=None,
        metavar="DIR_OR_URL",
        help="memory folder or Chroma server URL; off: none; fresh: an empty one in the run folder "
        "(default: ~/.kernelwright; $KERNELWRIGHT_MEMORY)",
    )
    add_rules_argument(p)
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="run directory; for a folder PATH, one subfolder per task "
        "(default: ~/.kernelwright/runs/<task>-<id>; $KERNELWRIGHT_RUNS sets the runs root)",
    )
    p.add_argument(
        "--workers", type=int_at_least(1), default=None, help="evaluation worker processes (default: 1)"
    )
    p.add_argument(
        "--fanout",
        type=int_at_least(0),
        default=None,
        help="expansions in flight (default: 0, one per worker)",
    )
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue an interrupted run")
    p.add_argument("--allow-tf32", action="store_true", default=None, help="allow TF32 for fp32 matmul/conv")
    p.add_argument("--seed", type=int, default=None, help="search and verification seed (default: 0)")
    p.add_argument("--json", action="store_true", help="print the result(s) as JSON on stdout")
    p.set_defaults(func=main, path_is_dir=False)


def add_rules_argument(p: argparse.ArgumentParser) -> None:
    """`--rules on|off`, the same for optimize and bench (read by context_from_args)."""
    p.add_argument(
        "--rules",
        choices=["on", "off"],
        default=None,
        help="inject and learn validity rules (default: on; $KERNELWRIGHT_RULES); off: cases only",
    )


def context_from_args(args: argparse.Namespace, base: Context | None = None) -> Context:
    """A Context from the flags given; flags not given keep `base` (or the env/defaults)."""
    from kernelwright.nodes.run_context import Context

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
        "rules": None if getattr(args, "rules", None) is None else args.rules == "on",
    }
    return dataclasses.replace(ctx, **{k: v for k, v in overrides.items() if v is not None})


# -- progress -------------------------------------------------------------------------------------------


def _speed(a: Attempt | None) -> str:
    if a is None:
        return "none yet"
    s = a.timing.speedup_vs_eager
    if s is None:
        return f"{a.node_id} (correct, untimed)"
    tag = " [test timing]" if a.timing.origin == "test" else ""
    return f"{a.node_id} {s:.2f}x{tag}"


REASON_CHARS = 100


def failure_reason(a: Attempt) -> str:
    """The first line of what stopped a candidate, shortened for a progress line."""
    first = next((ln.strip() for ln in (a.result.error or "").splitlines() if ln.strip()), "")
    return first if len(first) <= REASON_CHARS else first[: REASON_CHARS - 3] + "..."


class ProgressPrinter:
    """One line per finished candidate: node, action, design, result (and why it failed), best so far."""

    def __init__(self, console: Console, label: str = "") -> None:
        self.console = console
        self.label = label

    def __call__(self, ev: Progress) -> None:
        from kernelwright.nodes.compiler import SAME_PROGRAM  # loaded by the run already

        c = self.console
        prefix = f"[dim]{self.label}[/] " if self.label else ""
        if ev.kind == "started" and ev.run is not None:
            r = ev.run
            # a folder's runs are labelled with their task's name: said once
            head = "" if self.label == r.task_name else prefix
            c.print(
                f"{head}[bold]{r.task_name}[/]: model {r.model}, target {r.target}, device {r.device}, "
                f"budget {ev.budget} -> {r.run_dir}",
                highlight=False,
            )
            if not r.timing_meaningful:
                c.print(f"{prefix}[yellow]{r.timing_note}[/]")
        elif ev.kind == "attempt" and ev.attempt is not None:
            a = ev.attempt
            reason = ""
            same = a.result.extra.get(SAME_PROGRAM)
            if same:  # judged once: its verdict is that program's line
                plain = f"same program as {same}"
                styled = f"[{'green' if a.status == 'correct' else 'red'}]{plain}[/]"
            elif a.status == "correct":
                s = a.timing.speedup_vs_eager
                plain = f"correct {s:.2f}x" if s is not None else "correct (untimed)"
                styled = f"[green]{plain}[/]"
            else:
                plain = f"{a.status} {a.result.error_kind or ''}".strip()
                styled = f"[red]{plain}[/]"
                reason = failure_reason(a)
            c.print(
                f"{prefix}[{ev.done:>3}/{ev.budget}] {a.node_id:>4} <- {a.parent:<4} {a.action:<10} "
                f"{a.candidate.label[:18]:<18} {styled}{' ' * max(1, 26 - len(plain))}"
                f"best: {_speed(ev.best)}" + (f"  [dim]{_escape(reason)}[/]" if reason else ""),
                highlight=False,
            )
        elif ev.kind == "finished" and ev.result is not None:
            res = ev.result
            style = "green" if res.correct and res.slower_than_eager is not True else "bold red"
            earlier = "finished earlier, nothing left to do: " if ev.already_finished else ""
            c.print(f"{prefix}{earlier}[{style}]{_escape(res.verdict)}[/]", highlight=False)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# -- checks before anything starts ----------------------------------------------------------------------


def check_output_folder(path: Path, what: str) -> None:
    """`path` is a writable folder, or can be made as one; else a one-line UsageError."""
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{what} {path}: exists and is not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{what} {path}: the folder is not writable")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{what} {path}: cannot make it, {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: cannot make it, {parent} is not writable")


def check_flags(ctx: Context) -> None:
    """The settings that need no service: the device (a GPU asked for is visible here) and the target
    (a known profile); a one-line UsageError before anything is made."""
    try:
        ctx.check_usable()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def check_run_folder(path: Path, what: str) -> None:
    """`path` can be made or used as a new run's folder: writable, and holding no other run."""
    from kernelwright.graphs.run_files import check_new_run_folder

    check_output_folder(path, what)
    try:
        check_new_run_folder(path, what)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def check_memory_and_model(ctx: Context, *, model: bool = True) -> None:
    """Check the flags, then open the model and the memory (it must be usable and writable), before any
    folder is made. The model first: a model that cannot be used leaves no new memory folder behind."""
    from kernelwright.memory import MemoryLocationError
    from kernelwright.nodes import resources
    from kernelwright.providers.chat import ProviderError

    check_flags(ctx)
    try:
        if model:
            resources.chat_model(ctx)
    except ProviderError as exc:
        raise UsageError(str(exc)) from exc
    if ctx.memory not in (resources.MEMORY_OFF, resources.MEMORY_FRESH):  # fresh: made in the run folder
        try:
            mem = resources.open_shared_memory(ctx.memory)
        except MemoryLocationError as exc:
            raise UsageError(str(exc)) from exc
        if mem.read_only:
            raise UsageError(
                f"memory at {mem.location} is read-only; optimize writes what it learns there: "
                "give --memory a writable folder"
            )


def _task_files(path: Path) -> list[Path]:
    return sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))


# -- running --------------------------------------------------------------------------------------------


def main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kernelwright.memory import MemoryLocationError, MemoryServerError
    from kernelwright.nodes import resources
    from kernelwright.providers.chat import ProviderError, ProviderUnavailable
    from kernelwright.tasks.errors import TaskError

    out = Console(file=sys.stderr if args.json else sys.stdout, soft_wrap=True, emoji=False)
    err = Console(file=sys.stderr, soft_wrap=True, emoji=False)

    def say(message: str) -> None:
        err.print(f"{PROG}: {message}", highlight=False, markup=False)

    try:
        return _main(args, out, say)
    except (ProviderUnavailable, MemoryServerError) as exc:
        say(
            f"{exc}; the run is saved: continue it with kernelwright optimize --resume {exc.run_dir or 'RUN_DIR'}"
        )
        return EXIT_PROVIDER
    except (UsageError, TaskError, ProviderError, MemoryLocationError, ValueError, FileNotFoundError) as exc:
        say(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        say("interrupted; continue with --resume RUN_DIR")
        return EXIT_INTERRUPTED
    except Exception as exc:  # a run folder whose disk is full (or read-only): one line, not a traceback
        from kernelwright.nodes.evaluations import write_failure

        line = write_failure(exc, args.resume or args.out)
        if line is None:
            raise
        say(line)
        return EXIT_BAD_INPUT
    finally:
        resources.close_all()


def _main(args: argparse.Namespace, console: Console, say: Any) -> int:
    from kernelwright.graphs.optimize import read_run_file, run_optimize
    from kernelwright.hardware.targets import resolve_device
    from kernelwright.memory import MemoryServerError
    from kernelwright.nodes import resources
    from kernelwright.providers.chat import ProviderUnavailable
    from kernelwright.tasks.errors import TaskError
    from kernelwright.tasks.loader import check_cpu_size, load_task, resolve_task_path

    if args.resume:
        rd = Path(args.resume)
        saved = read_run_file(rd)
        from kernelwright.nodes.run_context import Context

        ctx = context_from_args(args, Context.from_json(saved.context))
        check_flags(ctx)
        check_memory_and_model(ctx, model=False)  # run_optimize checks the model if work is left
        try:
            result = run_optimize(None, ctx, rd, resume=True, on_progress=ProgressPrinter(console))
        except (ProviderUnavailable, MemoryServerError) as exc:
            exc.run_dir = str(rd)
            raise
        return _finish(args, console, [(result.task, result, "")], None)
    if not args.path:
        raise UsageError("give a task file or folder (or --resume RUN_DIR)")
    path = resolve_task_path(args.path)  # a bundled task or suite by name, from any folder: level1/09_softmax
    if not path.exists():
        raise UsageError(f"{path}: no such task file or folder")
    ctx = context_from_args(args)
    check_flags(ctx)
    if path.is_file():
        run_dir = Path(args.out) if args.out else None
        if run_dir is not None:
            check_run_folder(run_dir, "--out")
        else:
            check_output_folder(Path(ctx.runs_root).expanduser(), "runs root")
        # The judges import torch and Triton while this process loads the task and opens memory and model
        # (relu on the CPU: the judge started 6.4 s into a 10.3 s run, after them); main() closes the pool
        # whatever happens next.
        resources.start_worker_pool(ctx)
        note = check_cpu_size(
            load_task(path), resolve_device(ctx.device)
        )  # a task that does not load: one line, now
        if note:
            say(note)
        check_memory_and_model(ctx)
        try:
            result = run_optimize(path, ctx, run_dir, on_progress=ProgressPrinter(console))
        except (ProviderUnavailable, MemoryServerError) as exc:
            exc.run_dir = exc.run_dir or (str(run_dir) if run_dir else None)
            raise
        return _finish(args, console, [(path.stem, result, "")], None)

    args.path_is_dir = True
    files = _task_files(path)
    if not files:
        raise UsageError(f"{path}: no task files (*.py)")
    out_root = Path(args.out) if args.out else ctx.default_run_dir(path.resolve().name, uuid.uuid4().hex)
    check_output_folder(out_root, "--out" if args.out else "runs root")
    for f in files:  # one folder per task run: none may hold another run
        check_run_folder(out_root / f.stem, "--out" if args.out else "runs root")
    resources.start_worker_pool(ctx)  # its judges start while the tasks load (see above)
    # Every task loads before the first run starts: a broken one is named now, not when its turn comes.
    loaded: list[Path] = []
    results: list[tuple[str, OptimizeResult | None, str]] = []
    for f in files:
        try:
            note = check_cpu_size(load_task(f), resolve_device(ctx.device))
            if note:
                say(note)
            loaded.append(f)
        except TaskError as exc:
            say(f"{f.stem}: {exc} (skipped)")
            results.append((f.stem, None, str(exc)))
    if not loaded:
        raise UsageError(f"{path}: none of its {len(files)} task files loads")
    check_memory_and_model(ctx)
    if ctx.memory == resources.MEMORY_FRESH:  # one empty store for the folder's runs, so they learn together
        ctx = dataclasses.replace(ctx, memory=str(out_root.resolve() / "memory"))
    for f in loaded:
        try:
            res = run_optimize(
                f, ctx, out_root / f.stem, on_progress=ProgressPrinter(console, f.stem), close_pools=False
            )
            results.append((f.stem, res, ""))
        except (ProviderUnavailable, MemoryServerError) as exc:
            exc.run_dir = exc.run_dir or str(out_root / f.stem)
            raise
        except (TaskError, ValueError) as exc:
            say(f"{f.stem}: {exc}")
            results.append((f.stem, None, str(exc)))
    order = {f.stem: i for i, f in enumerate(files)}
    results.sort(key=lambda r: order[r[0]])
    return _finish(args, console, results, out_root)


def summary_text(results: list[tuple[str, OptimizeResult | None, str]]) -> str:
    """The folder summary as plain text that reads at 80 columns: one row per task, its verdict below."""
    name_w = min(34, max([4, *(len(n) for n, _, _ in results)]))
    header = f"{'task':<{name_w}}  {'correct':<7}  {'vs eager':>8}  {'vs compile':>10}  {'tried':>5}"
    lines = ["kernelwright optimize: summary", header, "-" * len(header)]
    wrap = textwrap.TextWrapper(width=WIDTH, initial_indent="    ", subsequent_indent="    ")
    for name, res, err in results:
        shown = name if len(name) <= name_w else name[: name_w - 1] + "~"
        if res is None:
            lines.append(f"{shown:<{name_w}}  {'error':<7}  {'':>8}  {'':>10}  {'':>5}")
            lines.extend(wrap.wrap(err or "the run did not finish"))
            continue
        b = res.best
        eager = f"{b.speedup_vs_eager:.2f}x" if b and b.speedup_vs_eager is not None else ""
        comp = f"{b.speedup_vs_compile:.2f}x" if b and b.speedup_vs_compile is not None else ""
        tried = str(res.search.get("finished", ""))
        lines.append(
            f"{shown:<{name_w}}  {'yes' if res.correct else 'no':<7}  {eager:>8}  {comp:>10}  {tried:>5}"
        )
        lines.extend(wrap.wrap(res.verdict))
    return "\n".join(lines) + "\n"


def _print_paths(console: Console, result: OptimizeResult) -> None:
    rd = Path(result.run_dir)
    files = [rd / n for n in ("kernel.py", "result.json", "report.html") if (rd / n).exists()]
    console.print("wrote: " + ", ".join(str(f) for f in files), highlight=False, markup=False)


def _finish(
    args: argparse.Namespace,
    console: Console,
    results: list[tuple[str, OptimizeResult | None, str]],
    out_root: Path | None,
) -> int:
    payload = [r.model_dump(mode="json") if r else {"task": n, "error": e} for n, r, e in results]
    if out_root is not None:
        out_root.mkdir(parents=True, exist_ok=True)
        (out_root / SUMMARY_JSON).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        (out_root / SUMMARY_TEXT).write_text(summary_text(results), encoding="utf-8")
    if args.json:
        from kernelwright.cli.stdout_json import print_json

        print_json(
            json.dumps(payload[0] if len(payload) == 1 and not args.path_is_dir else payload, indent=2)
        )
    else:
        if out_root is not None:
            console.print(summary_text(results), highlight=False, markup=False, end="")
        for _, r, _ in results:
            if r is not None:
                _print_paths(console, r)
        if out_root is not None:
            console.print(f"summary: {out_root / SUMMARY_JSON}, {out_root / SUMMARY_TEXT}", highlight=False)
    return 0 if all(r is not None for _, r, _ in results) else EXIT_FAILED
