"""Where a stitched model's time goes on a GPU: the host's issue time per forward against the kernels' own time.

    python benchmarks/probes/model_profile.py KERNELBENCH_LEVEL3 STITCHED_DIR NUMBER [NUMBER ...] [--out OUT.jsonl]
        [--mode train|eval] [--calls 20] [--device cuda|cpu]

For each level-3 file at its published sizes, the reference Model and the stitched ModelNew (the file
`benchmarks/level3_first_programs.py write` wrote, NUMBER_*_stitched.py) are built with the same parameters, in
strict fp32 (TF32 off), and each is measured three ways, after three warm-up calls:
- wall: CUDA events around one call, the device synchronized before it (median of --calls);
- host: the Python time of one call without synchronizing, so the kernels of earlier calls still run while it
  issues (median of --calls): where host >= wall, the forward is bound by its launches, not its kernels;
- kernels: torch.profiler's CUDA kernel time per call (5 calls), with the 12 kernels that took longest;
- with --cprofile N: the stitched side's Python under cProfile over N calls, the 40 functions that took the
  longest themselves (tottime), written to the row as "cprofile" (per call, ms);
- with --sub OLD=>NEW (repeatable): the stitched file with that text replaced everywhere, e.g. another tile
  for the convolutions (`--sub "BM, BN, BK = (128, 128, 32)=>BM, BN, BK = (64, 64, 32)"`); the stitched row
  says how many places each replaced, and every stitched row has its first output's largest error over the
  reference's RMS ("err_over_rms", one call in the mode asked, before the timing).
A row per (model, side) goes to --out and a summary to stdout. Not the judge: no verification, no L2 flush,
the candidate in this process. On the CPU (`--device cpu`, Triton's interpreter) only wall and host.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[1:1] = [str(ROOT), str(ROOT / "benchmarks")]

from _common import (  # noqa: E402
    cuda_event_times,
    level3_pairs,
    load_program,
    max_err_over_rms,
    model_replayed,
    replay_counts,
    warmed_forward,
)
from kernel_times import kernel_profile  # noqa: E402

from kernelwright.tasks.module import exec_task_module, task_init_inputs, task_inputs  # noqa: E402


def _first_output(out: Any) -> Any:
    """A forward's output, or the first of its outputs."""
    return out if isinstance(out, torch.Tensor) else out[0]


def _host_ms(fn: Any, device: str, calls: int) -> float:
    """The median Python time of one call, the device not synchronized between calls."""
    if device == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    if device == "cuda":
        torch.cuda.synchronize()
    return statistics.median(times)


def _wall_ms(fn: Any, device: str, calls: int) -> float:
    """The median time of one call, each timed on its own (on the CPU, where nothing runs behind the host's
    back, the host's time)."""
    if device != "cuda":
        return _host_ms(fn, device, calls)
    return statistics.median(cuda_event_times(fn, warmup=0, reps=calls))


def _kernels(fn: Any, calls: int = 5) -> tuple[float, int, list[tuple[str, float, float]]]:
    """(CUDA kernel ms per call, kernel launches per call, the 12 longest kernels: name, calls and ms per call)."""
    rows, _ = kernel_profile(fn, calls)
    top = [(r["kernel"], r["calls"], round(r["us_per_forward"] / 1e3, 4)) for r in rows[:12]]
    return sum(r["us_per_forward"] for r in rows) / 1e3, round(sum(r["calls"] for r in rows)), top


def _cprofile(fn: Any, calls: int) -> list[tuple[str, int, float, float]]:
    """The 40 functions with the most time of their own over `calls` calls: (function, calls per call, own ms
    per call, cumulative ms per call)."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = [
        (f"{Path(file).name}:{line}:{name}", round(nc / calls), tt * 1e3 / calls, ct * 1e3 / calls)
        for (file, line, name), (_, nc, tt, ct, _) in stats.items()
    ]
    rows.sort(key=lambda r: -r[2])
    return [(f, n, round(t, 4), round(c, 4)) for f, n, t, c in rows[:40]]


def substituted(text: str, subs: list[str]) -> tuple[str, list[int]]:
    """`text` with each "OLD=>NEW" of `subs` replaced everywhere, and how many places each replaced."""
    counts = []
    for sub in subs:
        old, sep, new = sub.partition("=>")
        if not sep or not old:
            raise SystemExit(f"--sub {sub!r}: give OLD=>NEW")
        counts.append(text.count(old))
        text = text.replace(old, new)
    return text, counts


def profile_model(
    task_path: Path,
    stitched: Path,
    mode: str,
    calls: int,
    device: str,
    cprofile_calls: int = 0,
    subs: list[str] | None = None,
) -> list[dict[str, Any]]:
    task = exec_task_module(task_path.read_text(), "task", filename=str(task_path))
    text, counts = substituted(stitched.read_text(), subs or [])
    # Triton's JIT reads a kernel's source from its file: a copy, so the given folder is only read
    candidate = load_program(text, Path(tempfile.mkdtemp()) / f"stitched_{task_path.stem}.py")
    torch.manual_seed(0)
    init = task_init_inputs(task, small=False)
    ref = task.Model(*init).to(device)
    new = candidate.ModelNew(*init).to(device)
    new.load_state_dict(ref.state_dict())
    inputs = task_inputs(task, small=False, seed=0, device=device)
    rows = []
    with torch.no_grad():
        first = [m.train(mode == "train")(*inputs) for m in (ref, new)]
    err = max_err_over_rms(_first_output(first[1]), _first_output(first[0]))
    for side, model in (("reference", ref), ("stitched", new)):
        call = warmed_forward(model, inputs, mode == "train")
        row: dict[str, Any] = {"model": task_path.stem, "side": side, "mode": mode, "device": device,
                               "wall_ms": round(_wall_ms(call, device, calls), 4),
                               "host_ms": round(_host_ms(call, device, calls), 4)}  # fmt: skip
        if side == "stitched":
            replayed, replayable = replay_counts(model)
            row["replayed"] = f"{replayed} of {replayable}" + (
                " (whole forward)" if model_replayed(model) else ""
            )
            # a call after the warm-up (replayed where it replays) against the reference's first
            with torch.no_grad():
                again = model(*inputs)
            row["err_replayed"] = max_err_over_rms(_first_output(again), _first_output(first[0]))
        if device == "cuda":
            row["kernel_ms"], row["launches"], row["top"] = _kernels(call)
            row["gpu"] = torch.cuda.get_device_name()
        if side == "stitched":
            row["err_over_rms"] = err
            if subs:
                row["subs"] = dict(zip(subs, counts, strict=True))
        if cprofile_calls and side == "stitched":
            row["cprofile"] = _cprofile(call, cprofile_calls)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb")
    ap.add_argument("stitched")
    ap.add_argument("numbers", nargs="+")
    ap.add_argument("--out")
    ap.add_argument("--mode", choices=("train", "eval"), default="train")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument(
        "--cprofile",
        type=int,
        default=0,
        metavar="N",
        help="also profile the stitched side's Python over N calls (default: 0, off)",
    )
    ap.add_argument(
        "--sub",
        action="append",
        default=[],
        metavar="OLD=>NEW",
        help="replace OLD by NEW in the stitched file (repeatable)",
    )
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # the judge's strict precision
    torch.backends.cudnn.allow_tf32 = False
    for task_path, stitched in level3_pairs(args.kb, args.stitched, args.numbers):
        try:
            rows = profile_model(
                task_path, stitched, args.mode, args.calls, args.device, args.cprofile, args.sub
            )
        except Exception as exc:  # one model's failure does not stop the others
            print(f"{task_path.stem}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        for row in rows:
            kernel = (
                f" kernels {row['kernel_ms']:.3f} ms in {row['launches']} launches"
                if "kernel_ms" in row
                else ""
            )
            replayed = (
                f" replayed {row['replayed']} err/rms then {row['err_replayed']:.2e}"
                if "replayed" in row
                else ""
            )
            print(f"{row['model']} {row['side']:9s} err/rms {row.get('err_over_rms', 0):.2e} wall {row['wall_ms']:.3f} ms host {row['host_ms']:.3f} ms{kernel}{replayed}",
                  flush=True)  # fmt: skip
            for func, n, own, cum in row.get("cprofile", [])[:25]:
                print(f"    {own:8.4f} ms own {cum:8.4f} ms cum {n:5d}x {func}", flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
