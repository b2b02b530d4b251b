"""KernelBench level 3 judged whole with the offline writer's first program per region (no search).

Two steps, so that the CPU work (split, write, stitch) is done where no GPU is needed:

    # on any machine: split each model at its published sizes, write one program per region signature,
    # stitch them; one child process per model, killed with its group at --limit-s
    python benchmarks/level3_first_programs.py write --kb KernelBench/level3 --stitched DIR [-j 2] [N ...]

    # where the judge runs: judge every stitched model found in DIR as a candidate of its task
    python benchmarks/level3_first_programs.py judge --kb KernelBench/level3 --stitched DIR --out OUT \
        [--device cuda] [--jobs 1] [--no-time] [--limit-s 240] [N ...]

`write` leaves DIR/<stem>_stitched.py (none for a model where no region has a kernel, e.g. one nn.LSTM: its
reference stands, and `judge` says so) and a line per model in DIR/written.jsonl (regions, signatures, regions
with a kernel, the writer's refusals, seconds: split, programs, stitch, in all and of CPU). A model's signatures are
written in --region-jobs forked processes (default: the cores left per model, cores / --jobs); the stitched
file is the same for any number. Each model's child is forked from a server that imported torch and the writer
once, so its wall is its own work (write_s) and no import. `judge` appends a row per model to OUT/rows.jsonl (verdict,
stage and first error line, times and speedups, the judge's phases, wall) and rewrites OUT/table.md after each
model. With --jobs > 1 several models are judged at once: use it with --no-time (correctness only); timings
want the GPU to themselves. The stitched files embed the KernelBench source: keep DIR out of the repository.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _emit(**row: object) -> None:
    print("ROW " + json.dumps(row, default=str), flush=True)


SIGNATURES_PER_PROCESS = 8
"""A process writes at least this many signatures' programs: a few are not worth a process's start."""


def _first_program(source: str) -> tuple[str, str]:
    """The offline writer's first program for one region's source: (code, the first line of its refusal)."""
    from kernelwright.providers.offline import write_program
    from kernelwright.providers.protocol import render_section

    request = render_section("request", "Write a faster kernel.", kind="large_step")
    answer = write_program(request + "\n\n" + render_section("task", source, name="region"))
    why = str(answer.explanation).splitlines()[0][:120] if answer.explanation else ""
    return answer.code or "", "" if answer.code else why


def _write_one(path: str, stitched_dir: str, region_jobs: int = 1) -> None:
    """Child: split at the published sizes, write a first program per signature, stitch, save.

    With region_jobs > 1 the signatures are written in that many forked processes: each one's program depends
    on its region's source alone (the writer's analysis traces each signature once, in whichever process
    writes it), so the stitched file is the same as when one process writes them all."""
    sys.path.insert(0, str(ROOT))
    from kernelwright.providers.offline import write_program  # noqa: F401 - imported once, before any fork
    from kernelwright.tasks.region_stitch import stitched_source
    from kernelwright.tasks.regions import analysis_model, split_model

    stem = Path(path).stem
    source = Path(path).read_text()
    t0, cpu0 = time.time(), _cpu_s()
    task = types.ModuleType("task")
    exec(compile(source, path, "exec"), task.__dict__)
    model, inputs = analysis_model(task)
    split = split_model(model, inputs, measure=False)
    t_split = time.time()
    todo = [(signature, regions) for signature, regions in split.unique().items() if regions[0].source]
    sources = [regions[0].source for _, regions in todo]
    jobs = max(1, min(region_jobs, len(sources) // SIGNATURES_PER_PROCESS))
    if jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            written = pool.map(_first_program, sources, chunksize=1)
    else:
        written = [_first_program(s) for s in sources]
    t_programs = time.time()
    kernels: dict[int, tuple[str, str]] = {}
    refused: list[str] = []
    for (signature, regions), (code, why) in zip(todo, written, strict=True):
        if code:
            kernels.update({r.index: (signature, code) for r in regions})
        else:
            refused.append(why)
    out = Path(stitched_dir, f"{stem}_stitched.py")
    if kernels:
        out.write_text(stitched_source(
            source, split.leaves, [r.plan() for r in split.regions], kernels, stem, spec=split.spec
        ))  # fmt: skip
    else:  # nothing to swap in (a model that is one recurrence): the reference stands, as optimize-model says
        out.unlink(missing_ok=True)
    _emit(regions=len(split.regions), signatures=len(split.unique()), with_kernel=len(kernels),
          refused=refused, region_jobs=jobs, split_s=round(t_split - t0, 1),
          programs_s=round(t_programs - t_split, 1), stitch_s=round(time.time() - t_programs, 1),
          write_s=round(time.time() - t0, 1), cpu_s=round(_cpu_s() - cpu0, 1))  # fmt: skip


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that ended (the forked writers): on a machine others
    share, what a model's write cost when its wall holds their work too."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _judge_one(path: str, stitched: str, device: str, timed: bool, stage_timeout: float) -> None:
    """Child: judge one stitched model as a candidate of its task."""
    sys.path.insert(0, str(ROOT))
    from kernelwright.hardware import EvalConfig, evaluate
    from kernelwright.tasks import load_task

    cfg = EvalConfig(device=device, time=timed, timeout=stage_timeout)  # type: ignore[arg-type]
    t0 = time.time()
    r = evaluate(load_task(path), Path(stitched).read_text(), cfg)
    first = (r.error or "").strip().splitlines()
    _emit(correct=r.correct, stage=r.stage, error_kind=r.error_kind, error=first[0][:300] if first else "",
          error_end=(r.error or "")[-1500:] if len(first) > 1 else "",
          runtime_ms=r.runtime_ms, eager_ms=r.eager_ms, compile_ms=r.compile_ms,
          speedup_vs_eager=r.speedup_vs_eager, speedup_vs_compile=r.speedup_vs_compile,
          kernel_launches=r.kernel_launches, shapes=r.shapes_checked, device_name=r.device,
          phases_s=r.extra.get("phases_s"), judge_s=round(time.time() - t0, 1))  # fmt: skip


def _child(cmd: list[str], limit_s: float) -> tuple[dict, str]:
    """Runs one child in its own session; kills its whole group at the limit. Returns its ROW and outcome."""
    t0 = time.time()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=limit_s)
        outcome = "finished" if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        outcome = f"killed at the {limit_s:.0f} s limit"
    return _child_row(outcome, t0, stdout, stderr), outcome


def _child_row(outcome: str, t0: float, stdout: str, stderr: str) -> dict:
    """A child's row: its outcome and wall, what it printed as `ROW {json}`, and where it did not finish, the
    last line of its stderr."""
    row: dict = {"outcome": outcome, "wall_s": round(time.time() - t0, 1)}
    for line in stdout.splitlines():
        if line.startswith("ROW "):
            row.update(json.loads(line[4:]))
    if outcome != "finished":
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        row.setdefault("error", (tail[-1] if tail else outcome)[:300])
    return row


# What every write child imports: loaded once in a fork server, so that a model's child starts with them (each
# child's own imports took about 4 s of its wall, a third of most models'). torch._dynamo comes last, as in a
# child that imports it when it first traces: imported before the writer, it left the writer's analysis 15-30%
# slower (60 of DenseNet201's regions: 10.5 s against 13.4, three runs each), for a reason not looked into.
_PRELOAD = ["__main__", "kernelwright.providers.offline", "kernelwright.tasks.regions",
            "kernelwright.tasks.region_stitch", "torch._dynamo"]  # fmt: skip


def _in_own_session(out_path: str, err_path: str, path: str, stitched_dir: str, region_jobs: int) -> None:
    """A forked write child: its own session (killed with its group), stdout and stderr to files."""
    os.setsid()
    for fd, name in ((1, out_path), (2, err_path)):
        f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(f, fd)
        os.close(f)
    _write_one(path, stitched_dir, region_jobs)


def _forked_child(
    ctx: Any, path: str, stitched_dir: str, region_jobs: int, limit_s: float
) -> tuple[dict, str]:
    """`_child` for a write: the child forked from the fork server, with the same row and outcome."""
    import tempfile

    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        proc = ctx.Process(target=_in_own_session, args=(out, err, path, stitched_dir, region_jobs))
        proc.start()
        proc.join(limit_s)
        if proc.exitcode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.join()
            outcome = f"killed at the {limit_s:.0f} s limit"
        else:
            outcome = "finished" if proc.exitcode == 0 else f"exit {proc.exitcode}"
        stdout, stderr = (Path(f).read_text() if Path(f).exists() else "" for f in (out, err))
    return _child_row(outcome, t0, stdout, stderr), outcome


def _models(kb: str, numbers: list[str]) -> list[str]:
    if numbers:
        return [glob.glob(f"{kb}/{n}_*.py")[0] for n in numbers]
    return sorted(glob.glob(f"{kb}/*.py"), key=lambda p: int(Path(p).stem.split("_")[0]))


def _table(rows: list[dict]) -> str:
    out = ["| model | verdict | stage | vs eager | vs compile | ms | eager ms | launches | judge s | wall s | "
           "error's first line |", "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip

    def f(v: object, d: int = 2) -> str:
        return f"{v:.{d}f}" if isinstance(v, float) else ("" if v is None else str(v))

    for r in sorted(rows, key=lambda r: int(r["model"].split("_")[0])):
        verdict = {True: "correct", False: "WRONG/failed"}.get(r.get("correct"), r.get("outcome", ""))
        out.append(f"| {r['model']} | {verdict} | {r.get('stage', '')} | {f(r.get('speedup_vs_eager'))} | "
                   f"{f(r.get('speedup_vs_compile'))} | {f(r.get('runtime_ms'), 3)} | {f(r.get('eager_ms'), 3)} | "
                   f"{f(r.get('kernel_launches'))} | {f(r.get('judge_s'), 1)} | {r['wall_s']} | "
                   f"{str(r.get('error', '')).replace('|', '/')[:160]} |")  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["write", "judge", "write-one", "judge-one"])
    ap.add_argument("numbers", nargs="*")
    ap.add_argument("--kb", default="/work/kb/KernelBench/level3")
    ap.add_argument("--stitched", required=True, help="folder of stitched models (written, or read)")
    ap.add_argument("--out", help="judge: folder for rows.jsonl and table.md")
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--no-time", action="store_true", help="judge correctness only")
    ap.add_argument("--jobs", "-j", type=int, default=1)
    ap.add_argument("--limit-s", type=float, default=240.0, help="per model, the whole child")
    ap.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="the whole step: start no model after it, kill what runs at it",
    )
    ap.add_argument("--stage-timeout", type=float, default=180.0, help="the judge's per-stage limit")
    ap.add_argument(
        "--region-jobs",
        type=int,
        default=None,
        help="write: processes per model for its signatures' programs (default: this machine's cores / --jobs)",
    )
    ap.add_argument("--model-file", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.step == "write-one":
        _write_one(a.model_file, a.stitched, a.region_jobs or 1)
        return
    if a.step == "judge-one":
        stitched = str(Path(a.stitched, f"{Path(a.model_file).stem}_stitched.py"))
        _judge_one(a.model_file, stitched, a.device, not a.no_time, a.stage_timeout)
        return

    Path(a.stitched).mkdir(parents=True, exist_ok=True)
    paths = _models(a.kb, a.numbers)
    standing: list[str] = []
    if a.step == "judge":
        if not a.out:
            ap.error("judge needs --out")
        # a model with no stitched file had no region with a kernel: its row says the reference stands
        standing += [p for p in paths if not Path(a.stitched, f"{Path(p).stem}_stitched.py").exists()]
        rows_file = Path(a.out, "rows.jsonl")
        Path(a.out).mkdir(parents=True, exist_ok=True)
    else:
        rows_file = Path(a.stitched, "written.jsonl")
    print(f"{a.step}: {len(paths)} models, {a.jobs} at a time", flush=True)

    region_jobs = a.region_jobs or max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                            else os.cpu_count() or 1) // max(1, a.jobs))  # fmt: skip
    forks = None
    if a.step == "write":
        import multiprocessing

        t0 = time.time()
        forks = multiprocessing.get_context("forkserver")
        forks.set_forkserver_preload(_PRELOAD)
        ready = forks.Process(target=time.sleep, args=(0,))  # the server starts (and imports) here, so no
        ready.start()  # model's wall holds its imports
        ready.join()
        print(f"fork server ready in {time.time() - t0:.1f} s", flush=True)
    lock = threading.Lock()
    deadline = time.time() + a.deadline_s if a.deadline_s else float("inf")

    def one(path: str) -> dict:
        cmd = [sys.executable, __file__, f"{a.step}-one", "--model-file", path, "--stitched", a.stitched,
               "--device", a.device, "--stage-timeout", str(a.stage_timeout), "--region-jobs", str(region_jobs)]  # fmt: skip
        cmd += ["--no-time"] if a.no_time else []
        left = deadline - time.time()
        if a.step == "judge" and path in standing:
            row = {"outcome": "the reference stands: no region has a kernel", "wall_s": 0.0}
        elif left < 15:
            row = {"outcome": "not started: the step's deadline", "wall_s": 0.0}
        elif forks is not None:
            row, _ = _forked_child(forks, path, a.stitched, region_jobs, min(a.limit_s, left))
        else:
            row, _ = _child(cmd, min(a.limit_s, left))
        row["model"] = Path(path).stem
        with lock, open(rows_file, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row)[:300], flush=True)
        if a.step == "judge":
            with lock:
                rows = [json.loads(ln) for ln in rows_file.read_text().splitlines() if ln.strip()]
                Path(a.out, "table.md").write_text(_table(rows))
        return row

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        list(ex.map(one, paths))


if __name__ == "__main__":
    main()
