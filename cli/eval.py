"""`kernelwright eval TASK CANDIDATE`: evaluate one candidate kernel file against one task file.

Exit status 0 whenever the evaluation ran, whatever the candidate's verdict; 2 for bad arguments or a
task/candidate file that cannot be used, with a one-line message on stderr: that includes a task whose own
code does not finish loading in time (tasks/loader.py) and, on CPU, a task too large to verify there
(`tasks.loader.check_cpu_size`). With --json, stdout holds the JSON only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

PROG = "kernelwright eval"


def _trials(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 3:
        raise argparse.ArgumentTypeError("at least 3 trials")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval",
        help="verify (and on a GPU, time) one candidate kernel against a task",
        description="Evaluate CANDIDATE (a file defining ModelNew with Triton kernels) against TASK (a "
        "KernelBench-format file). Exit 0 when the evaluation ran, whatever the verdict.",
    )
    p.add_argument(
        "task", help="task file (Model, get_inputs, get_init_inputs), or a bundled task: level1/09_softmax"
    )
    p.add_argument("candidate", help="candidate file: ModelNew with the same constructor and forward")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="default: auto")
    p.add_argument(
        "--timeout", type=_seconds, metavar="S", help="time limit per stage in seconds (default 120)"
    )
    p.add_argument(
        "--allow-tf32",
        action="store_true",
        help="allow TF32 matmul/conv: fp32 held to a TF32-level tolerance",
    )
    p.add_argument(
        "--trials", type=_trials, default=3, metavar="N", help="verification trials per shape (>= 3)"
    )
    p.add_argument("--no-time", action="store_true", help="verify only; skip GPU timing")
    p.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from kernelwright.cli.stdout_json import print_json
    from kernelwright.hardware import EvalConfig, evaluate
    from kernelwright.hardware.targets import resolve_device
    from kernelwright.tasks import TaskError, load_task
    from kernelwright.tasks.loader import check_cpu_size, prestart, resolve_task_path

    prestart()

    try:
        args.task = str(resolve_task_path(args.task))  # a bundled task by name: level1/09_softmax
    except TaskError as exc:
        return _fail(str(exc))
    for flag, given in (("TASK", args.task), ("CANDIDATE", args.candidate)):
        if Path(given).is_dir():
            return _fail(f"{flag} {given} is a folder: eval takes one task file and one candidate file")
    candidate = Path(args.candidate)
    if not candidate.is_file():
        return _fail(f"candidate file not found: {candidate}")
    try:
        source = candidate.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return _fail(f"cannot read candidate {candidate}: {exc}")
    try:
        task = load_task(args.task)
    except TaskError as exc:
        return _fail(str(exc))
    try:
        config = EvalConfig(
            device=args.device,
            timeout=args.timeout,
            trials=args.trials,
            precision="tf32" if args.allow_tf32 else "strict",
            time=not args.no_time,
        )
    except ValidationError as exc:
        return _fail(f"bad option: {exc.errors()[0]['msg']}")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        return _fail("--device cuda: no CUDA device is available")
    try:
        note = check_cpu_size(task, resolve_device(args.device))
    except TaskError as exc:
        return _fail(str(exc))
    if note:
        print(f"{PROG}: {note}", file=sys.stderr)
    result = evaluate(task, source, config)
    if args.json:
        print_json(result.model_dump_json(indent=2))
    else:
        print(render(result, task.name, str(candidate)))
    return 0


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4g}{unit}"


def render(result: Any, task_name: str, candidate: str) -> str:
    """The summary line and the fields a person reads first."""
    r = result
    lines = [r.summary(), f"  task {task_name}, candidate {candidate}"]
    lines.append(
        f"  stage {r.stage}, error_kind {r.error_kind or '-'}, trials {r.trials}, shapes {r.shapes_checked}"
    )
    tol = r.tolerance
    tol_text = f"{tol.dtype} rtol={tol.rtol:g} atol={tol.atol:g} x{tol.atol_scale:.3g}" if tol else "-"
    lines.append(
        f"  precision {r.precision}, tolerance {tol_text}, "
        f"max abs error {_fmt(r.max_abs_error)}, max rel error {_fmt(r.max_rel_error)}"
        + (f", {r.mismatched} elements outside tolerance (NaN/inf included)" if r.mismatched else "")
    )
    if r.timing_meaningful:
        ci = f" (95% CI {r.runtime_ci_ms[0]:.4g}-{r.runtime_ci_ms[1]:.4g})" if r.runtime_ci_ms else ""
        lines.append(
            f"  runtime {_fmt(r.runtime_ms, ' ms')}{ci}, eager {_fmt(r.eager_ms, ' ms')}, "
            f"torch.compile {_fmt(r.compile_ms, ' ms')}, speedup vs eager {_fmt(r.speedup_vs_eager, 'x')}, "
            f"vs compile {_fmt(r.speedup_vs_compile, 'x')}"
        )
        if r.fraction_of_floor is not None:
            lines.append(
                f"  roofline floor {_fmt(r.roofline_floor_ms, ' ms')}, fraction reached {r.fraction_of_floor:.3f}"
            )
    if r.timing_note:
        lines.append(f"  timing: {r.timing_note}")
    if r.torch_ops_remaining:
        lines.append(f"  torch ops remaining: {', '.join(r.torch_ops_remaining)}")
    lines.append(
        f"  target {r.target} ({r.device}), torch {r.versions.torch}, triton {r.versions.triton}, wall {r.wall_s:.1f} s"
    )
    if r.error:
        lines.append("  error:")
        lines.extend(f"    {line}" for line in r.error.splitlines())
    return "\n".join(lines)
