"""The offline writer's designs x configs for a task's main kernel, through the real harness.

For each task the writer's programs are emitted for a small grid of designs and configs of its main
kernel (providers/offline/choice/variants.design_grid: the writer's default first; for a standalone pooling
task, pool_writer.SWEEP: its designs and configs). For a matmul: tensor-core
tf32x3 tiles with K-major operands, the same without the transpose copy, bf16x6 tiles and split-K (fp32
split into bf16 parts), IEEE tiles, split-K, persistent, and for gate/up tasks the dual kernel against the
two unfused products. For a whole-row
kernel (reduction, softmax, norm, loss): the register design at several warp counts, rows per program
and persistent programs, then the looped, online and split designs. Each program is evaluated by
hardware.WorkerPool: verification against the reference on the full and the small inputs (three
trials each, strict fp32 tolerance by default), then interleaved timing against eager with CUDA events
and the torch.compile baseline (cached per task). A convolution task takes `--variants` of its conv
designs (`'direct:BLOCK_M=256,num_warps=8;implicit_gemm_flatk'`, over each design's default for the task;
benchmarks/conv_bench.py sweeps them by itself).

Usage, from the repository root:
    python benchmarks/design_sweep.py [--out DIR] [--tasks level1/14,level2/04] [--max-programs 14]
                                      [--designs welford,two_pass] [--precision strict|tf32]
                                      [--variants 'split:BLOCK_R=2048,num_stages=2;split:WAVES=8']
                                      [--time-budget-s 480] [--device cpu]
DIR defaults to $OUT, else ./design-sweep-out. Writes DIR/design_sweep.json and DIR/design_sweep.md
after every task (an interrupted run keeps what it measured) and the programs under DIR/programs/.
Default tasks: the bundled matmuls level1/14 (8192^3 A @ B), level1/15 (A @ B rectangular), level2/06
(bmm + scale + residual), level2/12 (SwiGLU gate/up), level2/01 (Linear + bias + ReLU); `--tasks rows`
names the fused norm and softmax tasks instead (level2/04 layernorm+GELU, level2/05 RMSnorm+SiLU*gate,
level1/09 softmax, level2/08 softmax+scale+add). The time budget is shared out over the tasks (a task
that finishes early leaves its time to the next); no program starts after it, the rest are listed as
skipped, so one call ends within about --time-budget-s plus one evaluation.
`--device cpu` is a smoke test of the script (Triton interpreter, small inputs, two programs per task,
nothing timed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import environment, measure_task, task_path  # noqa: E402

from kernelwright.hardware import EvalConfig, EvalResult, WorkerPool  # noqa: E402
from kernelwright.providers.offline.choice.variants import Variant, design_grid, program_variant  # noqa: E402
from kernelwright.providers.offline.families.pool_writer import SWEEP, emit_pool_program, find_pool_task  # noqa: E402
from kernelwright.tasks import load_task  # noqa: E402

DEFAULT_TASKS = "level1/14,level1/15,level2/06,level2/12,level2/01"
ROW_TASKS = "level2/04,level2/05,level1/09,level2/08"


def _record(v: Variant, res: EvalResult | None, skipped: str | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "design": v.design + ("" if v.fuse else " (unfused)"),
        "config": v.label().split(":", 1)[1],
    }
    if res is None:
        rec.update(correct=None, skipped=skipped)
        return rec
    rec.update(
        correct=res.correct,
        stage=res.stage,
        error_kind=res.error_kind,
        error=(res.error or "")[-600:] or None,
        runtime_ms=res.runtime_ms,
        runtime_ci_ms=res.runtime_ci_ms,
        eager_ms=res.eager_ms,
        compile_ms=res.compile_ms,
        speedup_vs_eager=res.speedup_vs_eager,
        speedup_vs_compile=res.speedup_vs_compile,
        fraction_of_floor=res.fraction_of_floor,
        max_abs_error=res.max_abs_error,
        max_rel_error=res.max_rel_error,
        kernel_launches=res.kernel_launches,
        wall_s=round(res.wall_s, 2),
    )
    return rec


def parse_variants(text: str) -> list[Variant]:
    """'split:BLOCK_R=2048,num_stages=2;welford' -> Variants (a bare design name: its defaults; integer
    values as int); a one-line SystemExit for a malformed entry."""
    out = []
    for entry in filter(None, (e.strip() for e in text.split(";"))):
        design, _, rest = entry.partition(":")
        if not design.strip():
            raise SystemExit(f"--variants entry {entry!r}: expected design[:KEY=VALUE,KEY=VALUE]")
        config: dict[str, Any] = {}
        for kv in filter(None, (x.strip() for x in rest.split(","))):
            key, eq, value = kv.partition("=")
            if not eq or not key:
                raise SystemExit(f"--variants entry {entry!r}: expected design[:KEY=VALUE,KEY=VALUE]")
            config[key] = int(value) if value.lstrip("-").isdigit() else value
        out.append(Variant(design.strip(), config))
    return out


def run_task(
    path: Path, pool: WorkerPool, args: argparse.Namespace, out: Path, deadline: float
) -> dict[str, Any]:
    task = load_task(path)
    entry: dict[str, Any] = {"task": path.stem, "flops": task.flops, "precision": args.precision}
    tf32 = args.precision != "strict"
    pooling = find_pool_task(task.source)
    if args.variants:
        grid = parse_variants(args.variants)
    elif pooling:
        grid = [Variant(d, dict(c)) for d, c in SWEEP]
    else:
        grid = design_grid(task.source, task.name, tf32=tf32)
    if args.designs:
        grid = [v for v in grid if v.design in args.designs.split(",")]
    grid = grid[: args.max_programs]
    timed = args.device == "cuda"
    config = EvalConfig(
        device=args.device,
        precision=args.precision,  # type: ignore[arg-type]
        time=timed,
        compile_baseline=timed and not args.no_compile,
        second_shape=True,
    )
    folder = out / "programs" / path.stem
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for n, v in enumerate(grid):
        if time.perf_counter() > deadline:
            records.append(_record(v, None, "time budget spent"))
            continue
        try:
            if pooling:
                code = emit_pool_program(task.source, pooling, v.design, v.config)
            else:
                code = program_variant(
                    task.source, task.name, v.design, v.config, tf32=tf32, fuse=v.fuse
                ).code
        except Exception as exc:  # a variant the writer cannot emit is recorded, the others still run
            rec = _record(v, None, None)
            rec.update(correct=False, error_kind="emit_error", error=str(exc)[-600:])
            records.append(rec)
            continue
        assert code is not None
        (folder / f"{n:02d}_{v.design}{'' if v.fuse else '_unfused'}.py").write_text(code)
        records.append(_record(v, pool.evaluate(task, code, config)))
        print(f"  {path.stem} {v.label()}: {records[-1].get('runtime_ms')} ms, correct={records[-1]['correct']}",
              flush=True)  # fmt: skip
    entry["candidates"] = records
    entry["compile_ms"] = next((r["compile_ms"] for r in records if r.get("compile_ms")), None)
    entry["eager_ms"] = next((r["eager_ms"] for r in records if r.get("eager_ms")), None)
    ok = [r for r in records if r.get("correct")]
    timed_ok = [r for r in ok if r.get("runtime_ms")]
    entry["best"] = min(timed_ok, key=lambda r: r["runtime_ms"]) if timed_ok else (ok[0] if ok else None)
    return entry


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None:
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


def table(entries: list[dict[str, Any]]) -> str:
    lines = [
        "| task | design | config | correct | ms | vs compile | compile ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        if "error" in e:
            lines.append(f"| {e['task']} | benchmark error: {e['error']} | | | | | |")
            continue
        best = e.get("best")
        for r in e.get("candidates", []):
            mark = " **best**" if r is best else ""
            correct = (
                "skipped" if r.get("skipped") else ("yes" if r["correct"] else f"no ({r.get('error_kind')})")
            )
            lines.append(
                f"| {e['task']} | {r['design']}{mark} | {r['config']} | {correct} | {_fmt(r.get('runtime_ms'))} | "
                f"{_fmt(r.get('speedup_vs_compile'), '.2f')} | {_fmt(e.get('compile_ms'))} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "design-sweep-out"))
    ap.add_argument("--tasks", default=DEFAULT_TASKS,
                    help="comma-separated level/NN task specs or task files, or 'rows'")  # fmt: skip
    ap.add_argument("--max-programs", type=int, default=14, help="programs per task (grid order)")
    ap.add_argument("--designs", default="", help="comma-separated design names: measure only these")
    ap.add_argument(
        "--variants",
        default="",
        help="exactly these programs instead of the grid: 'design:KEY=VALUE,...;design:...' (the writer's "
        "defaults fill the keys left out)",
    )
    ap.add_argument("--precision", choices=("strict", "tf32"), default="strict")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baselines")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--time-budget-s", type=float, default=480.0, help="start no program after this")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KERNELWRIGHT_CACHE_DIR", str(out / "cache"))  # torch.compile baselines, reused
    if args.device == "cpu":
        args.max_programs = min(args.max_programs, 2)
    specs = ROW_TASKS if args.tasks == "rows" else args.tasks
    paths = [task_path(s) for s in specs.split(",") if s.strip()]
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": args.device,
        "args": vars(args),
    }
    meta.update(environment(args.device))
    entries: list[dict[str, Any]] = []
    started = time.perf_counter()

    def write() -> None:
        (out / "design_sweep.json").write_text(json.dumps({"meta": meta, "tasks": entries}, indent=1))
        (out / "design_sweep.md").write_text(
            f"# design_sweep {meta['date']} on {meta.get('gpu', args.device)} ({args.precision})\n\n"
            + table(entries)
            + "\n"
        )

    with WorkerPool(device=args.device, workers=None if args.device == "cuda" else 1) as pool:
        for i, path in enumerate(paths):
            # Each task may run until its share of the budget; time a task leaves goes to the next.
            deadline = started + args.time_budget_s * (i + 1) / len(paths)
            entry = measure_task(path.stem, lambda: run_task(path, pool, args, out, deadline))  # noqa: B023 (called at once)
            entries.append(entry)
            write()
            best = entry.get("best")
            print(
                f"{path.stem}: {entry['wall_s']} s, best "
                + (
                    f"{best['design']} {best['config']} {_fmt(best.get('runtime_ms'))} ms"
                    if best
                    else "none correct"
                ),
                flush=True,
            )
    write()
    print(table(entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
