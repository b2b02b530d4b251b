"""KernelBench level-3 models judged whole by the CPU judge: each model split, each region signature given the
offline writer's first program, the programs stitched, the stitched model judged (`evaluate`, CPU, the judge's
own shapes), then, with the time that is left, the stitched model run once at the judge's first shape under the
Triton interpreter to count the regions whose kernel ran (as ../2026-12-05-cpu-level3-sizes/sizes_probe.py).

One child process per model (its own session, killed with its group at --limit-s); a child prints one JSON
line per stage (split, shapes, verdict, running), so a model killed at the limit keeps what it reached.

Usage: sweep.py --kb /work/kb/KernelBench/level3 --out DIR [--limit-s 300] [--judge-timeout 250] NUMBER...
Rows are appended to DIR/rows.jsonl; DIR/table.md is rewritten from all rows after each model. Stitched
files go to a temporary folder (they embed the KernelBench source), never to DIR.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _emit(**row: object) -> None:
    print("ROW " + json.dumps(row, default=str), flush=True)


def _one(path: str, judge_timeout: float, stitched_dir: str) -> None:
    """Runs in the child: split, write, stitch, judge, count the running regions; a ROW line per stage."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(ROOT))
    import torch

    from kernelwright.hardware import EvalConfig, evaluate
    from kernelwright.hardware.judge.inputs import verified_shapes
    from kernelwright.providers.offline import write_program
    from kernelwright.providers.protocol import render_section
    from kernelwright.tasks import exec_task_module, load_task
    from kernelwright.tasks.region_stitch import stitched_source
    from kernelwright.tasks.regions import analysis_model, split_model

    stem = Path(path).stem
    source = Path(path).read_text()
    t0 = time.time()
    task = types.ModuleType("task")
    exec(compile(source, path, "exec"), task.__dict__)
    model, inputs = analysis_model(task)
    split = split_model(model, inputs, measure=False)
    kernels: dict[int, tuple[str, str]] = {}
    refused: list[str] = []
    for signature, regions in split.unique().items():
        if not regions[0].source:
            continue
        request = render_section("request", "Write a faster kernel.", kind="large_step")
        answer = write_program(request + "\n\n" + render_section("task", regions[0].source, name="region"))
        if answer.code:
            kernels.update({r.index: (signature, answer.code) for r in regions})
        else:
            refused.append(str(answer.explanation).splitlines()[0][:120] if answer.explanation else "")
    plans = [r.plan() for r in split.regions]
    text = stitched_source(source, split.leaves, plans, kernels, stem, spec=split.spec)
    Path(stitched_dir, f"{stem}_stitched.py").write_text(text)
    _emit(stage="split", regions=len(split.regions), with_kernel=len(kernels), specialized=split.specialized,
          signatures=len(split.unique()), refused=refused, split_and_write_s=round(time.time() - t0, 1))  # fmt: skip

    cfg = EvalConfig(device="cpu", timeout=judge_timeout)
    module = exec_task_module(source, f"{stem}_probe")
    module.__dict__["__kw_source__"] = source  # as the judge keeps it (hardware/judge/reference.py)
    state = types.SimpleNamespace(module=module, shapes={}, name=stem)
    shapes = verified_shapes(state, cfg, "cpu")
    described = []
    for shape in shapes:
        xs = shape.module.get_small_inputs() if shape.small else shape.module.get_inputs()
        xs = shape.transform(xs) if shape.transform is not None else xs
        described.append({"label": shape.label, "note": shape.note,
                          "inputs": [list(x.shape) for x in xs if hasattr(x, "shape")]})  # fmt: skip
    _emit(stage="shapes", shapes=described)

    t1 = time.time()
    verdict = evaluate(load_task(path), text, cfg)
    first = (verdict.error or verdict.summary() or "").strip().splitlines()
    _emit(stage="verdict", correct=verdict.correct, judge_s=round(time.time() - t1, 1),
          error=first[0][:300] if first else "")  # fmt: skip

    running = []
    for shape in shapes[:1]:  # the primary shape only: under the interpreter each run costs a forward
        shaped = types.ModuleType("stitched")
        shaped.__dict__.update(shape.module.__dict__)
        exec(compile(text, "stitched.py", "exec"), shaped.__dict__)
        torch.manual_seed(0)
        init = shape.module.get_small_init_inputs() if shape.small else shape.module.get_init_inputs()
        xs = shape.module.get_small_inputs() if shape.small else shape.module.get_inputs()
        xs = shape.transform(xs) if shape.transform is not None else xs
        try:
            stitched = shaped.ModelNew(*init)
            with torch.no_grad():
                stitched(*xs)
            plan = next(iter(stitched.__dict__["_kw_plans"].values()))
            ran = sum(1 for i in plan.kernels if plan.matches[i])
            running.append(f"{shape.label} {ran}/{len(plan.regions)}")
        except Exception as exc:  # reported in the row: a stitched model that does not run here
            running.append(f"{shape.label} raised {type(exc).__name__}: {str(exc)[:80]}")
        _emit(stage="running", running=running)


def _table(rows: list[dict]) -> str:
    out = ["| model | regions | with kernel | running (judge's shapes) | judge's shapes (inputs) | verdict | "
           "judge s | wall s | error's first line |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        shapes = "; ".join(f"{s['label']} {s['inputs']}" for s in r.get("shapes", []))
        verdict = {True: "correct", False: "WRONG/failed"}.get(r.get("correct"), r.get("outcome", ""))
        err = str(r.get("error", "")).replace("|", "/")[:160]
        out.append(f"| {r['model']} | {r.get('regions', '')} | {r.get('with_kernel', '')} | "
                   f"{', '.join(r.get('running', []))} | {shapes} | {verdict} | {r.get('judge_s', '')} | "
                   f"{r['wall_s']} | {err} |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("numbers", nargs="*")
    ap.add_argument("--kb", default="/work/kb/KernelBench/level3")
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-s", type=float, default=300.0)
    ap.add_argument("--judge-timeout", type=float, default=250.0)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--stitched-dir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        _one(a.one, a.judge_timeout, a.stitched_dir)
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stitched_dir = tempfile.mkdtemp(prefix="kw-level3-stitched-")
    for number in a.numbers:
        path = glob.glob(f"{a.kb}/{number}_*.py")[0]
        t0 = time.time()
        cmd = [sys.executable, __file__, "--one", path, "--judge-timeout", str(a.judge_timeout),
               "--stitched-dir", stitched_dir, "--out", str(out)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # fmt: skip
        try:
            stdout, stderr = proc.communicate(timeout=a.limit_s)
            outcome = "finished" if proc.returncode == 0 else f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            outcome = f"killed at the {a.limit_s:.0f} s limit"
        row: dict = {"model": Path(path).stem, "outcome": outcome, "wall_s": round(time.time() - t0, 1)}
        for line in stdout.splitlines():
            if line.startswith("ROW "):
                row.update(json.loads(line[4:]))
        if "correct" not in row and "error" not in row:
            tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
            row["error"] = (tail[-1] if tail else outcome)[:300]
        row.pop("stage", None)
        with open(out / "rows.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row)[:400], flush=True)
        rows = [json.loads(ln) for ln in (out / "rows.jsonl").read_text().splitlines() if ln.strip()]
        (out / "table.md").write_text(_table(rows))


if __name__ == "__main__":
    main()
