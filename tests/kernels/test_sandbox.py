"""The evaluation harness end to end on CPU (Triton interpreter): one worker pool serves every case.

Each candidate in candidates/ is a known failure (or success) and must come back with the right stage
and error kind; the pool must survive a hang and an abort and still serve a correct candidate after.
Run with -s to see the warm per-candidate overhead.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hardware import EvalConfig, EvalResult, WorkerPool
from tasks import load_task

pytestmark = pytest.mark.kernels

CANDIDATES = Path(__file__).parent / "candidates"


def source(name: str) -> str:
    path = CANDIDATES / name
    return path.read_text() if path.exists() else (CANDIDATES / f"{name}.txt").read_text()


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(device="cpu", workers=2) as p:
        yield p


@pytest.fixture(scope="module")
def relu_task():
    return load_task(CANDIDATES / "task_relu.py")


@pytest.fixture(scope="module")
def scale_task():
    return load_task(CANDIDATES / "task_scale.py")


# candidate file -> (stage, error_kind, text the error must contain)
BATCH: dict[str, tuple[str, str | None, str]] = {
    "relu_ok.py": ("done", None, ""),
    "relu_wrong_values.py": ("correctness", "mismatch", "max abs error"),
    "relu_wrong_shape.py": ("correctness", "shape_mismatch", "shape [47355], expected [5, 123, 77]"),
    "relu_half_written.py": (
        "correctness",
        "mismatch",
        "NaN/inf in the output where the reference is finite",
    ),
    "relu_cached_result.py": ("correctness", "mismatch", "trial 2/3, seed 1"),
    "relu_nan.py": ("correctness", "mismatch", "NaN/inf mismatches"),
    "relu_import_error.py": ("compile", "import_error", "kernelwright_no_such_module"),
    "relu_syntax_error.py": ("parse", "syntax_error", "line 11"),
    "relu_pure_torch.py": ("parse", "static_check", "no Triton kernel"),
    "relu_calls_reference.py": ("parse", "static_check", "reference `Model`"),
    "relu_try_fallback.py": ("parse", "static_check", "try/except around a launch of relu_kernel"),
    "relu_compile_error.py": ("compile", "compile_error", "power of 2"),
    "relu_no_launch.py": ("run", "static_check", "launched no Triton kernel"),
    "relu_runtime_error.py": ("run", "runtime_error", "view"),
}


@pytest.fixture(scope="module")
def batch(pool, relu_task) -> dict[str, EvalResult]:
    names = list(BATCH)
    results = pool.evaluate_many([(relu_task, source(n)) for n in names])
    return dict(zip(names, results, strict=True))


@pytest.mark.parametrize("name", list(BATCH))
def test_candidate_outcome(batch, name):
    stage, kind, text = BATCH[name]
    res = batch[name]
    assert (res.stage, res.error_kind) == (stage, kind), res.error
    assert res.correct is (kind is None)
    assert text in (res.error or ""), res.error
    assert res.precision == "strict"
    assert res.target == "cpu-interpreter"
    assert res.versions.triton and res.versions.torch


def test_correct_candidate_record(batch):
    res = batch["relu_ok.py"]
    assert res.trials == 3
    assert res.shapes_checked == [[[5, 123, 77]]]
    assert res.max_abs_error == 0.0
    assert res.tolerance is not None and res.tolerance.dtype == "float32" and res.tolerance.rtol == 1e-4
    assert res.kernel_launches == 1
    # CPU timings would be invented numbers: the result must say so and carry none.
    assert not res.timing_meaningful and res.timing_note
    assert res.runtime_ms is None and res.speedup_vs_eager is None and res.eager_ms is None
    assert any("get_small_inputs" in n for n in res.extra["notes"])


def test_mismatch_report_locates_errors(batch):
    res = batch["relu_wrong_values.py"]
    assert "first mismatches: [" in res.error
    assert res.max_abs_error and res.max_abs_error > 1e-3
    assert res.mismatched and res.mismatched > 1000


def test_state_dict_copied_from_reference(pool, scale_task):
    res = pool.evaluate(scale_task, source("scale_state_dict.py"))
    assert res.correct, res.error
    assert "state_dict copied from the reference" in res.extra["notes"]


def test_infinite_loop_times_out(pool, relu_task):
    t0 = time.perf_counter()
    res = pool.evaluate(relu_task, source("relu_infinite_loop.py"), EvalConfig(timeout=3))
    assert (res.stage, res.error_kind) == ("compile", "timeout"), res.error
    assert "3 s limit" in res.error
    assert time.perf_counter() - t0 < 20


def test_abort_crashes_worker(pool, relu_task):
    res = pool.evaluate(relu_task, source("relu_abort.py"))
    assert (res.stage, res.error_kind) == ("compile", "crash"), res.error
    assert "SIGABRT" in res.error
    assert 'candidate.py", line 21 in forward' in res.error  # faulthandler's stack, from the worker's log


def test_slow_reference_is_a_harness_error(pool):
    # load_task runs the forward to analyse the task, so this task is built by hand
    from tasks import Task

    task = Task(name="task_slow_reference", source=source("task_slow_reference.py"), has_small_inputs=True)
    res = pool.evaluate(task, source("relu_ok.py"), EvalConfig(reference_timeout_s=2))
    assert (res.stage, res.error_kind) == ("compile", "harness_error"), res.error
    assert "reference" in res.error and "2 s limit" in res.error


def test_pool_keeps_serving(pool, relu_task):
    assert pool.restarts >= 3  # the hang, the abort and the slow reference each cost one worker
    results = pool.evaluate_many([(relu_task, source("relu_ok.py"))] * 2)
    assert all(r.correct for r in results), [r.error for r in results]


def test_warm_overhead(pool, relu_task):
    """Warm workers: the per-candidate cost is the check itself, not a process start (~seconds)."""
    src = source("relu_ok.py")
    pool.evaluate(relu_task, src)
    walls = [pool.evaluate(relu_task, src).wall_s for _ in range(4)]
    mean = sum(walls) / len(walls)
    print(f"\nwarm per-candidate overhead on CPU: mean {mean * 1e3:.0f} ms, min {min(walls) * 1e3:.0f} ms")
    assert mean < 2.0
