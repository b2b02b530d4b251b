"""The offline writer through the whole optimize graph, over the bundled suites: `kernelwright bench` with
the settings the measurements in RESULTS.md use.

    python benchmarks/writer_suite.py [--out DIR] [--levels level1,level2] [--tasks 14_matmul_square,...]
                                      [--budget 16] [--device cuda] [--gpus all|0,1] [--seed 0]
                                      [--roofline-stop F] [--allow-tf32] [--memory DIR]
    python benchmarks/writer_suite.py --resume DIR [--gpus all|0,1]

It runs `kernelwright bench` on the bundled level folders (or on the named tasks of them) with the offline
writer, a fresh memory inside the bench folder (unless --memory), no compile check against another target,
and the roofline stop given. The bench folder (--out, default $OUT, else <runs root>/writer-suite-<id>;
it must be new or empty) gets suite.json, suite.md and suite.html (per task: correctness, best, eager and
torch.compile times, speedups, the roofline floor and the fraction reached, the winning design, evaluations,
wall and GPU seconds, every candidate tried), rewritten as each task finishes. One worker per GPU replaces
the old `--shard i/n` copies of this script; an interrupted run continues with --resume DIR.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernelwright.cli.main import main as kernelwright  # noqa: E402
from kernelwright.graphs.context import Context  # noqa: E402
from kernelwright.tasks import bundled_suite_dir  # noqa: E402


def bench_argv(args: argparse.Namespace) -> list[str]:
    """The `kernelwright bench` command line for these flags."""
    if args.resume:
        return ["bench", "--resume", args.resume, *(["--gpus", args.gpus] if args.gpus else [])]
    wanted = [t for t in args.tasks.split(",") if t]
    paths: list[str] = []
    for level in [lv for lv in args.levels.split(",") if lv]:
        folder = bundled_suite_dir(level)
        if not wanted:
            paths.append(str(folder))
            continue
        paths += [str(p) for p in sorted(folder.glob("[0-9]*.py")) if p.stem in wanted]
    if not paths:
        raise SystemExit(f"writer_suite: none of --tasks {args.tasks} is in {args.levels}")
    out = Path(args.out) if args.out else Context().default_run_dir("writer-suite", uuid.uuid4().hex)
    argv = ["bench", *paths, "--model", "offline", "--budget", str(args.budget), "--device", args.device]
    argv += ["--seed", str(args.seed), "--out", str(out), "--memory", args.memory or str(out / "memory")]
    if args.gpus:
        argv += ["--gpus", args.gpus]
    if args.allow_tf32:
        argv.append("--allow-tf32")
    return argv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--out", default=os.environ.get("OUT", ""), help="bench folder, new or empty (default: $OUT)"
    )
    ap.add_argument("--resume", default="", metavar="DIR", help="continue the bench in DIR")
    ap.add_argument("--levels", default="level1,level2")
    ap.add_argument("--tasks", default="", help="comma-separated task stems (default: all)")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--device", default="cuda", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--gpus", default="", help="GPUs to use, one worker each (default: all visible)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--roofline-stop", type=float, default=None, help="stop a task at this fraction of the floor"
    )
    ap.add_argument(
        "--allow-tf32",
        action="store_true",
        help="TF32 allowed (reference and candidates, TF32 tolerance); results are labelled tf32",
    )
    ap.add_argument("--memory", default="", help="memory folder (default: a fresh one in the bench folder)")
    args = ap.parse_args(argv)
    # Context settings with no bench flag travel as the environment the bench's Context is made from.
    os.environ["KERNELWRIGHT_COMPILE_CHECK"] = "0"
    os.environ["KERNELWRIGHT_WORKERS"] = "1"
    if args.roofline_stop is not None:
        os.environ["KERNELWRIGHT_ROOFLINE_STOP"] = str(args.roofline_stop)
    return kernelwright(bench_argv(args))


if __name__ == "__main__":
    sys.exit(main())
