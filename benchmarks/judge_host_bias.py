"""Does the judge charge a candidate host work that eager does not pay? One program through the judge, as is
and with CUDA's profiling library torn down after each profiler session.

Every candidate process on a GPU runs a CUDA profiler session before its candidate (hardware/isolation/warmup: the
kernel cross-check's first session costs seconds), and PyTorch's profiler leaves CUPTI attached after a
session unless TEARDOWN_CUPTI=1; eager is timed in the judge's own process, which runs no profiler. A
program whose forward is host-bound would then time slower in the judge than outside it (level2_bf16/20's
root: 0.42-0.44 ms median in the bench, 0.271 through benchmarks/host_vs_gpu.py). This evaluates the
writer's root program for a task `--rounds` times through the judge (WorkerPool.evaluate, timing on), with
the candidate processes' environment as the judge builds it, and again with TEARDOWN_CUPTI=1 added to it
(`--teardown` both|off|on), and writes the judged medians with their p20-p80:

    python benchmarks/judge_host_bias.py --task level2_bf16/20 --out bias.json
    python benchmarks/judge_host_bias.py --task KB/level3/35_LSTM.py --program STITCHED/35_LSTM_stitched.py \
        --teardown off --timeout 100 --out bias.json

(--program: that program instead of the writer's root, e.g. a stitched level-3 model.)

Compare with `python benchmarks/host_vs_gpu.py --tasks level2_bf16/20 [--after-profiler]`, which times the
same program in a plain process (with one profiler session first, under --after-profiler).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from _common import environment, root_program, task_path


def _with_teardown(on: bool) -> None:
    """Candidate processes get TEARDOWN_CUPTI=1 (or not): the judge's subprocess inherits this process's
    environment, and its candidates' minimal environment keeps the profiler's CUPTI settings (confine)."""
    if on:
        os.environ["TEARDOWN_CUPTI"] = "1"
    else:
        os.environ.pop("TEARDOWN_CUPTI", None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="level2_bf16/20")
    ap.add_argument("--rounds", type=int, default=2, help="evaluations per setting (one judge each)")
    ap.add_argument("--teardown", choices=("both", "off", "on"), default="both")
    ap.add_argument("--program", help="judge this program file (default: the writer's root for the task)")
    ap.add_argument(
        "--timeout", type=float, default=None, help="the judge's stage timeout, s (EvalConfig.timeout)"
    )
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from kernelwright.hardware import EvalConfig, WorkerPool
    from kernelwright.hardware.targets import get_target
    from kernelwright.tasks import load_task

    path = task_path(args.task)
    task = load_task(path)
    code = (
        Path(args.program).read_text() if args.program else root_program(task, get_target("nvidia-h200")).code
    )
    cfg = EvalConfig(device=args.device, **({"timeout": args.timeout} if args.timeout else {}))
    settings = {"both": [False, True], "off": [False], "on": [True]}[args.teardown]
    out: dict[str, Any] = {"env": environment(args.device), "task": args.task, "design": code.splitlines()[0]}
    rows = []
    for teardown in settings:
        _with_teardown(teardown)
        with WorkerPool(device=args.device, workers=1) as pool:  # a fresh judge: its processes get the env
            for r in range(args.rounds):
                res = pool.evaluate(task, code, cfg)
                row = {"teardown_cupti": teardown, "round": r, "correct": res.correct, "error": res.error,
                       "runtime_ms": res.runtime_ms, "p20_ms": res.runtime_p20_ms, "p80_ms": res.runtime_p80_ms,
                       "eager_ms": res.eager_ms, "compile_ms": res.compile_ms, "note": res.timing_note}  # fmt: skip
                print(json.dumps(row), flush=True)
                rows.append(row)
                out["rows"] = rows
                out["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
