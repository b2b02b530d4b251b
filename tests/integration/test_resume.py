"""Kill a real `kernelwright optimize` process mid-run, resume it, and check that nothing was lost or
evaluated twice.

The run uses a scripted local OpenAI-compatible server (each answer a little slow, so the run can be
killed between candidates) and real CPU workers. The checks use what the run directory and memory
hold: the append-only evaluation log, the reflection journal, result.json and the cases in Chroma.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kernelwright.memory import open_memory
from tests.fakes.chat import fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel
from tests.fakes.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
RELU = str(ROOT / "tasks" / "level1" / "01_relu.py")
BUDGET = 7


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "KERNELWRIGHT_BASE_URL")}
    env.update(LANGSMITH_TRACING="false", PYTHONUNBUFFERED="1")
    return env


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


# Slow (33 s measured on 2 shared cores: two CLI processes, seven candidates). The default run resumes a run stopped by
# its provider (test_openai_server.py), an interrupted bench (test_bench_cli.py) and a finished run
# (test_graph_cli.py); this one adds SIGKILL mid-run and the no-double-evaluation check.
@pytest.mark.slow
def test_kill_mid_run_then_resume(tmp_path):
    counter = itertools.count(1)

    def answer(body: dict) -> dict:
        n = next(counter)
        # every third answer is broken, so failures, repairs and rules are part of the run; the others
        # compile (blocks are powers of two: a failing config would make every later answer a repeat of a
        # failed program, which is not judged)
        code = relu_compile_error(f"broken{n}") if n % 3 == 0 else relu_kernel(f"d{n}", 256 * 2 ** (n % 3))
        return {"sleep": 0.6, "content": fenced(code)}

    run_dir = tmp_path / "run"
    memory = tmp_path / "memory"
    with FakeOpenAIServer([], model="fake-coder", default=answer) as server:
        cmd = [
            sys.executable, "-m", "kernelwright.cli.main", "optimize", RELU,
            "--model", "fake-coder", "--base-url", server.base_url,
            "--budget", str(BUDGET), "--device", "cpu", "--workers", "1",
            "--memory", str(memory), "--out", str(run_dir),
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        journal = run_dir / "reflections.jsonl"
        deadline = time.monotonic() + 240
        while len(_lines(journal)) < 3:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        done_before = len(_lines(journal))
        assert done_before < BUDGET, "the run finished before it could be killed"
        assert not (run_dir / "result.json").exists()

        resumed = subprocess.run(
            [sys.executable, "-m", "kernelwright.cli.main", "optimize", "--resume", str(run_dir), "--json"],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    run_id = json.loads((run_dir / "run.json").read_text())["thread_id"]
    assert result["run_id"] == run_id

    # the finished run has every candidate of its budget, each reflected exactly once
    assert result["search"]["nodes"] == BUDGET and result["search"]["finished"] == BUDGET
    reflected = [e["node_id"] for e in _lines(journal) if e["run_id"] == run_id]
    assert sorted(reflected, key=lambda n: int(n[1:])) == [f"n{i}" for i in range(1, BUDGET + 1)]
    # no candidate was evaluated twice: one log entry per (node, phase, code)
    evals = [e for e in _lines(run_dir / "evaluations.jsonl") if e["run_id"] == run_id]
    keys = Counter((e["node_id"], e["phase"], e["code_sha256"]) for e in evals)
    assert keys and max(keys.values()) == 1
    assert {e["node_id"] for e in evals} == {f"n{i}" for i in range(1, BUDGET + 1)}
    # both processes evaluated: the killed one and the resumed one
    assert len({e["pid"] for e in evals}) == 2
    # no case was lost and none was written twice
    mem = open_memory(memory)
    try:
        cases = [c for c in mem.cases.iter_all() if c.run_id == run_id]
        assert len(cases) == BUDGET
        assert len({c.id for c in cases}) == BUDGET
        failed = [c for c in cases if not c.correct]
        assert failed and all(c.error_kind for c in failed)
        assert mem.rules.count() >= 1
    finally:
        mem.close()
    assert (run_dir / "kernel.py").exists() and (run_dir / "report.html").exists()
    assert result["correct"] is True
