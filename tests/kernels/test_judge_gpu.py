"""The judge on a real GPU: transport, timing and its cross-checks, runtime evidence (skipped without CUDA).

One command on a GPU machine runs it: `pytest tests/kernels/test_judge_gpu.py -q` (self-contained: the
tasks and candidates it needs are in the repository). With $OUT set, the
results of every evaluation are written to $OUT/judge_gpu.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from kernelwright.hardware import EvalConfig, EvalResult, WorkerPool  # noqa: E402
from kernelwright.tasks import load_task  # noqa: E402

HOSTILE = Path(__file__).parent / "hostile"
RELU = Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py"
_RESULTS: dict[str, dict] = {}


def hostile(body: str) -> str:
    return (HOSTILE / "_kernel.txt").read_text() + "\n\n" + body


HONEST = """
class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
"""

# Python-level timer patches: the harness times with C-level events it captured before the import, so
# these change nothing (the candidate is timed honestly and passes).
PATCHED_TIMERS = """
import time as _time

_event, _clock = torch.cuda.Event, _time
setattr(_event, "elapsed_time", lambda self, end: 1e-6)
setattr(_clock, "perf_counter", lambda: 0.0)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
"""

# The real work on a side stream that nobody waits for: CUDA events on the harness's stream see nothing.
SIDE_STREAM = """
_side = None


class ModelNew(nn.Module):
    def forward(self, x):
        global _side
        if _side is None:
            _side = getattr(torch.cuda, "Str" + "eam")()
        out = torch.empty_like(x)
        with getattr(torch.cuda, "str" + "eam")(_side):
            for _ in range(20):
                relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)
        return out
"""

# Torch computes in a thread; a kernel copies the result (the CPU corpus's candidate, on the GPU).
THREAD = (HOSTILE / "thread_compute.py").read_text()

# Remembers its answer per input tensor: fast when timed on the same tensors, wrong when they change.
REMEMBERS = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x):
        key = (x.data_ptr(), x.shape)
        if key not in self.memo:
            self.memo[key] = relu(x)
        return self.memo[key]
"""


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(device="cuda", workers=1) as p:
        yield p
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "judge_gpu.json").write_text(json.dumps(_RESULTS, indent=1, default=str))


@pytest.fixture(scope="module")
def relu_task():
    return load_task(RELU)


def run(pool: WorkerPool, task, name: str, body: str, cfg: EvalConfig | None = None) -> EvalResult:
    res = pool.evaluate(task, hostile(body), cfg or EvalConfig())
    _RESULTS[name] = res.model_dump(mode="json")
    print(f"\n{name}: {res.summary()} ({res.wall_s:.2f} s)")
    return res


def test_honest_candidate_is_verified_and_timed(pool, relu_task):
    res = run(pool, relu_task, "honest", HONEST)
    assert res.correct and res.timing_meaningful, res.error
    assert res.shapes_checked[0] == [[4096, 16384]] and len(res.shapes_checked) == 2
    assert 0.5 < res.speedup_vs_eager < 2.0, res.speedup_vs_eager  # a ReLU kernel runs at copy speed
    assert res.extra["wall_ms_per_call"] > 0 and res.extra["confinement"]["environment"] == "minimal"
    assert res.extra["gpu_kernels"]["triton"] >= 1
    # torch.compile, timed in paired rounds with eager, is compared through eager: a ReLU compiles to a copy-speed
    # kernel like eager's, and the candidate's figures against it follow from the paired ratios
    ratio = res.extra["compile_speedup_vs_eager"]
    assert 0.8 < ratio < 1.25 and res.extra["compile_ms_measured"] > 0, res.extra
    assert res.speedup_vs_compile == pytest.approx(res.speedup_vs_eager / ratio)
    assert res.compile_ms == pytest.approx(res.eager_ms / ratio)


def test_python_timer_patches_change_nothing(pool, relu_task):
    honest = run(pool, relu_task, "honest again", HONEST)
    patched = run(pool, relu_task, "patched timers", PATCHED_TIMERS)
    assert patched.correct, patched.error
    assert abs(patched.runtime_ms - honest.runtime_ms) / honest.runtime_ms < 0.2
    # every job drew its own input seeds (listed after the verdict): none in common
    seeds = [{s for v in r.extra["input_seeds"].values() for s in v} for r in (honest, patched)]
    assert seeds[0] and not seeds[0] & seeds[1], seeds


def test_work_on_a_side_stream_disagrees_with_the_wall_clock(pool, relu_task):
    res = run(pool, relu_task, "side stream", SIDE_STREAM)
    assert (res.correct, res.error_kind) == (False, "forbidden"), res.error
    assert "wall clock" in res.error


def test_torch_in_a_thread_is_caught(pool, relu_task):
    res = run(pool, relu_task, "thread", THREAD)
    assert (res.correct, res.error_kind) == (False, "forbidden"), res.error


# The judge once recorded one call (first shape, second trial): torch on every other one. Every call the
# judge reads is recorded now, the first (compiling) one included.
TORCH_OFF_THE_RECORDED_CALL = (HOSTILE / "torch_off_the_recorded_call.py").read_text()

# Torch computes on the GPU in a thread started and joined within forward, into a buffer made in __init__
# (storage there before forward); a kernel copies it out, so no thread is left running.
THREAD_JOINED = """
import threading


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.buf = torch.empty(4096 * 16384, device="cuda")

    def forward(self, x):
        def work():
            torch.clamp(x.reshape(-1), min=0, out=self.buf[: x.numel()])
            torch.cuda.synchronize()

        t = threading.Thread(target=work)
        t.start()
        t.join()
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 4096),)](self.buf, out, x.numel(), BLOCK=4096)
        return out
"""

# The same work in a thread started while ModelNew is built, which waits for forward and ends before it
# returns.
THREAD_FROM_INIT = (
    (HOSTILE / "thread_from_init.py")
    .read_text()
    .replace("torch.empty(5 * 123 * 77)", 'torch.empty(4096 * 16384, device="cuda")')
)

# An honest kernel that Triton autotunes on its first call, under the recorder now (the judge once
# recorded only a later call): its benchmark launches and torch ops must not read as out of sight.
AUTOTUNED = """
@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (1024, 2048, 4096)], key=["n"])
@triton.jit
def relu_tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_tuned[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel())
        return out
"""


def test_torch_off_the_once_recorded_call_is_caught(pool, relu_task):
    res = run(pool, relu_task, "torch off the recorded call", TORCH_OFF_THE_RECORDED_CALL)
    assert (res.correct, res.error_kind) == (False, "torch_fallback"), res.error


def test_torch_in_a_thread_joined_before_forward_returns_is_caught(pool, relu_task):
    res = run(pool, relu_task, "thread joined", THREAD_JOINED)
    assert (res.correct, res.error_kind) == (False, "forbidden"), res.error
    assert "started 1 thread(s)" in res.error


def test_torch_in_a_thread_started_while_building_is_caught(pool, relu_task):
    res = run(pool, relu_task, "thread from init", THREAD_FROM_INIT)
    assert (res.correct, res.error_kind) == (False, "forbidden"), res.error
    assert "building ModelNew" in res.error


def test_an_autotuned_kernel_passes_with_every_call_recorded(pool, relu_task):
    res = run(pool, relu_task, "autotuned", AUTOTUNED)
    assert res.correct and res.timing_meaningful, res.error
    assert res.extra["gpu_kernels"]["library"] == 0, res.extra["gpu_kernels"]


def test_answer_remembered_per_tensor_fails_the_recheck(pool, relu_task):
    res = run(pool, relu_task, "remembers", REMEMBERS)
    assert not res.correct and res.stage in ("correctness", "timing"), res.error


def test_timing_timeout_fails_the_candidate(pool, relu_task):
    slow = HONEST.replace("return relu(x)", "import time\n        time.sleep(0.3)\n        return relu(x)")
    res = run(pool, relu_task, "timing timeout", slow, EvalConfig(timing_timeout_s=2.0))
    assert (res.correct, res.error_kind, res.stage) == (False, "timeout", "timing"), res.error


MODES = Path(__file__).parent / "modes"


def test_batchnorm_in_both_modes_on_the_gpu(pool):
    """Buffers after a train-mode forward are the ones compared, whatever else the judge runs (the
    profiler's extra forward on the evidence trial must not count as a second update)."""
    src = (MODES / "bn_common.txt").read_text() + "\n\n" + (MODES / "bn_both_modes.py").read_text()
    res = pool.evaluate(load_task(MODES / "task_batchnorm.py"), src, EvalConfig())
    _RESULTS["batchnorm both modes"] = res.model_dump(mode="json")
    assert res.correct, res.error
    assert any("train() and eval()" in n for n in res.extra["notes"])


def test_bf16_programs_are_verified_against_a_float64_anchor_on_the_gpu(pool):
    """The offline writer's programs for two bf16 tasks (a norm chain and a tensor-core GEMM, which the CPU
    interpreter cannot check): correct on the GPU, bf16 outputs anchored on a float64 run."""
    from kernelwright.providers.offline.writer import write_program
    from kernelwright.tasks import bundled_suite_dir
    from tests.fakes.writer import writer_prompt

    for level, name in (("level2_bf16", "05_rmsnorm_silu_gate"), ("level1_bf16", "14_matmul_square")):
        task = load_task(bundled_suite_dir(level) / f"{name}.py")  # type: ignore[arg-type]
        code = write_program(writer_prompt(task.source)).code
        assert code is not None
        res = pool.evaluate(task, code, EvalConfig())
        _RESULTS[f"bf16 {name}"] = res.model_dump(mode="json")
        print(f"\nbf16 {name}: {res.summary()} ({res.wall_s:.2f} s)")
        assert res.correct, res.error
        assert "used" in res.extra.get("float64_reference", {}).values(), res.extra.get("float64_reference")


def test_a_kept_cudnn_convolution_runs_at_the_strict_precision(pool):
    """The writer's softmax design for level2/21 keeps the 3-D convolution in torch (cuDNN). torch's default
    lets cuDNN use TF32; the candidate process sets the switches as the judge ran the reference, so the
    program holds strict fp32 (it once failed with 13% of its elements outside tolerance)."""
    from kernelwright.providers.offline.choice.variants import program_variant
    from kernelwright.tasks import bundled_suite_dir

    task = load_task(bundled_suite_dir("level2") / "21_conv3d_softmax_maxpool_maxpool.py")  # type: ignore[operator]
    code = program_variant(task.source, task.name, "row_registers", {"BLOCK_I": 128, "TILE": 4096}).code
    assert code is not None and "conv3d" in code
    res = pool.evaluate(task, code, EvalConfig())
    _RESULTS["kept cudnn conv, strict"] = res.model_dump(mode="json")
    assert res.correct, res.error


# Launches the compiled kernel Triton's JIT returned, as the generated programs' _kw_launch does after its
# first launch: the recorder must still see every launch (it once saw only the JIT's), and a forward that
# hides torch work behind such launches must still be read for what it is.
DIRECT = """
_compiled = {}


def relu_direct(x):
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 4096), 1, 1)
    key = x.numel()  # Triton specializes on the size (a multiple of 16 or not): one kernel per size
    if key not in _compiled:
        _compiled[key] = relu_kernel[grid](x, out, x.numel(), BLOCK=4096)
    else:
        _compiled[key][grid](x, out, x.numel(), 4096)
    return out


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_direct(x.contiguous())
"""

DIRECT_DECORATION = DIRECT.replace(
    "return relu_direct(x.contiguous())", "relu_direct(x.contiguous())\n        return torch.relu(x)"
)


def test_launches_of_a_kept_compiled_kernel_are_recorded(pool, relu_task):
    res = run(pool, relu_task, "direct launches", DIRECT)
    assert res.correct, res.error
    assert res.kernel_launches == 1 and res.extra["gpu_kernels"]["library"] == 0
    res = run(pool, relu_task, "direct launch beside torch", DIRECT_DECORATION)
    assert (res.correct, res.error_kind) == (False, "torch_fallback"), res.error
