"""The rule loop end to end, as `kernelwright bench` runs it: a failure on one task becomes a rule in the
Chroma store, the context manager injects it into the next task's prompt, and the writer obeys it.

The failure is made with the offline writer that ignores the target's limits (`offline:ignore-target-limits`,
an H100's habits) writing strict fp32 GEMMs for an L4 (99 KiB of shared memory per block): every candidate
is verified under the interpreter and compiled for sm_89, where the root's pipelined 128 x 128 x 64 fp32
tiles in three stages do not fit. The compiler's report is deterministic, so its rule is offered from its first
sighting (memory.records.Rule.certain), and the second task's root keeps inside the target.

The default suite runs the loop as two optimize runs in this process into one memory folder (the session's
warm judge pool, no bench processes to start): the same failure, rule, prompt and choice. What it needs is two
compiles for sm_89, each in a contained process of its own (about 8 s each on two loaded cores). The bench
itself (its fresh store in the bench folder shared by the tasks, `--rules` passed to its worker) and the
control without rules, each about 25 s of process starts and compiles, are slow tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import run_optimize
from kernelwright.nodes import resources
from kernelwright.tasks import bundled_suite_dir

ROOT = Path(__file__).resolve().parents[2]
KW = ROOT / ".venv" / "bin" / "kernelwright"


def _bench(tasks: Path, out: Path, rules: str) -> dict[str, list[dict]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWRIGHT_")}
    env.update(LANGSMITH_TRACING="false", PYTHONUNBUFFERED="1")
    args = [str(tasks), "--budget", "1", "--seed", "0", "--device", "cpu", "--target", "nvidia-l4",
            "--memory", "fresh", "--rules", rules, "--model", "offline:ignore-target-limits", "--out", str(out),
            "--unseen", "0"]  # fmt: skip
    proc = subprocess.run([str(KW), "bench", *args], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    return {row["task"]: row["attempts"] for row in rows}


def _tasks(tmp_path: Path) -> Path:
    """Two large fp32 products: each root is the grouped 3xTF32 kernel of 128 x 128 x 64 fp32 tiles in three
    stages (192 KiB of shared memory; on an H200 it fits)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name, suite, file in (
        ("a_matmul", "level1", "17_matmul_transposed_a.py"),
        ("b_linear_bias_relu", "level2", "01_linear_bias_relu.py"),
    ):
        (tasks / f"{name}.py").write_text((bundled_suite_dir(suite) / file).read_text())
    return tasks


def _optimize(tasks: Path, memory: Path, out: Path) -> dict[str, list[dict]]:
    """The two tasks as two optimize runs, in order, into one memory folder: each run's attempts."""
    ctx = Context(model="offline:ignore-target-limits", budget=1, seed=0, device="cpu", target="nvidia-l4",
                  memory=str(memory), rules=True, workers=1)  # fmt: skip
    attempts = {}
    try:
        for task in sorted(tasks.glob("*.py")):
            res = run_optimize(task, ctx, out / task.stem, close_pools=False)
            attempts[task.stem] = [n for n in res.search["nodes_detail"] if n.get("action")]
    finally:
        resources.close_memories()
    return attempts


def _check_the_rule_kept_the_second_root_inside(attempts: dict[str, list[dict]]) -> None:
    (first,), (second,) = attempts["a_matmul"], attempts["b_linear_bias_relu"]
    assert first["status"] != "correct" and first["error_kind"] == "compile_error", first
    assert "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64" in first["design"] and "num_stages=3" in first["design"]
    assert second["status"] == "correct", second  # written under the rule the first task's failure taught
    assert not (
        "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64" in second["design"] and "num_stages=3" in second["design"]
    )


def test_a_shared_memory_rule_from_one_task_keeps_the_next_tasks_root_inside_the_target(tmp_path):
    _check_the_rule_kept_the_second_root_inside(
        _optimize(_tasks(tmp_path), tmp_path / "memory", tmp_path / "runs")
    )


@pytest.mark.slow
def test_in_a_bench_a_rule_from_one_task_keeps_the_next_tasks_root_inside_the_target(tmp_path):
    _check_the_rule_kept_the_second_root_inside(_bench(_tasks(tmp_path), tmp_path / "on", "on"))


@pytest.mark.slow
def test_without_rules_the_next_tasks_root_fails_the_same_way(tmp_path):
    """The control: the second root repeats the first's buffers and fails as the first did."""
    without = _bench(_tasks(tmp_path), tmp_path / "off", "off")
    (second_off,) = without["b_linear_bias_relu"]
    assert second_off["status"] != "correct" and second_off["error_kind"] == "compile_error", second_off
