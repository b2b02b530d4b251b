"""Does a persistent bf16 GEMM lose its epilogue? Variants of the writer's root program, timed in one process.

Without warp specialization (which hangs with Triton 3.6 on sm_90, RESULTS.md 2026-12-02), the writer's
persistent GEMM runs one program of 8 warps per SM and stores each output tile from registers while its tensor
cores wait. With a short K that store is a visible share of a tile's time: the bmm of level1_bf16/16 (32 x
2048 x 1024 x 2048, K = 1024: 16 steps of 64 per 128 x 256 tile) is 6% behind cuBLAS, the long-K GEMMs (K =
4096-8192) 0-2%. Two ways to overlap the store with products, each a variant here:

- `tma_store`: the output tile staged in shared memory and written by the TMA engine, which runs on while the
  next tile's loop starts (the writer's `TMA_STORE=1`, kept as a patch: written in a tree where it is applied);
- `two_per_sm_*`: 128 x 128 tiles and two resident programs per SM (`PER_SM=2`), so one's products run while
  the other stores: since 2026-12-04 the writer's root where two fit an SM (for K <= 2048 at first, then for
  any K), so `one_per_sm_w8s3` is the former root there (the 2026-12-04 calls ran this script's first version, which wrote these by editing the root's
  text; results/2026-12-04b-h200-gemm-overlap/programs.tgz holds what it wrote).

Usage, from the repository root:
    python benchmarks/probes/gemm_overlap_probe.py --write DIR [--tasks level1_bf16/16,...]   (CPU: the programs)
    python benchmarks/probes/gemm_overlap_probe.py --time DIR --out FILE                       (a CUDA machine)
The write step adds to DIR/manifest.json, so a second tree (with the patch) can add its variants.
Timing as the judge times (L2 flushed before each call, CUDA events around it, one synchronize after --reps calls,
the median), in --rounds rounds over every variant with eager (cuBLAS) timed after each; each variant checked
against the task's Model first (max error over the RMS). Read the per-position medians, not the ratios alone: on
an H200 at its power limit the ratios favoured a variant that equal positions did not, and only the judge
(`kernelwright eval`, RESULTS.md 2026-12-04) settled it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cuda_event_times, cuda_models, load_program, max_err_over_rms, root_program, task_path  # noqa: E402

DEFAULT_TASKS = "level1_bf16/16,level1_bf16/15,level1_bf16/17"
_FLAT_TMA = {"TMA": 1, "FLAT": 1}
VARIANTS = {  # name: the persistent design's config over its default (descriptor loads, one flattened loop)
    "one_per_sm_w8s3": {"BLOCK_N": 256, "num_warps": 8, "num_stages": 3, "PER_SM": 1},
    "two_per_sm_w4s3": {"BLOCK_N": 128, "num_warps": 4, "num_stages": 3, "PER_SM": 2},
    "two_per_sm_w8s2": {"BLOCK_N": 128, "num_warps": 8, "num_stages": 2, "PER_SM": 2},
}


def write(folder: Path, specs: list[str]) -> None:
    from kernelwright.hardware.targets import get_target
    from kernelwright.providers.offline.choice.variants import program_variant
    from kernelwright.tasks import load_task

    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for spec in specs:
        task = load_task(task_path(spec))
        root = root_program(task, get_target("nvidia-h200")).code
        programs = {"root": root}
        for name, config in VARIANTS.items():
            try:
                programs[name] = program_variant(
                    task.source, task.name, "persistent", {**_FLAT_TMA, **config}
                ).code
            except ValueError as exc:  # not a product the persistent design applies to
                print(f"{spec}: no {name} ({exc})")
        try:  # only where the writer knows TMA_STORE (a tree with its patch applied)
            programs["tma_store"] = program_variant(
                task.source, task.name, "persistent", {**_FLAT_TMA, "TMA_STORE": 1}
            ).code
        except ValueError as exc:
            print(f"{spec}: no tma_store variant here ({exc})")
        key = spec.replace("/", "_")
        (folder / key).mkdir(parents=True, exist_ok=True)
        for name, code in programs.items():
            (folder / key / f"{name}.py").write_text(code)
        manifest.setdefault(spec, [])
        manifest[spec] = sorted(set(manifest[spec]) | set(programs))
        print(f"{spec}: {', '.join(sorted(programs))}")
    manifest_path.write_text(json.dumps(manifest, indent=1))


def _compiled_stats(program: Any) -> list[dict[str, Any]]:
    """Registers, spills and shared memory of the kernels the program launched (its direct-launch cache)."""
    stats = []
    for value in getattr(program, "_KW_COMPILED", {}).values():
        ck = value[1]
        stats.append({"name": ck.name, "regs": ck.n_regs, "spills": ck.n_spills, "shared": ck.metadata.shared,
                      "warps": ck.metadata.num_warps})  # fmt: skip
    return stats


def _gpu_state() -> str:
    """SM clock, power draw and temperature as nvidia-smi reads them now ('' where it cannot)."""
    import subprocess

    query = "--query-gpu=clocks.sm,power.draw,temperature.gpu"
    try:
        done = subprocess.run(
            ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""


def time_all(folder: Path, out: Path, reps: int, rounds: int, only: set[str], soak_s: float) -> None:
    import time

    import torch

    from kernelwright.tasks import exec_task_module

    manifest = json.loads((folder / "manifest.json").read_text())
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    tmp = Path(tempfile.mkdtemp(prefix="kw-gemm-probe-"))
    results: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "rounds": rounds, "tasks": {}}

    def judged(fn: Any) -> float:
        # as the judge times: the flush ahead of each call, one synchronize at the end
        return statistics.median(cuda_event_times(fn, warmup=10, reps=reps, flush=flush, sync_each=False))

    for spec, names in manifest.items():
        path = task_path(spec)
        mod = exec_task_module(path.read_text(), "task_" + path.stem, filename=str(path))
        key = spec.replace("/", "_")
        entry: dict[str, Any] = {"variants": {}}
        results["tasks"][spec] = entry
        models: dict[str, Any] = {}
        with torch.no_grad():
            for name in ["root"] + [n for n in names if n != "root" and (not only or n in only)]:
                row: dict[str, Any] = {"ms": []}
                entry["variants"][name] = row
                try:
                    program = load_program(
                        (folder / key / f"{name}.py").read_text(), tmp / f"{key}_{name}.py"
                    )
                    ref, new, inputs = cuda_models(mod, program, seed=0)
                    row["max_err_over_rms"] = max_err_over_rms(new(*inputs).float(), ref(*inputs).float())
                    judged(lambda new=new, inputs=inputs: new(*inputs))  # compiles and warms
                    row["kernels"] = _compiled_stats(program)
                    models[name] = (ref, new, inputs)
                except Exception as exc:  # noqa: BLE001 - one variant's failure is a result
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            # the root for soak_s first: a GPU near its power limit clocks down, and the first round ran cooler
            t_end = time.perf_counter() + soak_s
            while soak_s and "root" in models and time.perf_counter() < t_end:
                judged(lambda new=models["root"][1], inputs=models["root"][2]: new(*inputs))
            # rounds over every variant in turn (the order reversed every other round), eager (cuBLAS) after
            # each: the ratio of a pair is the measure
            entry["gpu_state"] = []
            for r in range(rounds):
                entry["gpu_state"].append(_gpu_state())
                order = list(models.items())[:: -1 if r % 2 else 1]
                for position, (name, (ref, new, inputs)) in enumerate(order):
                    row = entry["variants"][name]
                    row.setdefault("position", []).append(position)
                    row["ms"].append(judged(lambda new=new, inputs=inputs: new(*inputs)))
                    row.setdefault("eager_ms", []).append(judged(lambda ref=ref, inputs=inputs: ref(*inputs)))
        all_eager = [e for row in entry["variants"].values() for e in row.get("eager_ms", [])]
        eager = statistics.median(all_eager) if all_eager else float("nan")
        for name, row in entry["variants"].items():
            shown = (f"{statistics.median(row['ms']):.4f} ms (rounds {', '.join(f'{m:.4f}' for m in row['ms'])}), "
                     f"{eager / statistics.median(row['ms']):.3f}x eager" if row["ms"] else row.get("error"))  # fmt: skip
            print(f"{spec} {name}: {shown} err {row.get('max_err_over_rms', float('nan')):.2e} "
                  f"{json.dumps(row.get('kernels', []))}", flush=True)  # fmt: skip
        print(
            f"{spec} eager: {eager:.4f} ms; SM clock, power, temperature per round: {entry.get('gpu_state')}"
        )
        for name, row in entry["variants"].items():
            if not row["ms"]:
                continue
            ratios = row["ratios"] = [e / m for e, m in zip(row["eager_ms"], row["ms"], strict=True)]
            print(f"{spec} {name}: eager / variant per round, median {statistics.median(ratios):.3f}: "
                  f"{' '.join(f'{x:.3f}' for x in ratios)}", flush=True)  # fmt: skip
            # A GPU at its power limit runs the first program after the pause between rounds faster (an H200:
            # up to 10%), and the ratios above can carry that: compare variants at equal positions too.
            at = {
                p: [m for m, q in zip(row["ms"], row["position"], strict=True) if q == p]
                for p in set(row["position"])
            }
            print(f"{spec} {name}: median ms by position in the round: "
                  f"{', '.join(f'{p}: {statistics.median(ms):.4f}' for p, ms in sorted(at.items()))}")  # fmt: skip
        out.write_text(json.dumps(results, indent=1))
        del models
        torch.cuda.empty_cache()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path)
    ap.add_argument("--time", type=Path)
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--out", type=Path, default=Path("gemm_overlap_probe.json"))
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated variant names besides root (default: all)")
    ap.add_argument("--soak-s", type=float, default=0.0, help="run the root this long before the rounds")
    args = ap.parse_args()
    if args.write:
        write(args.write, [s.strip() for s in args.tasks.split(",") if s.strip()])
    if args.time:
        time_all(
            args.time, args.out, args.reps, args.rounds, {x for x in args.only.split(",") if x}, args.soak_s
        )
    if not (args.write or args.time):
        ap.error("give --write DIR and/or --time DIR")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
