"""The pooling writer's designs and configs on the published pooling tasks, timed directly (no harness).

design_sweep.py judges every program through the real harness (about 5 s a program at these sizes); this
times many more in one call: for each task, the reference module on the full inputs once, then each program
of pool_writer.SWEEP plus a grid of `rows` tiles, checked against the reference output (max pooling exactly,
average pooling to 1e-5) and timed with CUDA events (median of --reps after warm-up). A diagnostic row per
average-pooling task runs the same `rows` kernel as a max pooling ("as max"): the difference is what the
averaging costs. Bandwidth counts the input read once and the output written once.

    python benchmarks/pool_sweep.py [--out DIR] [--tasks published/26,published/31] [--reps 20]
DIR defaults to $OUT, else ./pool-sweep-out; writes DIR/pool_sweep.json and DIR/pool_sweep.md after every
task. `--device cpu` is a smoke test (Triton interpreter, the tasks' small inputs, two programs, no timing).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cuda_event_times, environment, load_program, measure_task, task_path  # noqa: E402

PUBLISHED = "published/26,published/27,published/28,published/29,published/30,published/31"
ROWS_GRID = [
    {"BLOCK": b, "BLOCK_H": h, "num_warps": w}
    for b, h, w in [(1024, 1, 4), (2048, 1, 8), (256, 1, 2), (128, 1, 1), (128, 2, 2), (64, 2, 1), (64, 1, 1)]
]


def _parse_grid(text: str) -> list[tuple[str, dict[str, int]]]:
    out = []
    for item in text.split(","):
        design, _, sizes = item.partition(":")
        values = [int(v) for v in sizes.split("x")]
        keys = ("BLOCK", "BLOCK_H", "num_warps") if design == "rows" else ("BLOCK", "num_warps")
        out.append((design, dict(zip(keys, values, strict=True))))
    return out


def _time_ms(fn: Any, reps: int, device: str) -> float | None:
    """The median of `reps` timed calls on the GPU; on the CPU one untimed call (a smoke test)."""
    if device != "cuda":
        fn()
        return None
    return statistics.median(cuda_event_times(fn, warmup=3, reps=reps))


def run_task(spec: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    import torch

    from kernelwright.providers.offline.families.pool_writer import SWEEP, emit_pool_program, find_pool_task
    from kernelwright.tasks import load_task

    task = load_task(task_path(spec))
    pool_task = find_pool_task(task.source)
    if pool_task is None:
        raise SystemExit(f"{spec}: not a standalone pooling task")
    ns: dict[str, Any] = {}
    exec(compile(task.source, str(task_path(spec)), "exec"), ns)
    small = args.device == "cpu"
    inputs = ns["get_small_inputs" if small and "get_small_inputs" in ns else "get_inputs"]()
    x = inputs[0].to(args.device)
    init = ns["get_init_inputs"]()
    model = ns["Model"](*init).to(args.device)
    with torch.no_grad():
        ref = model(x)
    nbytes = (x.numel() + ref.numel()) * x.element_size()
    entry: dict[str, Any] = {"task": task_path(spec).stem, "input": list(x.shape), "output": list(ref.shape)}
    entry["eager_ms"] = _time_ms(lambda: model(x), args.reps, args.device)
    grid = [*SWEEP, *(("rows", c) for c in ROWS_GRID)] if not args.grid else _parse_grid(args.grid)
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    programs = [(d, c) for d, c in grid if not ((key := f"{d}:{sorted(c.items())}") in seen or seen.add(key))]
    for n, (design, config) in enumerate(programs[: 2 if small else None]):
        module = load_program(emit_pool_program(task.source, pool_task, design, config), folder / f"p{n}.py")
        new = module.ModelNew(*init).to(args.device)
        with torch.no_grad():
            out = new(x)
        tol = 0.0 if pool_task.is_max else 1e-5
        ok = out.shape == ref.shape and torch.allclose(out, ref, rtol=tol, atol=tol, equal_nan=True)
        ms = _time_ms(lambda: new(x), args.reps, args.device)  # noqa: B023 (timed at once)
        rows.append({"design": design, "config": config, "correct": bool(ok), "ms": ms})
        if design == "rows" and config == dict(SWEEP[0][1]) and not pool_task.is_max:
            pool = getattr(new, pool_task.attr)
            launch = (
                x,
                pool,
                pool_task.nd,
                True,
                "rows",
                config["BLOCK"],
                config["num_warps"],
                config["BLOCK_H"],
            )
            as_max = _time_ms(lambda: module._kw_pool(*launch), args.reps, args.device)  # noqa: B023 (timed at once)
            rows.append({"design": "rows (as max)", "config": config, "correct": None, "ms": as_max})
    for r in rows:
        if r["ms"]:
            r["GB/s"] = round(nbytes / r["ms"] / 1e6)
            r["vs_eager"] = round(entry["eager_ms"] / r["ms"], 2)
    entry["programs"] = rows
    return entry


def table(entries: list[dict[str, Any]]) -> str:
    lines = ["| task | design | config | correct | ms | GB/s | vs eager |", "|---|---|---|---|---|---|---|"]
    for e in entries:
        if "error" in e:
            lines.append(f"| {e['task']} | error: {e['error']} | | | | | |")
            continue
        lines.append(f"| {e['task']} | eager | | | {e.get('eager_ms')} | | |")
        for r in e["programs"]:
            cfg = ",".join(f"{k}={v}" for k, v in r["config"].items())
            ms = f"{r['ms']:.3f}" if r["ms"] else "-"
            lines.append(
                f"| {e['task']} | {r['design']} | {cfg} | {r['correct']} | {ms} | {r.get('GB/s', '-')} | "
                f"{r.get('vs_eager', '-')} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "pool-sweep-out"))
    ap.add_argument("--tasks", default=PUBLISHED)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument(
        "--grid", default="", help="only these programs: rows:BLOCKxBLOCK_HxWARPS,flat:BLOCKxWARPS,..."
    )
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = ap.parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "args": vars(args)}
    meta.update(environment(args.device))
    entries: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.tasks.split(","):
            entry = measure_task(spec, lambda: run_task(spec, args, Path(tmp)))  # noqa: B023 (called at once)
            entries.append(entry)
            (out / "pool_sweep.json").write_text(json.dumps({"meta": meta, "tasks": entries}, indent=1))
            (out / "pool_sweep.md").write_text(f"# pool_sweep {meta['date']} on {meta.get('gpu', 'cpu')}\n\n"
                                               + table(entries) + "\n")  # fmt: skip
            print(table([entry]), flush=True)
            if args.device == "cuda":
                import torch

                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
