"""Eager and torch.compile baselines for every bundled task, against the roofline floor.

For each task in tasks/level1 and tasks/level2, on the GPU: the reference Model is timed in eager
mode and under torch.compile (default mode) with triton.testing.do_bench (warm-up excluded, L2
flushed before every run, median and 20th/80th percentiles), on inputs from get_inputs() with a
fixed seed, in strict fp32 (TF32 off for matmul; cuDNN's default, TF32 on for convolutions, is kept
and recorded, since that is what a user's PyTorch does). Each time is compared with the task's
roofline floor on the target profile (H200 by default; measured ceilings from benchmarks/ceilings.py
with --ceilings FILE): fraction of floor = floor / time, 1.0 being at the roofline.

A task that fails (out of memory, a compile error) is recorded with its error and the run goes on.
Results are rewritten after every task, so an interrupted run keeps what it measured.

Usage, from the repository root:
    python benchmarks/baselines.py --out DIR [--ceilings DIR/ceilings.json] [--levels level1,level2]
                                   [--tasks 01_relu,14_matmul_square] [--no-compile]
DIR defaults to $OUT, else the current folder. Writes DIR/baselines.json and DIR/baselines.md and
prints the table. `--device cpu` is a smoke test of the script itself (small inputs, wall-clock
times that mean nothing about any GPU).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernelwright.hardware.roofline import fraction_of_floor, roofline_floor_ms  # noqa: E402
from kernelwright.hardware.targets import get_target, load_ceilings  # noqa: E402
from kernelwright.tasks import bundled_suite_dir, exec_task_module, load_suite, task_inputs, task_model  # noqa: E402


def _error_text(exc: BaseException) -> str:
    tail = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return tail[-800:]


def _bench_cuda(fn, warmup_ms: int, rep_ms: int) -> dict:
    import triton.testing

    med, p20, p80 = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    return {"median_ms": med, "p20_ms": p20, "p80_ms": p80}


def _bench_cpu(fn, reps: int = 5) -> dict:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    q = statistics.quantiles(times, n=5)
    return {"median_ms": statistics.median(times), "p20_ms": q[0], "p80_ms": q[-1]}


def _max_abs_diff(a, b) -> float | None:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        diffs = [_max_abs_diff(x, y) for x, y in zip(a, b, strict=True)]
        return None if any(d is None for d in diffs) else max(diffs, default=0.0)  # type: ignore[type-var]
    return None


def run_task(task, target, args) -> dict:
    import torch

    row: dict = {"task": task.name, "level": task.path.parent.name if task.path else "", "families": []}
    row["families"] = list(task.signature.op_families)
    # This table times PyTorch's default math: TF32 off for matmul, on for cuDNN convolutions.
    precision = (
        "tf32" if {"conv", "conv_transpose"} & {f.lower() for f in task.signature.op_families} else "strict"
    )
    floor = roofline_floor_ms(task, target, precision)
    floor_ds = roofline_floor_ms(task, target, precision, measured=False)
    row["roofline"] = floor.model_dump()
    row["floor_ms"] = floor.floor_ms
    row["floor_datasheet_ms"] = floor_ds.floor_ms
    row["bound"] = floor.bound
    cuda = args.device == "cuda"
    small = not cuda
    bench = (lambda fn: _bench_cuda(fn, args.warmup_ms, args.rep_ms)) if cuda else _bench_cpu
    try:
        module = exec_task_module(task.source, task.name, filename=str(task.path) if task.path else None)
        model = task_model(module, small=small, seed=args.seed, device=args.device).eval()
        inputs = task_inputs(module, small=small, seed=args.seed, device=args.device)
    except Exception as exc:
        row["error"] = f"setup: {_error_text(exc)}"
        return row
    row["input_shapes"] = [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)]
    try:
        with torch.no_grad():
            expected = model(*inputs)
            row["eager"] = bench(lambda: model(*inputs))
        row["eager_ms"] = row["eager"]["median_ms"]
    except Exception as exc:
        row["eager_error"] = _error_text(exc)
        expected = None
    if args.compile:
        try:
            import torch._dynamo

            torch._dynamo.reset()
            compiled = torch.compile(model)
            t0 = time.perf_counter()
            with torch.no_grad():
                got = compiled(*inputs)
                if cuda:
                    torch.cuda.synchronize()
                row["compile_time_s"] = round(time.perf_counter() - t0, 2)
                row["compile_max_abs_diff"] = _max_abs_diff(got, expected) if expected is not None else None
                row["compiled"] = bench(lambda: compiled(*inputs))
            row["compile_ms"] = row["compiled"]["median_ms"]
        except Exception as exc:
            row["compile_error"] = _error_text(exc)
    if cuda:
        row["fraction_eager"] = fraction_of_floor(floor.floor_ms, row.get("eager_ms"))
        row["fraction_compile"] = fraction_of_floor(floor.floor_ms, row.get("compile_ms"))
    if row.get("eager_ms") and row.get("compile_ms"):
        row["compile_speedup"] = row["eager_ms"] / row["compile_ms"]
    return row


def _fmt(v, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [
        f"Baselines on {meta['device']} ({meta['date']}), torch {meta['torch']}, triton {meta['triton']}; "
        f"roofline target {meta['target']}"
        + (" with measured ceilings from " + meta["ceilings"] if meta.get("ceilings") else "")
        + f"; {meta['precision_note']}",
        "",
        "| task | bound | floor ms | eager ms | compile ms | compile/eager | eager % floor | compile % floor | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        note = r.get("error") or r.get("eager_error") or r.get("compile_error") or ""
        if not note and r.get("roofline", {}).get("math_mode") == "tf32":
            note = "floor at TF32 peak (cuDNN default)"
        lines.append(
            f"| {r['task']} | {r.get('bound') or '-'} | {_fmt(r.get('floor_ms'))} | {_fmt(r.get('eager_ms'))} | "
            f"{_fmt(r.get('compile_ms'))} | {_fmt(r.get('compile_speedup'), '.2f')} | "
            f"{_pct(r.get('fraction_eager'))} | {_pct(r.get('fraction_compile'))} | {note[:120]} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Eager and torch.compile baselines vs the roofline floor.")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="output folder (default $OUT or .)")
    ap.add_argument("--target", default="nvidia-h200", help="target profile for the roofline floor")
    ap.add_argument("--ceilings", help="ceilings.json from benchmarks/ceilings.py (measured ceilings)")
    ap.add_argument("--levels", default="level1,level2")
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: all)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup-ms", type=int, default=25)
    ap.add_argument("--rep-ms", type=int, default=200)
    args = ap.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("baselines.py: no CUDA device (use --device cpu for a smoke test)", file=sys.stderr)
        return 2
    try:
        target = get_target(args.target)
        if args.ceilings:
            target = load_ceilings(target, args.ceilings)
    except ValueError as exc:
        print(f"baselines.py: {exc}", file=sys.stderr)
        return 2
    # Strict fp32: the harness holds fp32 tasks to fp32 tolerance, so the baseline must not use TF32 matmul.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.set_grad_enabled(False)
    meta = {
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else f"cpu ({platform.processor()})",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "cuda": torch.version.cuda,
        "target": target.name,
        "target_summary": target.summary(),
        "ceilings": args.ceilings,
        "precision": {
            "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
        },
        "precision_note": (
            f"fp32 matmul TF32 off; cuDNN conv TF32 {'on' if torch.backends.cudnn.allow_tf32 else 'off'} (default)"
        ),
        "timing": (
            f"triton.testing.do_bench warmup {args.warmup_ms} ms, rep {args.rep_ms} ms, L2 flushed per run, median"
            if args.device == "cuda"
            else "CPU smoke test: wall clock on small inputs, not meaningful"
        ),
        "seed": args.seed,
    }
    wanted = {t.strip() for t in args.tasks.split(",") if t.strip()}
    tasks = []
    for level in [lv.strip() for lv in args.levels.split(",") if lv.strip()]:
        tasks += [t for t in load_suite(bundled_suite_dir(level)) if not wanted or t.name in wanted]
    missing = wanted - {t.name for t in tasks}
    if missing:
        print(f"baselines.py: no such task in {args.levels}: {', '.join(sorted(missing))}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for task in tasks:
        t0 = time.perf_counter()
        try:
            row = run_task(task, target, args)
        except Exception as exc:  # one task must not end the run
            row = {"task": task.name, "error": _error_text(exc)}
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        if args.device == "cuda":
            torch.cuda.empty_cache()  # the task's tensors went out of scope with run_task
        rows.append(row)
        print(
            f"{task.name}: eager {_fmt(row.get('eager_ms'))} ms, compile {_fmt(row.get('compile_ms'))} ms, "
            f"floor {_fmt(row.get('floor_ms'))} ms"
            + (
                f"  [{row.get('error') or row.get('eager_error') or row.get('compile_error')}]"
                if row.get("error") or row.get("eager_error") or row.get("compile_error")
                else ""
            ),
            flush=True,
        )
        (out / "baselines.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2, default=str))
        (out / "baselines.md").write_text(markdown(rows, meta))
    print()
    print(markdown(rows, meta))
    print(f"wrote {out / 'baselines.json'} and {out / 'baselines.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
