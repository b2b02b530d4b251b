"""`kernelwright bench --cluster`: the bench's tasks on a Dask cluster (bench/dask.py), on CPU.

A local cluster of two worker processes runs a suite while one worker is killed in the middle of a task
(some of its candidates judged, not all): the task is resumed on a worker from its run directory, judges
nothing twice, is recorded once and ends as its twin (the same task file) that no kill touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.kernels.test_bench_cli import ledger, make_suite, start, wait_for

pytest.importorskip("distributed")


def test_bad_cluster_values_are_one_line(tmp_path, capsys):
    from kernelwright.cli.main import main as cli_main

    suite = make_suite(tmp_path / "suite", {"01_relu": "relu"})
    code = cli_main(
        ["bench", str(suite), "--device", "cpu", "--out", str(tmp_path / "o"), "--cluster", "local:zero"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "local:N needs a worker count" in err and len(err.strip().splitlines()) == 1
    assert "--cluster local:zero:" in err  # printed as given (rich would make ":zero:" an emoji)
    assert not (tmp_path / "o").exists()


def _descendants(pid: int) -> list[int]:
    kids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(proc.name))
    return kids + [d for k in kids for d in _descendants(k)]


def _dask_workers(bench_pid: int) -> list[int]:
    """The Dask worker processes under the bench (not their judges)."""
    out = []
    for pid in _descendants(bench_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmd or b"forkserver" in cmd and b"kernelwright" not in cmd:
            out.append(pid)  # a process the Nanny started (its worker), not Python's resource tracker
    return out


def _evaluations(run_dir: Path) -> list[dict]:
    """The run's evaluation log: whole lines only (a line being written is left for the next look)."""
    path = run_dir / "evaluations.jsonl"
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def _stop_a_worker_mid_search(out: Path, proc: subprocess.Popen, budget: int) -> tuple[str, int, list[dict]]:
    """SIGSTOP the Dask worker of a task caught mid-search: some but not all of its candidates judged, no
    result.json, not in the ledger. The worker is the pid in the task's evaluation log; the task is
    looked at again once it is stopped, so it was still mid-search when the worker stopped making
    progress. Returns (task id, the worker's pid, the evaluations logged)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the bench ended before a task was caught mid-search"
        recorded = {r["id"] for r in ledger(out)}
        for run_dir in sorted((out / "runs").glob("*/*")):
            tid = f"{run_dir.parent.name}/{run_dir.name}"
            logged = _evaluations(run_dir)
            if tid in recorded or not 0 < len(logged) < budget or (run_dir / "result.json").exists():
                continue
            pid = logged[-1]["pid"]
            if pid not in _dask_workers(proc.pid):
                continue
            os.kill(pid, signal.SIGSTOP)
            logged = _evaluations(run_dir)
            if len(logged) < budget and not (run_dir / "result.json").exists():
                return tid, pid, logged
            os.kill(pid, signal.SIGCONT)  # it finished in between: look for another
        time.sleep(0.02)
    raise AssertionError("no task was caught mid-search")


@pytest.mark.slow  # about 30 s on two cores (a Dask cluster, four judges): with the other bench kill tests
def test_a_dask_worker_killed_mid_task_has_the_task_resumed_judging_nothing_twice(tmp_path):
    """A local cluster of two workers, one task each; the worker of a task that has judged some of its
    candidates is stopped there and killed. The task runs again on a worker, continuing from its run
    directory: the candidates judged before the kill are not judged again, the others are judged by
    another process, and the task is recorded once, with the same search as its twin (the same task
    file) that no kill touched. (Killed once the other task is recorded, the task goes to the other
    worker, whose judges are running, instead of the restarted one, which would start them again.)"""
    names = ["01_relu", "02_relu"]
    suite = make_suite(tmp_path / "suite", dict.fromkeys(names, "relu"))
    budget = 3
    out = tmp_path / "dask"
    proc = start(
        str(suite), "--budget", str(budget), "--device", "cpu", "--memory", "off", "--out", str(out),
        "--cluster", "local:2", log=tmp_path / "bench.log",
    )  # fmt: skip
    try:
        tid, pid, before = _stop_a_worker_mid_search(out, proc, budget)
        try:  # killed once the other task is recorded: its worker, judges started, takes this one at once
            wait_for(lambda: len(ledger(out)) == len(names) - 1, 300, "the other task was recorded", proc)
            assert tid not in {r["id"] for r in ledger(out)}
        finally:
            killed_at = time.time()
            os.kill(pid, signal.SIGKILL)
        status = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "bench.log").read_text()
    assert status == 0, log
    assert "on the Dask cluster local:2" in log and " INFO " not in log  # Dask's own logs stay quiet
    assert Counter(r["id"] for r in ledger(out)) == {f"suite/{n}": 1 for n in names}
    rows = {r["id"]: r for r in ledger(out)}
    assert {r["worker"] for r in rows.values()} <= {"dask w0", "dask w1"}
    for r in rows.values():  # each run's evaluation log names each candidate once: nothing was judged twice
        keys = [(e["node_id"], e["phase"]) for e in _evaluations(out / r["run_dir"])]
        assert len(keys) == len(set(keys)), (r["id"], keys)
    run_dir = out / rows[tid]["run_dir"]
    after = _evaluations(run_dir)
    assert after[: len(before)] == before and {e["pid"] for e in before} == {pid}
    resumed = after[len(before) :]
    assert resumed and pid not in {e["pid"] for e in resumed}, after  # judged by another process
    assert (run_dir / "result.json").stat().st_mtime >= killed_at  # finished after the kill
    (twin,) = set(rows) - {tid}
    search = ("status", "design", "attempts", "evaluations")
    assert {k: rows[tid][k] for k in search} == {k: rows[twin][k] for k in search}
    assert all(r["status"] == "correct" and len(r["attempts"]) == budget for r in rows.values())
