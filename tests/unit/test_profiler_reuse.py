"""On a GPU the compiler's worker call verifies and times a candidate; the profiler must reuse that result
rather than evaluate the program again (each evaluation costs a fresh compile and verification)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from kernelwright.graphs.context import Context
from kernelwright.hardware.result import EvalResult
from kernelwright.nodes.compiler import times_while_verifying
from kernelwright.nodes.profiler import profiler
from kernelwright.nodes.records import Branch, Candidate, Job, RunInfo
from kernelwright.nodes.search import Decision
from kernelwright.tasks import bundled_suite_dir, load_task


def _branch(tmp_path, *, run_timed: bool, result: EvalResult) -> Branch:
    task = load_task(bundled_suite_dir("level1") / "01_relu.py")
    run = RunInfo(
        run_id="r1",
        run_dir=str(tmp_path),
        task_name=task.name,
        model="offline",
        device="cuda:0" if run_timed else "cpu",
        target="h200" if run_timed else "cpu-interpreter",
        timing_meaningful=run_timed,
        roofline_floor_ms=0.5,
    )
    job = Job(decision=Decision(seq=1, parent="n0", action="large_step"), run_id="r1")
    return Branch(
        job=job, task=task, run=run, candidate=Candidate(node_id="n1", code="x = 1\n"), result=result
    )


def test_gpu_runs_time_while_verifying_and_cpu_runs_do_not(tmp_path):
    done = EvalResult(correct=True, stage="done")
    ctx = Context(model="offline")
    assert times_while_verifying(_branch(tmp_path, run_timed=True, result=done), ctx)
    assert not times_while_verifying(_branch(tmp_path, run_timed=False, result=done), ctx)
    seam = Context(model="offline", timing_source=lambda *a: (1.0, 2.0))
    assert not times_while_verifying(_branch(tmp_path, run_timed=True, result=done), seam)


def test_profiler_reuses_a_result_timed_while_verifying(tmp_path):
    timed = EvalResult(
        correct=True,
        stage="done",
        timing_meaningful=True,
        runtime_ms=1.0,
        runtime_p20_ms=0.9,
        runtime_p80_ms=1.3,
        eager_ms=2.0,
        compile_ms=1.5,
        speedup_vs_eager=2.0,
        speedup_vs_compile=1.5,
        wall_s=3.0,
    )
    branch = _branch(tmp_path, run_timed=True, result=timed)
    # No worker pool exists for cuda on this machine: evaluating again would fail, not pass silently.
    cmd = profiler(branch, Runtime(context=Context(model="offline", device="cuda")))
    sent = cmd.goto.arg  # type: ignore[union-attr]
    assert sent.timing.origin == "measured"
    assert sent.timing.runtime_ms == 1.0 and sent.timing.speedup_vs_compile == 1.5
    assert (sent.timing.runtime_p20_ms, sent.timing.runtime_p80_ms) == (0.9, 1.3)  # the spread travels on
    assert sent.timing.fraction_of_floor == 0.5
    assert cmd.update["cost"].evaluations == 0  # type: ignore[index]
    assert not (tmp_path / "evaluations.jsonl").exists()
