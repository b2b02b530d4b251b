"""The evaluation harness end to end on CPU (Triton interpreter).

Each candidate in candidates/ is a known failure (or success) and must come back with the right stage
and error kind; the pool must survive a hang and an abort (they cost only the candidate's process) and
a slow reference (it costs the judge) and still serve a correct candidate after. The session's shared
pool (tests/kernels/conftest.py) judges every case, the slow reference too: it costs the shared judge one
restart, which the tests count from where the slow reference began, and the restarted judge then serves
the modules after this one (a pool of its own would start one more judge, ~4 s on two cores). Run with -s
to see the warm per-candidate overhead.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernelwright.hardware import EvalConfig, EvalResult
from kernelwright.hardware.judge.server import PARAMETERS_NOTE
from kernelwright.tasks import load_task

CANDIDATES = Path(__file__).parent / "candidates"


def source(name: str) -> str:
    path = CANDIDATES / name
    return path.read_text() if path.exists() else (CANDIDATES / f"{name}.txt").read_text()


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
    "relu_cached_result.py": ("correctness", "mismatch", "trial 2/3, seed "),
    "relu_nan.py": ("correctness", "mismatch", "NaN/inf mismatches"),
    "relu_import_error.py": ("compile", "import_error", "kernelwright_no_such_module"),
    "relu_syntax_error.py": ("parse", "syntax_error", "line 11"),
    "relu_pure_torch.py": ("parse", "static_check", "no Triton kernel"),
    "relu_calls_reference.py": ("parse", "static_check", "reference `Model`"),
    "relu_try_fallback.py": ("parse", "static_check", "try/except around a launch of relu_kernel"),
    "relu_compile_error.py": ("compile", "compile_error", "power of 2"),
    "relu_no_launch.py": ("run", "torch_fallback", "launched no Triton kernel"),
    "relu_runtime_error.py": ("run", "runtime_error", "view"),
    # Gluon kernels do not run in the interpreter: the error says so, where Triton only says "0 active drivers"
    "relu_gluon.py": ("run", "runtime_error", "a Gluon kernel (triton.experimental.gluon)"),
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
    assert res.shapes_checked == [[[5, 123, 77]], [[3, 81, 51]]]  # get_small_inputs(), then sliced
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
    assert PARAMETERS_NOTE in res.extra["notes"]


# The hang's and the slow reference's limits: each test waits one out. A warm judge forks the candidate
# and runs its first forward in a fraction of a second, and the reference stage of a task whose forward
# sleeps has nothing else to do, so short limits are reached in the stage they are meant for.
HANG_LIMIT_S = 1.5
REFERENCE_LIMIT_S = 1


def test_infinite_loop_times_out(pool, relu_task):
    restarts = pool.restarts
    t0 = time.perf_counter()
    res = pool.evaluate(relu_task, source("relu_infinite_loop.py"), EvalConfig(timeout=HANG_LIMIT_S))
    assert (res.stage, res.error_kind) == ("compile", "timeout"), res.error
    assert f"{HANG_LIMIT_S:g} s limit" in res.error
    assert time.perf_counter() - t0 < 20
    assert pool.restarts == restarts  # a hang kills only that candidate's process
    assert pool.evaluate(relu_task, source("relu_ok.py")).correct


def test_abort_crashes_the_candidate_process(pool, relu_task):
    restarts = pool.restarts
    res = pool.evaluate(relu_task, source("relu_abort.py"))
    assert (res.stage, res.error_kind) == ("compile", "crash"), res.error
    assert "SIGABRT" in res.error
    assert 'candidate.py", line 21 in forward' in res.error  # faulthandler's stack, from the candidate's log
    assert pool.restarts == restarts  # an abort kills only that candidate's process
    assert pool.evaluate(relu_task, source("relu_ok.py")).correct


@pytest.fixture(scope="module")
def slow_reference(pool) -> tuple[EvalResult, int]:
    """The slow reference's result, and how many times the shared pool's judge was restarted for it."""
    # load_task runs the forward to analyse the task, so this task is built by hand
    from kernelwright.tasks import Task

    task = Task(name="task_slow_reference", source=source("task_slow_reference.py"), has_small_inputs=True)
    restarts = pool.restarts
    res = pool.evaluate(task, source("relu_ok.py"), EvalConfig(reference_timeout_s=REFERENCE_LIMIT_S))
    return res, pool.restarts - restarts


def test_slow_reference_is_a_harness_error(slow_reference):
    res, _ = slow_reference
    assert (res.stage, res.error_kind) == ("compile", "harness_error"), res.error
    assert "reference" in res.error and f"{REFERENCE_LIMIT_S:g} s limit" in res.error


def test_pool_keeps_serving(pool, slow_reference, relu_task):
    # the slow reference cost its judge, which was started again
    assert slow_reference[1] == 1
    restarts = pool.restarts
    results = pool.evaluate_many([(relu_task, source("relu_ok.py"))] * 2)
    assert pool.restarts == restarts
    assert all(r.correct for r in results), [r.error for r in results]


def test_warm_workers_serve_repeated_candidates_without_restarting(pool, relu_task):
    """Warm workers: repeated candidates are served by the same processes (no respawn per candidate).
    The per-candidate cost is printed for information; speed is measured in benchmarks/, not asserted."""
    src = source("relu_ok.py")
    pool.evaluate(relu_task, src)
    restarts = pool.restarts
    results = [pool.evaluate(relu_task, src) for _ in range(2)]
    assert all(r.correct for r in results), [r.error for r in results]
    assert pool.restarts == restarts
    walls = [r.wall_s for r in results]
    print(f"\nwarm per-candidate cost on CPU: mean {sum(walls) / len(walls) * 1e3:.0f} ms")


# ---------------------------------------------------------------- float64 reference in the worker

TANH_SUM_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.tanh(torch.sum(x, dim=self.dim))


def get_inputs():
    return [torch.randn(6, 4096, 37)]


def get_small_inputs():
    return [torch.randn(6, 4096, 37)]


def get_init_inputs():
    return [1]
"""

# A tiled sum over the middle dimension: 64-row blocks summed, block sums accumulated in fp32.
TANH_SUM_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_tanh_kernel(x_ptr, out_ptr, K, N, stride_b, stride_k, SCALE: tl.constexpr,
                    BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask = (offs_k[:, None] < K) & (offs_n[None, :] < N)
        tile = tl.load(x_ptr + b * stride_b + offs_k[:, None] * stride_k + offs_n[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    acc = acc * SCALE
    y = 1.0 - 2.0 / (tl.exp(2.0 * acc) + 1.0)
    tl.store(out_ptr + b * N + offs_n, y, mask=offs_n < N)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        B, K, N = x.shape
        out = torch.empty((B, N), device=x.device, dtype=x.dtype)
        grid = (B, triton.cdiv(N, 64))
        sum_tanh_kernel[grid](x, out, K, N, x.stride(0), x.stride(1), SCALE=SCALE_VALUE, BLOCK_K=64, BLOCK_N=64)
        return out
"""


@pytest.fixture(scope="module")
def tanh_sum_task():
    from kernelwright.tasks import load_task_source

    return load_task_source(TANH_SUM_TASK, "task_tanh_sum")


def test_long_reduction_is_checked_against_a_float64_reference(pool, tanh_sum_task):
    res = pool.evaluate(tanh_sum_task, TANH_SUM_CANDIDATE.replace("SCALE_VALUE", "1.0"))
    assert res.correct, res.error
    assert res.extra["float64_reference"] == {"small": "used", "sliced": "used"}
    tol = res.tolerance
    assert tol is not None and tol.allowance_factor == 16.0
    assert tol.reference_error is not None and 1e-7 < tol.reference_error < 1e-4
    assert any(n.startswith("small inputs (trial 1): output 0: float64-anchored") for n in res.extra["notes"])
    assert res.max_abs_error is not None and res.max_abs_error < 16 * tol.reference_error


def test_long_reduction_with_a_1e3_relative_error_fails(pool, tanh_sum_task):
    res = pool.evaluate(tanh_sum_task, TANH_SUM_CANDIDATE.replace("SCALE_VALUE", "1.001"))
    assert (res.stage, res.error_kind) == ("correctness", "mismatch"), res.error
    assert "+ 16 x reference error" in res.error
    assert "expected = a float64 run of the reference" in res.error
    assert res.tolerance is not None and res.tolerance.reference_error is not None


# A weight kept as a plain attribute: .double() does not convert it, so the float64 run cannot multiply.
PLAIN_WEIGHT_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.randn(77, 9)

    def forward(self, x):
        return x @ self.w


def get_inputs():
    return [torch.randn(5, 77)]


def get_small_inputs():
    return [torch.randn(5, 77)]


def get_init_inputs():
    return []
"""

PLAIN_WEIGHT_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_dot_kernel(x_ptr, w_ptr, out_ptr, K, N, BLOCK_K: tl.constexpr):
    m = tl.program_id(0)
    n = tl.program_id(1)
    offs = tl.arange(0, BLOCK_K)
    x = tl.load(x_ptr + m * K + offs, mask=offs < K, other=0.0)
    w = tl.load(w_ptr + offs * N + n, mask=offs < K, other=0.0)
    tl.store(out_ptr + m * N + n, tl.sum(x * w, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.randn(77, 9)

    def forward(self, x):
        x, w = x.contiguous(), self.w.to(x.device).contiguous()
        M, K = x.shape
        N = w.shape[1]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        row_dot_kernel[(M, N)](x, w, out, K, N, BLOCK_K=triton.next_power_of_2(K))
        return out
"""


def test_float64_reference_failure_falls_back_and_says_so(pool):
    from kernelwright.tasks import load_task_source

    task = load_task_source(PLAIN_WEIGHT_TASK, "task_plain_weight")
    res = pool.evaluate(task, PLAIN_WEIGHT_CANDIDATE)
    assert res.correct, res.error
    status = res.extra["float64_reference"]["small"]
    assert status.startswith("unavailable: RuntimeError"), status
    assert any(
        "float64 reference unavailable" in n and "float32 reference alone" in n for n in res.extra["notes"]
    )
    assert res.tolerance is not None and res.tolerance.reference_error is None
    assert res.tolerance.allowance_factor is None


def test_float64_reference_can_be_switched_off(pool, tanh_sum_task):
    res = pool.evaluate(
        tanh_sum_task, TANH_SUM_CANDIDATE.replace("SCALE_VALUE", "1.0"), EvalConfig(reference_fp64=False)
    )
    assert res.extra["float64_reference"]["small"].startswith("not used")
    assert res.tolerance is not None and res.tolerance.reference_error is None
