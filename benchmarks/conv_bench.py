"""Triton convolutions vs eager, TF32 eager and torch.compile, on every bundled convolution task.

For each task of tasks/level2 whose Model is a convolution the conv writer supports, the generated
programs (providers/offline/families/conv/conv.py) are evaluated by the real harness (hardware.WorkerPool on the
GPU: verification against the reference on the full and the small inputs, three trials each, then
interleaved timing against eager with CUDA events and L2 flushes, and the torch.compile baseline,
cached per task, shapes and precision):
- strict: TF32 off for the reference too (eager strict, torch.compile strict); programs use
  DOT=tf32x3 (three TF32 tensor-core products, fp32-level accuracy) or DOT=ieee (fp32 FMAs), held to
  the strict fp32 tolerance;
- tf32 (reported separately, labelled): TF32 on for the reference (cuDNN's default), programs use
  DOT=tf32, held to the TF32 tolerance.
Several configs per design are tried (the primary design gets --configs, the others --alt-configs),
next to the offline writer's own program for the task (the torch/cuDNN convolution kept, the work
after it fused into Triton: "torch_conv+epilogue"), so the report shows which approach wins where;
the best correct one per precision is reported with its speedup over torch.compile and eager, and
its fraction of the roofline floor (hardware.roofline.roofline_floor_ms on the detected target).
When the plan folds a normalisation into a full spatial reduction (ConvPlan.fold), the first strict
config is also measured without the fold (design "<design>/nofold").

Usage, from the repository root:
    python benchmarks/conv_bench.py --out DIR [--tasks 20,23] [--suite level2|published] [--configs 4] [--alt-configs 1]
                                    [--designs direct_depthwise,implicit_gemm_flatk]
                                    [--tf32-configs 2] [--no-tf32] [--time-budget-s 500]
                                    [--resume EARLIER/conv_bench.json]
DIR defaults to $OUT, else ./conv-bench-out. Writes DIR/conv_bench.json after every task (an
interrupted run keeps what it measured), DIR/conv_bench.md and the generated programs under
DIR/programs/, and prints the table. About a minute per task on an H200 with the defaults (most of it
Triton and torch.compile compiling), so one call does not finish all twelve tasks: no task starts after
--time-budget-s (default 500 s; the rest are listed as skipped), and `--resume` with the JSON of an
earlier call keeps its tasks and measures only the others.
`--device cpu` is a smoke test of the script itself (Triton interpreter, small inputs, one config per
design, nothing timed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import environment, measure_task  # noqa: E402

from kernelwright.hardware import EvalConfig, EvalResult, WorkerPool  # noqa: E402
from kernelwright.hardware.roofline import roofline_floor_ms  # noqa: E402
from kernelwright.hardware.targets import detect_target, get_target, load_ceilings  # noqa: E402
from kernelwright.providers.offline.families.conv.conv import (  # noqa: E402
    ConvConfig,
    ConvPlan,
    analyze_conv_task,
    conv_configs,
    conv_designs,
    emit_conv_program,
)
from kernelwright.providers.offline.families.conv.conv_codegen import DESIGNS  # noqa: E402
from kernelwright.tasks import bundled_suite_dir, load_task  # noqa: E402

EPILOGUE = "torch_conv+epilogue"


def conv_tasks(selection: list[str] | None, suite: str = "level2") -> list[Path]:
    """A bundled suite's task files with a convolution, optionally filtered by name prefix or substring."""
    paths = [p for p in sorted(bundled_suite_dir(suite).glob("*.py")) if "conv" in p.stem]
    if selection:
        paths = [p for p in paths if any(p.stem.startswith(s) or s in p.stem for s in selection)]
    return paths


def pick_configs(configs: list[ConvConfig], k: int) -> list[ConvConfig]:
    """k configs: the default, then the knobs most likely to matter (recompute when there is a norm, a
    second tile, the other layout, DOT=ieee as the exact fallback), then further tiles in order."""
    if not configs:
        return []
    first = configs[0]

    def tile(c: ConvConfig) -> tuple[int, ...]:
        return (c.BLOCK_M, c.BLOCK_N, c.BLOCK_K, c.BLOCK_W, c.num_warps, c.num_stages)

    same = [
        c for c in configs if (c.LAYOUT, c.DOT, c.RECOMPUTE) == (first.LAYOUT, first.DOT, first.RECOMPUTE)
    ]
    wanted = [
        first,
        next((c for c in configs if c.RECOMPUTE != first.RECOMPUTE), None),
        next((c for c in same if tile(c) != tile(first)), None),
        # direct_depthwise: the flat tiles next to the default 2-D plane tiles
        next((c for c in same if c.BLOCK_W != first.BLOCK_W), None),
        next((c for c in configs if c.BLOCK_W != first.BLOCK_W and c.RECOMPUTE != first.RECOMPUTE), None),
        next((c for c in configs if c.LAYOUT != first.LAYOUT and c.DOT == first.DOT), None),
        next((c for c in configs if c.DOT != first.DOT), None),
        *same,
        *configs,
    ]
    out: list[ConvConfig] = []
    for c in wanted:
        if c is not None and c not in out and len(out) < k:
            out.append(c)
    return out


def candidate_jobs(
    plan: ConvPlan, precision: str, k_main: int, k_alt: int, only: list[str] | None = None
) -> list[tuple[str, ConvConfig]]:
    """(design, config) pairs to measure: k_main configs of the primary design, k_alt of the others;
    `only` restricts the designs (the first of those left counts as primary)."""
    jobs = []
    designs = [d for d in conv_designs(plan) if not only or d in only]
    for i, design in enumerate(designs):
        k = k_main if i == 0 else k_alt
        if k <= 0:
            continue
        for cfg in pick_configs(conv_configs(design, plan, precision), k):
            jobs.append((design, cfg))
    return jobs


def epilogue_program(source: str, name: str, precision: str) -> tuple[str, str] | None:
    """The offline writer's program that keeps the torch convolution and fuses what follows, with its
    config label; None when it writes none (or when its answer is one of the Triton conv designs)."""
    from kernelwright.providers.offline.choice.context import parse_meta
    from kernelwright.providers.offline.families.conv.conv_codegen import DESIGNS
    from kernelwright.providers.offline.writer import write_program
    from kernelwright.providers.protocol import render_section

    prompt = render_section("request", "Write the kernel.", kind="large_step") + "\n"
    prompt += render_section("task", source, name=name)
    if precision != "strict":
        prompt += "\n" + render_section("target", "precision: tf32 (TF32 allowed)")
    try:
        answer = write_program(prompt)
    except Exception:  # the other writer failing is recorded as "no program", not a benchmark error
        return None
    meta = parse_meta(answer.code)
    if answer.code is None or meta is None or meta.design in DESIGNS:
        return None
    return answer.code, f"{meta.family}/{meta.design}:" + ",".join(f"{k}={v}" for k, v in meta.config.items())


def _record(design: str, cfg: ConvConfig | str, res: EvalResult) -> dict[str, Any]:
    return {
        "design": design,
        "config": cfg if isinstance(cfg, str) else cfg.label(),
        "precision": res.precision,
        "correct": res.correct,
        "stage": res.stage,
        "error_kind": res.error_kind,
        "error": (res.error or "")[-600:] or None,
        "runtime_ms": res.runtime_ms,
        "runtime_ci_ms": res.runtime_ci_ms,
        "eager_ms": res.eager_ms,
        "compile_ms": res.compile_ms,
        "speedup_vs_eager": res.speedup_vs_eager,
        "speedup_vs_compile": res.speedup_vs_compile,
        "roofline_floor_ms": res.roofline_floor_ms,
        "fraction_of_floor": res.fraction_of_floor,
        "max_abs_error": res.max_abs_error,
        "max_rel_error": res.max_rel_error,
        "tolerance": res.tolerance.model_dump() if res.tolerance else None,
        "kernel_launches": res.kernel_launches,
        "wall_s": round(res.wall_s, 2),
    }


def _best(records: list[dict[str, Any]], timed: bool) -> dict[str, Any] | None:
    ok = [r for r in records if r["correct"]]
    if not ok:
        return None
    if not timed:
        return ok[0]
    timed_ok = [r for r in ok if r["runtime_ms"]]
    return min(timed_ok, key=lambda r: r["runtime_ms"]) if timed_ok else ok[0]


def _first(records: list[dict[str, Any]], key: str) -> float | None:
    return next((r[key] for r in records if r.get(key)), None)


def run_task(
    path: Path, pool: WorkerPool, target: Any, args: argparse.Namespace, out: Path
) -> dict[str, Any]:
    source = path.read_text()
    entry: dict[str, Any] = {"task": path.stem}
    analysis = analyze_conv_task(source, path.stem)
    if analysis.plan is None:
        entry["unsupported"] = analysis.reason
        return entry
    plan = analysis.plan
    entry["plan"] = plan.describe()
    entry["designs"] = conv_designs(plan)
    task = load_task(path)
    entry["flops"] = task.flops
    entry["min_bytes"] = task.min_bytes
    timed = args.device == "cuda"
    precisions = ["strict"] + ([] if args.no_tf32 else ["tf32"])
    for precision in precisions:
        if target.meaningful_peaks:
            floor = roofline_floor_ms(task, target, precision)  # type: ignore[arg-type]
            entry[f"floor_{precision}_ms"] = floor.floor_ms
            entry[f"floor_{precision}_note"] = floor.summary()
        if precision == "strict":
            jobs = candidate_jobs(plan, precision, args.configs, args.alt_configs, args.design_list)
        else:
            jobs = candidate_jobs(plan, precision, args.tf32_configs, 0, args.design_list)
        programs = []
        folder = out / "programs" / path.stem
        folder.mkdir(parents=True, exist_ok=True)
        for n, (design, cfg) in enumerate(jobs):
            text = emit_conv_program(plan, source, design=design, config=cfg, precision=precision)
            (folder / f"{precision}_{n:02d}_{design}.py").write_text(text)
            programs.append(text)
        labelled: list[tuple[str, ConvConfig | str]] = list(jobs)
        if plan.fold is not None and jobs and precision == "strict":
            # the first config once more with the normalisation stored and re-read (no fold): the
            # fold's saving measured directly
            design, cfg = jobs[0]
            stored = plan.model_copy(update={"fold": None})
            text = emit_conv_program(stored, source, design=design, config=cfg, precision=precision)
            (folder / f"{precision}_{len(jobs):02d}_{design}_nofold.py").write_text(text)
            programs.append(text)
            labelled.append((f"{design}/nofold", cfg))
        if not args.no_epilogue:
            other = epilogue_program(source, path.stem, precision)
            if other is not None:
                (folder / f"{precision}_torch_conv_epilogue.py").write_text(other[0])
                programs.append(other[0])
                labelled.append((EPILOGUE, other[1]))
        config = EvalConfig(
            device=args.device,
            precision=precision,  # type: ignore[arg-type]
            time=timed,
            compile_baseline=timed and not args.no_compile,
            second_shape=True,
        )
        t0 = time.perf_counter()
        # One at a time: a GPU has one worker anyway, and the harness's static check parses source with
        # `ast`, which Python 3.11 does not allow from several threads at once.
        results = [pool.evaluate(task, text, config) for text in programs]
        records = [_record(d, c, r) for (d, c), r in zip(labelled, results, strict=True)]
        entry[f"{precision}_wall_s"] = round(time.perf_counter() - t0, 1)
        entry[f"candidates_{precision}"] = records
        entry[f"eager_{precision}_ms"] = _first(records, "eager_ms")
        entry[f"compile_{precision}_ms"] = _first(records, "compile_ms")
        entry[f"best_{precision}"] = _best(records, timed)
        triton = _best([r for r in records if r["design"] != EPILOGUE], timed)
        other_best = _best([r for r in records if r["design"] == EPILOGUE], timed)
        entry[f"best_triton_conv_{precision}"] = triton
        if triton and other_best and triton["runtime_ms"] and other_best["runtime_ms"]:
            entry[f"triton_conv_vs_epilogue_{precision}"] = other_best["runtime_ms"] / triton["runtime_ms"]
    return entry


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(entries: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for precision in ("strict", "tf32"):
        rows = [e for e in entries if f"candidates_{precision}" in e]
        if not rows:
            continue
        best = [e.get(f"best_{precision}") for e in rows]
        out[precision] = {
            "tasks": len(rows),
            "correct_tasks": sum(1 for b in best if b),
            "geomean_speedup_vs_compile": geomean(
                [b["speedup_vs_compile"] for b in best if b and b["speedup_vs_compile"]]
            ),
            "geomean_speedup_vs_eager": geomean(
                [b["speedup_vs_eager"] for b in best if b and b["speedup_vs_eager"]]
            ),
            "geomean_fraction_of_floor": geomean(
                [b["fraction_of_floor"] for b in best if b and b["fraction_of_floor"]]
            ),
            "winning_designs": {
                e["task"]: (b["design"] if b else None) for e, b in zip(rows, best, strict=True)
            },
            "triton_conv_correct_tasks": sum(1 for e in rows if e.get(f"best_triton_conv_{precision}")),
            "geomean_triton_conv_speedup_vs_compile": geomean(
                [
                    e[f"best_triton_conv_{precision}"]["speedup_vs_compile"]
                    for e in rows
                    if e.get(f"best_triton_conv_{precision}")
                    and e[f"best_triton_conv_{precision}"]["speedup_vs_compile"]
                ]
            ),
            "triton_conv_vs_epilogue": {
                e["task"]: e.get(f"triton_conv_vs_epilogue_{precision}") for e in rows
            },
        }
    return out


def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def table(entries: list[dict[str, Any]]) -> str:
    lines = []
    for precision in ("strict", "tf32"):
        rows = [e for e in entries if f"candidates_{precision}" in e]
        if not rows:
            continue
        label = (
            "strict fp32 (TF32 off everywhere)"
            if precision == "strict"
            else "TF32 allowed (labelled: not strict)"
        )
        lines.append(f"\n### {label}\n")
        lines.append(
            "| task | floor ms | eager ms | compile ms | best Triton ms | design | config | correct | "
            "vs compile | vs eager | % floor | Triton conv vs torch conv+epilogue |"
        )
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for e in rows:
            b = e.get(f"best_{precision}")
            n_ok = sum(1 for r in e[f"candidates_{precision}"] if r["correct"])
            n = len(e[f"candidates_{precision}"])
            frac = b["fraction_of_floor"] if b else None
            lines.append(
                f"| {e['task']} | {_fmt(e.get(f'floor_{precision}_ms'))} | {_fmt(e.get(f'eager_{precision}_ms'))} | "
                f"{_fmt(e.get(f'compile_{precision}_ms'))} | {_fmt(b['runtime_ms'] if b else None)} | "
                f"{b['design'] if b else '-'} | {b['config'] if b else '-'} | {n_ok}/{n} | "
                f"{_fmt(b['speedup_vs_compile'] if b else None, '.2f')} | {_fmt(b['speedup_vs_eager'] if b else None, '.2f')} | "
                f"{_fmt(frac * 100 if frac else None, '.1f')} | "
                f"{_fmt(e.get(f'triton_conv_vs_epilogue_{precision}'), '.2f')} |"
            )
    for e in entries:
        if "unsupported" in e:
            lines.append(f"\n{e['task']}: not a supported convolution ({e['unsupported']})")
        if "error" in e:
            lines.append(f"\n{e['task']}: benchmark error: {e['error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "conv-bench-out"))
    ap.add_argument("--tasks", default="", help="comma-separated task name prefixes or substrings")
    ap.add_argument(
        "--suite", default="level2", help="the bundled suite to take tasks from (level2, published)"
    )
    ap.add_argument("--configs", type=int, default=4, help="configs of the primary design (strict)")
    ap.add_argument("--alt-configs", type=int, default=1, help="configs of each other design (strict)")
    ap.add_argument("--tf32-configs", type=int, default=2, help="DOT=tf32 configs of the primary design")
    ap.add_argument(
        "--designs",
        default="",
        help="comma-separated conv designs to measure (default: every applicable one)",
    )
    ap.add_argument("--no-tf32", action="store_true", help="skip the TF32 measurements")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile baselines")
    ap.add_argument("--no-epilogue", action="store_true", help="skip the offline writer's torch-conv program")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--target", default=None, help="target profile (default: detected)")
    ap.add_argument("--ceilings", default=None, help="measured ceilings JSON (benchmarks/ceilings.py)")
    ap.add_argument(
        "--time-budget-s", type=float, default=500.0, help="start no task after this many seconds"
    )
    ap.add_argument(
        "--resume", default=None, help="an earlier conv_bench.json: keep its tasks, run the others"
    )
    args = ap.parse_args(argv)
    args.design_list = [d for d in args.designs.split(",") if d]
    unknown = [d for d in args.design_list if d not in DESIGNS]
    if unknown:
        ap.error(f"unknown design(s) {', '.join(unknown)}; known: {', '.join(DESIGNS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("KERNELWRIGHT_CACHE_DIR", str(out / "cache"))  # torch.compile baselines, reused
    if args.device == "cpu":
        args.configs, args.alt_configs, args.tf32_configs = 1, 1, 1
    target = get_target(args.target) if args.target else detect_target(args.device)
    if args.ceilings:
        target = load_ceilings(target, args.ceilings)
    paths = conv_tasks([s for s in args.tasks.split(",") if s], args.suite)
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "device": args.device,
        "target": target.name,
        "args": vars(args),
    }
    meta.update(environment(args.device))
    entries: list[dict[str, Any]] = []
    if args.resume:
        earlier = json.loads(Path(args.resume).read_text())
        entries = [e for e in earlier.get("tasks", []) if "skipped" not in e and "error" not in e]
        meta["resumed_from"] = {"path": args.resume, "date": earlier.get("meta", {}).get("date")}
    done = {e["task"] for e in entries}
    paths = [p for p in paths if p.stem not in done]
    started = time.perf_counter()

    def write() -> None:
        report = {"meta": meta, "tasks": entries, "summary": summarize(entries)}
        (out / "conv_bench.json").write_text(json.dumps(report, indent=1))
        (out / "conv_bench.md").write_text(
            f"# conv_bench {meta['date']} on {meta.get('gpu', args.device)}\n" + table(entries) + "\n"
        )

    with WorkerPool(device=args.device, workers=None if args.device == "cuda" else 2) as pool:
        for path in paths:
            if args.time_budget_s is not None and time.perf_counter() - started > args.time_budget_s:
                entries.append({"task": path.stem, "skipped": "time budget spent"})
                write()
                continue
            entry = measure_task(path.stem, lambda: run_task(path, pool, target, args, out))  # noqa: B023 (called at once)
            entries.append(entry)
            write()
            best = entry.get("best_strict")
            print(
                f"{path.stem}: {entry['wall_s']} s, strict best "
                + (
                    f"{best['design']} {_fmt(best['runtime_ms'])} ms, vs compile {_fmt(best['speedup_vs_compile'], '.2f')}"
                    if best
                    else "none correct"
                ),
                flush=True,
            )
    write()
    print(table(entries))
    print(json.dumps(summarize(entries), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
