"""How much the evaluation harness costs per candidate, and how repeatable its timings are.

One command does the whole measurement and writes `eval_overhead.json` under --out (default $OUT),
after every section (`"complete": true` once all ran); the cold part comes last and is the slowest
(--cold 1 shortens it):

    python benchmarks/eval_overhead.py --out DIR

Measured, on the first CUDA device (or on CPU under the Triton interpreter, where timings are not
meaningful and only overheads are reported), for a few level-1 tasks with correct Triton candidates
from benchmarks/candidates/:

- first evaluation of each task in a warm worker (includes building the reference, its inputs and
  outputs, and the torch.compile baseline unless it is already cached on disk);
- warm overhead: wall time per candidate in a warm worker, verification only and verification plus
  timing, with the same source ("repeat": Triton's compile cache hits) and with a fresh kernel source
  each time ("fresh": a nonce comment in the kernel body forces a Triton compile, like a new candidate);
- cold overhead: a fresh Python process per candidate (`python -m kernelwright.cli.main eval ... --json`);
- timing repeatability: the same kernel timed twice in the same worker, relative difference of the
  candidate and eager medians and of the speedup;
- candidates per GPU-minute: fresh candidates over the tasks, verification plus timing, one worker.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernelwright.hardware import EvalConfig, EvalResult, WorkerPool, resolve_device  # noqa: E402
from kernelwright.tasks import load_task  # noqa: E402

CANDIDATES = Path(__file__).resolve().parent / "candidates"
# (task file under tasks/level1, candidate file under benchmarks/candidates)
CASES = [
    ("01_relu.py", "relu.py"),
    ("09_softmax.py", "softmax.py"),
    ("05_sum_last_dim.py", "sum_last_dim.py"),
]


def fresh(source: str, nonce: int) -> str:
    """The same kernel with a different source text, so Triton compiles it anew."""
    return source.replace("# nonce", f"# nonce {nonce}")


def rel_diff(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(a - b) / min(a, b)


def stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "mean_s": statistics.fmean(values),
        "median_s": statistics.median(values),
        "min_s": min(values),
        "max_s": max(values),
    }


def brief(res: EvalResult) -> dict[str, Any]:
    keys = ("correct", "stage", "error_kind", "runtime_ms", "eager_ms", "compile_ms", "speedup_vs_eager",
            "speedup_vs_compile", "timing_reps", "wall_s", "fraction_of_floor")  # fmt: skip
    out = {k: getattr(res, k) for k in keys}
    if not res.correct:
        out["error"] = (res.error or "")[:500]
    return out


def require_correct(res: EvalResult, what: str) -> None:
    if not res.correct:
        raise SystemExit(f"{what}: the benchmark candidate failed: {res.summary()}\n{res.error}")


def cold_run(task_path: Path, cand_path: Path, device: str, no_time: bool) -> tuple[float, dict[str, Any]]:
    cmd = [
        sys.executable,
        "-m",
        "kernelwright.cli.main",
        "eval",
        str(task_path),
        str(cand_path),
        "--device",
        device,
        "--json",
    ]
    if no_time:
        cmd.append("--no-time")
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    )
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"cold run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT"), help="output directory (default: $OUT)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--warm", type=int, default=8, help="warm evaluations per task and variant")
    ap.add_argument("--cold", type=int, default=2, help="cold subprocess evaluations per task")
    ap.add_argument(
        "--repeat-timing", type=int, default=3, help="pairs of timings per task for repeatability"
    )
    ap.add_argument("--throughput", type=int, default=30, help="fresh candidates for the per-minute figure")
    args = ap.parse_args(argv)
    if not args.out:
        ap.error("give --out DIR or set $OUT")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "eval_overhead.json"
    # A private baseline cache, so the first evaluation of a task shows the torch.compile cost honestly.
    os.environ["KERNELWRIGHT_CACHE_DIR"] = tempfile.mkdtemp(prefix="baseline-cache-", dir=out_dir)

    t_start = time.perf_counter()
    device = resolve_device(args.device)
    tasks = {t: load_task(REPO / "tasks" / "level1" / t) for t, _ in CASES}
    sources = {c: (CANDIDATES / c).read_text() for _, c in CASES}
    verify_only = EvalConfig(device=device, time=False)
    full = EvalConfig(device=device, time=True)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": platform.node(),
        "device": device,
        "cases": [f"{t} <- {c}" for t, c in CASES],
        "args": vars(args),
        "complete": False,
    }

    def save() -> None:
        """Written after every section, so a run cut short by a time bound keeps what it measured."""
        report["elapsed_s"] = time.perf_counter() - t_start
        path.write_text(json.dumps(report, indent=2, default=str))

    nonce = 0
    with WorkerPool(device=device, workers=1) as pool:
        t0 = time.perf_counter()
        pool._workers[0].wait_ready()  # worker start is reported separately, not charged to a candidate
        report["worker_start_s"] = time.perf_counter() - t0
        report["worker"] = pool._workers[0].info

        first: dict[str, Any] = {}
        for t, c in CASES:
            res = pool.evaluate(tasks[t], sources[c], full)
            require_correct(res, t)
            first[t] = brief(res)
            print(f"first {t}: {res.wall_s:.2f} s  {res.summary()}", flush=True)
        report["first_evaluation"] = first
        report["target"] = res.target
        report["versions"] = res.versions.model_dump()
        save()

        warm: dict[str, Any] = {}
        for t, c in CASES:
            per: dict[str, Any] = {}
            for variant, cfg in (("verify", verify_only), ("verify+time", full)):
                for mode in ("repeat", "fresh"):
                    walls = []
                    for _ in range(args.warm):
                        nonce += 1
                        src = fresh(sources[c], nonce) if mode == "fresh" else sources[c]
                        res = pool.evaluate(tasks[t], src, cfg)
                        require_correct(res, t)
                        walls.append(res.wall_s)
                    per[f"{variant}/{mode}"] = stats(walls)
            warm[t] = per
            print(
                f"warm {t}: " + ", ".join(f"{k} {v['median_s'] * 1e3:.0f} ms" for k, v in per.items()),
                flush=True,
            )
        report["warm_overhead"] = warm
        save()

        repeat: dict[str, Any] = {}
        if device == "cuda":
            for t, c in CASES:
                pairs: list[dict[str, Any]] = []
                for _ in range(args.repeat_timing):
                    a = pool.evaluate(tasks[t], sources[c], full)
                    b = pool.evaluate(tasks[t], sources[c], full)
                    require_correct(a, t)
                    require_correct(b, t)
                    pairs.append(
                        {
                            "runtime_ms": [a.runtime_ms, b.runtime_ms],
                            "eager_ms": [a.eager_ms, b.eager_ms],
                            "rel_diff_runtime": rel_diff(a.runtime_ms, b.runtime_ms),
                            "rel_diff_eager": rel_diff(a.eager_ms, b.eager_ms),
                            "rel_diff_speedup": rel_diff(a.speedup_vs_eager, b.speedup_vs_eager),
                            "runtime_ci_ms": [a.runtime_ci_ms, b.runtime_ci_ms],
                        }
                    )
                diffs = [p["rel_diff_runtime"] for p in pairs if p["rel_diff_runtime"] is not None]
                repeat[t] = {
                    "pairs": pairs,
                    "max_rel_diff_runtime": max(diffs),
                    "mean_rel_diff_runtime": statistics.fmean(diffs),
                }
                print(f"repeatability {t}: max rel diff {max(diffs):.3%}", flush=True)
        else:
            repeat["note"] = "timing is not meaningful on CPU (Triton interpreter); nothing was timed"
        report["timing_repeatability"] = repeat
        save()

        jobs = []
        for i in range(args.throughput):
            t, c = CASES[i % len(CASES)]
            nonce += 1
            jobs.append((tasks[t], fresh(sources[c], nonce)))
        t0 = time.perf_counter()
        results = [pool.evaluate(task, src, full) for task, src in jobs]
        elapsed = time.perf_counter() - t0
        ok = sum(r.correct for r in results)
        report["throughput"] = {
            "candidates": len(jobs),
            "correct": ok,
            "elapsed_s": elapsed,
            "candidates_per_minute_one_worker": len(jobs) / elapsed * 60.0,
            "note": "fresh kernel sources (Triton compiles each), verification plus timing, one worker on one "
            "device; on a GPU this is candidates per GPU-minute",
        }
        print(
            f"throughput: {len(jobs) / elapsed * 60.0:.1f} candidates/min ({ok}/{len(jobs)} correct)",
            flush=True,
        )
        report["worker_restarts"] = pool.restarts
        save()

    cold: dict[str, Any] = {}
    for t, c in CASES if args.cold > 0 else []:
        cold_walls: list[float] = []
        last: dict[str, Any] = {}
        for _ in range(args.cold):
            wall, last = cold_run(REPO / "tasks" / "level1" / t, CANDIDATES / c, device, no_time=False)
            if not last.get("correct"):
                raise SystemExit(f"cold run of {t} failed: {last.get('error')}")
            cold_walls.append(wall)
        cold[t] = {**stats(cold_walls), "eval_wall_s_reported": last.get("wall_s")}
        report["cold_subprocess"] = cold
        report["cold_vs_warm"] = {
            k: cold[k]["median_s"] / warm[k]["verify+time/repeat"]["median_s"] for k in cold
        }
        save()
        print(f"cold {t}: median {statistics.median(cold_walls):.2f} s per candidate", flush=True)
    report["complete"] = True
    save()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
