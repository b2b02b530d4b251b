"""`kernelwright bench --cluster`: the bench's tasks on a Dask cluster (graphs/bench_dask.py), on CPU.

A local cluster of two worker processes gives the same suite as the bench's own workers (same tasks,
statuses and kernels); a worker killed mid-bench is replaced and every task still ends recorded once,
with no evaluation of a run done twice.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.kernels.test_bench_cli import ledger, make_suite, run, start, wait_for

pytest.importorskip("distributed")


def _suite(out: Path) -> dict[str, tuple[str, str]]:
    data = json.loads((out / "suite.json").read_text())
    return {t["id"]: (t["status"], t["design"]) for t in data["tasks"]}


def test_bad_cluster_values_are_one_line(tmp_path):
    suite = make_suite(tmp_path / "suite", {"01_relu": "relu"})
    bad = run(str(suite), "--device", "cpu", "--out", str(tmp_path / "o"), "--cluster", "local:zero")
    assert bad.returncode != 0 and "local:N needs a worker count" in bad.stderr + bad.stdout
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


def test_a_dask_bench_with_a_worker_killed_midway_matches_the_bench_s_own_workers(tmp_path):
    """A local cluster of two workers, one of them killed once the first task is recorded: the worker is
    replaced, every task ends recorded once with nothing judged twice, and the suite (statuses and
    kernels) is the one the bench's own workers give."""
    names = {f"{i:02d}_{k}": k for i, k in enumerate(["relu", "scale"] * 2, 1)}
    suite = make_suite(tmp_path / "suite", names)
    common = ("--budget", "1", "--device", "cpu", "--memory", "off")
    out = tmp_path / "dask"
    proc = start(str(suite), *common, "--out", str(out), "--cluster", "local:2", log=tmp_path / "bench.log")
    try:
        wait_for(lambda: len(ledger(out)) >= 1, 300, "a first task was recorded", proc)
        workers = _dask_workers(proc.pid)
        assert workers, "no Dask worker process found"
        os.kill(workers[0], signal.SIGKILL)
        killed_at = len(ledger(out))
        status = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / "bench.log").read_text()
    assert status == 0, log
    assert "on the Dask cluster local:2" in log and " INFO " not in log  # Dask's own logs stay quiet
    assert killed_at < len(names), "the worker was killed after the bench had finished"
    rows = ledger(out)
    assert Counter(r["id"] for r in rows) == {f"suite/{n}": 1 for n in names}
    assert {r["worker"] for r in rows} <= {"dask w0", "dask w1"}
    for r in rows:  # each run's evaluation log names each candidate once: nothing was judged twice
        lines = (out / r["run_dir"] / "evaluations.jsonl").read_text().splitlines()
        keys = [(e["node_id"], e.get("phase")) for e in map(json.loads, lines)]
        assert len(keys) == len(set(keys)), (r["id"], keys)
    local = run(str(suite), *common, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stdout + local.stderr
    assert _suite(out) == _suite(tmp_path / "local")
