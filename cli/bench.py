"""`kernelwright bench PATH...`: optimize every task of one or more folders and report on the suite.

    kernelwright bench PATH... [--out DIR] [--gpus all|I,J,...] [--model SPEC] [--base-url URL]
                       [--budget N] [--device auto|cpu|cuda] [--target NAME]
                       [--memory DIR_OR_URL|off|fresh] [--rules on|off] [--allow-tf32] [--seed N]
                       [--unseen K]
    kernelwright bench --resume DIR [--gpus all|I,J,...]
    ... [--cluster local|local:N|tcp://HOST:8786]   tasks on Dask workers (bench/dask.py)

PATH is a folder of task files (every *.py not starting with "_"; a KernelBench checkout's level1/ or
level2/ works as given) or a task file. One worker process per selected GPU (default: every visible
GPU) takes tasks from a shared queue; without a GPU one CPU worker runs them under the Triton
interpreter, where timings are not meaningful (and are reported as not measured). The bench folder
(--out DIR, else <runs root>/bench-<id>) gets one run directory per task, tasks.jsonl (a row per
finished task, written as it finishes) and suite.json, suite.md and suite.html (see bench/folder.py and
bench/report.py for what they hold). An interrupted bench continues with --resume DIR: finished
tasks are not run again, a task cut off mid-search continues from its run directory.

Exit status: 0 every task has a final outcome (whatever it is: correct, no kernel, harness error); 1 a
task did not load, or a task has no final outcome (its run failed or its worker died: --resume runs it
again); 2 bad input; 3 the model provider kept failing (continue with --resume DIR); 130 stopped by Ctrl-C
or SIGTERM (continue with --resume DIR).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

from kernelwright.cli.optimize import UsageError, add_rules_argument, int_at_least

PROG = "kernelwright bench"
SETTING_FLAGS = ("model", "base_url", "budget", "device", "target", "memory", "allow_tf32", "seed", "unseen")
DEFAULT_UNSEEN = 2


def _gpus(text: str) -> list[int] | None:
    from kernelwright.bench.coordinator import parse_gpus

    try:
        return parse_gpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="optimize every task of one or more folders, one worker per GPU, and report on the suite",
        description="Optimize every task of the folders given (a KernelBench checkout's level1/ works as "
        "given), with one worker per GPU, resumably, and write suite.json, suite.md and suite.html. Flags "
        "not given fall back to the KERNELWRIGHT_* environment variables, then to the defaults shown.",
        epilog="Exit status: 0 every task has a final outcome, 1 a task did not load or has no final "
        "outcome (continue with --resume DIR), 2 bad input, 3 the model provider kept failing (continue "
        "with --resume DIR), 130 stopped by Ctrl-C or SIGTERM (continue with --resume DIR).",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="folders of task files, or task files")
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="bench folder, new or empty (default: ~/.kernelwright/runs/bench-<id>; $KERNELWRIGHT_RUNS)",
    )
    p.add_argument("--resume", default=None, metavar="DIR", help="continue the bench in DIR")
    p.add_argument(
        "--cluster",
        default=None,
        metavar="local|local:N|tcp://HOST:8786",
        help="run the tasks on Dask workers: a cluster started here (one worker per GPU, or N CPU workers) "
        "or a running scheduler (default: worker processes of this command)",
    )
    p.add_argument(
        "--gpus",
        type=_gpus,
        default=None,
        metavar="all|I,J",
        help="GPUs to use, one worker each, by index (default: all visible; none visible: one CPU worker)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="offline | openai:<model> | provider:model | served name (default: offline; $KERNELWRIGHT_MODEL)",
    )
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server (default: none)")
    p.add_argument(
        "--budget",
        type=int_at_least(1),
        default=None,
        help="candidate kernels per task, at least 1 (default: 8; $KERNELWRIGHT_BUDGET)",
    )
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default=None,
        help="where candidates run (default: auto, the GPUs when there are any; $KERNELWRIGHT_DEVICE)",
    )
    p.add_argument("--target", default=None, help="hardware profile to write for (default: detected)")
    p.add_argument(
        "--memory",
        default=None,
        metavar="DIR_OR_URL",
        help="memory folder or Chroma server URL, shared by the workers; off: none; fresh: an empty one "
        "in the bench folder (default: ~/.kernelwright)",
    )
    add_rules_argument(p)
    p.add_argument("--allow-tf32", action="store_true", default=None, help="allow TF32 for fp32 matmul/conv")
    p.add_argument("--seed", type=int, default=None, help="search and verification seed (default: 0)")
    p.add_argument(
        "--unseen",
        type=int_at_least(0),
        default=None,
        metavar="K",
        help="judge each task's best kernel again at K sizes its search never saw, and report whether it "
        f"holds there (default: {DEFAULT_UNSEEN}; 0: off)",
    )
    p.set_defaults(func=main, workers=None, fanout=None)  # one evaluation worker per GPU: timings stay clean


def main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kernelwright.bench.coordinator import EXIT_BAD_INPUT, EXIT_INTERRUPTED
    from kernelwright.bench.folder import BenchError
    from kernelwright.memory import MemoryLocationError
    from kernelwright.nodes import resources
    from kernelwright.providers.chat import ProviderError
    from kernelwright.tasks.errors import TaskError

    err = Console(file=sys.stderr, soft_wrap=True, emoji=False)

    def say(message: str) -> None:
        err.print(f"{PROG}: {message}", highlight=False, markup=False)

    try:
        return _main(args)
    except (BenchError, UsageError, TaskError, ProviderError, MemoryLocationError, ValueError) as exc:
        say(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        where = getattr(args, "bench_dir", None)
        say("interrupted" + (f"; continue with {PROG} --resume {where}" if where else ""))
        return EXIT_INTERRUPTED
    finally:
        resources.close_all()


def _main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from kernelwright.bench.coordinator import plan_slots, run_bench
    from kernelwright.bench.folder import BENCH_FILE, create, discover, read_bench_file, read_ledger
    from kernelwright.bench.report import FINAL_STATUSES
    from kernelwright.cli.optimize import (
        check_memory_and_model,
        check_output_folder,
        context_from_args,
    )
    from kernelwright.nodes import resources
    from kernelwright.nodes.run_context import Context

    console = Console(file=sys.stdout, soft_wrap=True, emoji=False)

    def say(message: str) -> None:
        console.print(message, highlight=False, markup=False)

    if args.resume:
        if args.paths:
            raise UsageError("give either PATH... (a new bench) or --resume DIR, not both")
        given = [f"--{k.replace('_', '-')}" for k in SETTING_FLAGS if getattr(args, k) is not None]
        if given or args.out:
            raise UsageError(
                f"--resume continues a bench with its own settings; only --gpus may be given (got {', '.join(given or ['--out'])})"
            )
        bench_dir = Path(args.resume).resolve()
        bench = read_bench_file(bench_dir)
        args.bench_dir = bench_dir
        ctx = Context.from_json(bench.context)
        slots = plan_slots(args.gpus, ctx.device)
        ledger = read_ledger(bench_dir)
        if any((r := ledger.get(t.id)) is None or r.status not in FINAL_STATUSES for t in bench.tasks):
            check_memory_and_model(ctx)
        resources.close_all()
        return run_bench(bench_dir, slots, console, say, cluster=_cluster(args))

    if not args.paths:
        raise UsageError("give one or more folders of tasks (or --resume DIR)")
    cluster = _cluster(args)  # before the tasks load: a bad value is one line at once
    tasks = discover(args.paths)
    ctx = context_from_args(args)
    if ctx.device.startswith("cuda:"):
        raise UsageError(
            f"device {ctx.device}: a bench picks its GPUs with --gpus; give --device cuda or auto"
        )
    bench_dir = Path(args.out) if args.out else ctx.default_run_dir("bench", uuid.uuid4().hex)
    if ctx.memory not in (None, resources.MEMORY_OFF, resources.MEMORY_FRESH) and "://" not in str(
        ctx.memory
    ):
        ctx.memory = str(
            Path(str(ctx.memory)).expanduser().resolve()
        )  # workers, --resume may start elsewhere
    check_output_folder(bench_dir, "--out" if args.out else "runs root")
    if (bench_dir / BENCH_FILE).exists():
        raise UsageError(f"{bench_dir} already holds a bench: continue it with {PROG} --resume {bench_dir}")
    if bench_dir.is_dir() and any(bench_dir.iterdir()):
        raise UsageError(f"--out {bench_dir}: the folder is not empty; give a new or empty folder")
    slots = plan_slots(args.gpus, ctx.device)
    check_memory_and_model(ctx)
    resources.close_all()
    if ctx.memory == resources.MEMORY_FRESH:  # one empty store for the whole bench, shared by its workers
        ctx.memory = str(bench_dir.resolve() / "memory")
    args.bench_dir = bench_dir.resolve()
    unseen = DEFAULT_UNSEEN if args.unseen is None else args.unseen
    create(bench_dir.resolve(), args.paths, tasks, ctx, unseen)
    return run_bench(bench_dir.resolve(), slots, console, say, cluster=cluster)


def _cluster(args: argparse.Namespace) -> str | None:
    """--cluster, checked before anything is made (a bad value or a missing Dask is one line)."""
    if args.cluster is None:
        return None
    from kernelwright.bench.dask import parse_cluster

    parse_cluster(args.cluster)
    return str(args.cluster)
