"""Offline compile feedback: real triton.compile for sm_90 on a machine with no GPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelwright.hardware.compile.feedback import CompileReport, compile_for_target
from kernelwright.tasks import bundled_suite_dir
from kernelwright.tasks.task import Task


def _task(level: str, stem: str) -> Task:
    path = bundled_suite_dir(level) / f"{stem}.py"
    return Task(name=stem, source=path.read_text(), path=path)


RELU = _task("level1", "01_relu")
MATMUL = _task("level1", "14_matmul_square")

GOOD = """
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
        _relu_kernel[grid](x, y, n, BLOCK=1024)
        _relu_kernel[grid](y, y, n, BLOCK=1024)  # same specialization: one kernel, two launches
        return y
"""

BROKEN_HELPER = """
import torch
import triton
import triton.language as tl


@triton.jit
def _scale(x):
    return x * undefined_scale


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = _scale(tl.load(x_ptr + offs, mask=mask))
    tl.store(y_ptr + offs, tl.maximum(y, 0.0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        assert torch.isfinite(x).all().item()  # data-dependent: cannot run on meta tensors
        _relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""

# Two kernels a GPU would reject or run badly: a 4-stage 128x128x64 fp32 matmul pipeline needs 256 KiB
# of shared memory (H200 allows 227 KiB per block); an 8192-wide row held by one warp spills.
OVER_LIMITS = """
import torch
import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _wide_softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    e = tl.exp(x)
    tl.store(y_ptr + offs, e / tl.sum(e, axis=0) + x - tl.max(x, axis=0), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
        _mm_kernel[grid](A, B, C, M, N, K, BM=128, BN=128, BK=64, num_warps=8, num_stages=4)
        D = torch.empty_like(C)
        _wide_softmax_kernel[(1,)](C, D, C.numel(), BLOCK=8192, num_warps=1)
        return C
"""

AUTOTUNED = """
import torch
import triton
import triton.language as tl


@triton.jit
def _fma(acc, a, b):
    return acc + tl.dot(a, b)


@triton.autotune(
    configs=[
        triton.Config({"BM": 64, "BN": 64, "BK": 32}, num_warps=4, num_stages=3),
        triton.Config({"BM": 128, "BN": 64, "BK": 32}, num_warps=8, num_stages=2),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = _fma(acc, a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(torch.nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
        grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))
        _mm_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1))
        return C
"""


def _line_of(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


def test_correct_kernel_compiles_for_sm90_with_wheel_ptxas():
    r = compile_for_target(GOOD, RELU, "h200", shapes="small")
    assert r.ok and r.error_kind is None, r.summary()
    assert r.gpu_target == "cuda:90" and r.shapes == "small" and r.target == "nvidia-h200"
    assert Path(r.ptxas).parts[-4:] == ("backends", "nvidia", "bin", "ptxas") and "triton" in r.ptxas
    assert len(r.kernels) == 1 and r.launches_seen == 2
    k = r.kernels[0]
    assert k.name == "_relu_kernel" and k.launches == 2 and k.compiled and k.ok
    assert k.signature == {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}
    assert k.constexprs == {"BLOCK": 1024} and k.num_warps == 4
    assert k.divisible_by_16 == ["x_ptr", "y_ptr"]  # n = 5 * 1237 is not a multiple of 16
    assert k.registers is not None and 0 < k.registers <= 255
    assert k.spill_store_bytes == 0 and not k.spills
    assert k.shared_memory_bytes is not None and not k.exceeds_shared_memory
    assert k.shared_memory_limit_bytes == 227 * 1024
    assert k.grid == [7]  # 5 x 1237 small input, 1024 per program
    assert k.def_line == _line_of(GOOD, "@triton.jit")


def test_compile_error_reports_the_source_line():
    r = compile_for_target(BROKEN_HELPER, RELU, "h200")  # auto: meta fails on .item(), small inputs used
    assert not r.ok and r.error_kind == "compile_error"
    assert r.shapes == "small" and "meta device failed" in r.notes[0]
    assert "undefined_scale" in r.run_error  # the interpreter hit the same bug when it ran the kernel
    k = r.kernels[0]
    assert not k.compiled and not k.ok
    assert k.error_line == _line_of(BROKEN_HELPER, "undefined_scale")
    assert "undefined_scale" in k.source_line
    assert "undefined_scale is not defined" in k.error_brief
    assert (
        f"_relu_kernel line {_line_of(BROKEN_HELPER, 'y = _scale(')}" in k.error
    )  # how the kernel got there
    assert f"line {k.error_line}" in r.summary()


@pytest.fixture(scope="module")
def over_limits() -> CompileReport:
    """OVER_LIMITS compiled for an H200 at the small shapes, its phases forked from the warm servers (as every
    compile here is unless told otherwise): read by two tests, compiled once (~2.5 s of CPU)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELWRIGHT_COMPILE_SERVER", "1")
        return compile_for_target(OVER_LIMITS, MATMUL, "h200", shapes="small")


def test_over_the_limit_kernels_are_flagged(over_limits):
    r = over_limits
    assert not r.ok and r.error_kind == "compile_error", r.summary()
    mm, wide = r.kernels
    assert mm.name == "_mm_kernel" and mm.compiled
    assert mm.shared_memory_bytes > 232448 and mm.exceeds_shared_memory and not mm.ok
    assert "EXCEEDS shared memory" in r.summary()
    assert wide.name == "_wide_softmax_kernel" and wide.compiled and wide.ok
    assert wide.spills and wide.spill_store_bytes > 0 and "SPILLS" in wide.summary()
    assert mm.shared_memory_limit_bytes == 232448


def test_autotuned_kernel_compiles_every_config_at_full_size():
    r = compile_for_target(AUTOTUNED, MATMUL, "h100")  # auto: full size on the meta device
    assert r.ok, r.summary()
    assert r.shapes == "full"
    configs = sorted((k.constexprs["BM"], k.num_warps, k.num_stages) for k in r.kernels)
    assert configs == [(64, 4, 3), (128, 8, 2)]
    for k in r.kernels:
        assert k.via == "launch" and k.registers and k.shared_memory_bytes > 0
        # 8192-sized ints and unit strides specialize as on the GPU: K is i32, stride 1 is a constant
        assert k.signature["K"] == "i32" and k.constexprs["sak"] == 1 and k.constexprs["sbn"] == 1
        assert {"a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "sam", "sbk"} <= set(k.divisible_by_16)
        assert k.grid == [8192 // k.constexprs["BM"], 8192 // k.constexprs["BN"]]


def test_failures_before_compiling_come_back_as_reports():
    pure_torch = (
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
    )
    r = compile_for_target(pure_torch, RELU, "h200", shapes="small")
    assert not r.ok and r.error_kind == "no_launch" and r.kernels == []
    r = compile_for_target("import torch\ndef broken(:\n", RELU, "h200", shapes="small")
    assert r.error_kind == "import_error" and "SyntaxError" in r.error


def test_a_hanging_candidate_is_killed_at_the_timeout():
    hang = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        while True:\n            pass\n"
    r = compile_for_target(hang, RELU, "h200", shapes="small", timeout_s=2)
    assert r.error_kind == "timeout" and not r.ok
    assert r.wall_s < 30  # killed at the limit, not left to run; slack for start-up on a loaded machine


def test_bad_arguments_raise_one_line_errors():
    with pytest.raises(ValueError, match="not a CUDA GPU target"):
        compile_for_target(GOOD, RELU, "cpu-interpreter")
    with pytest.raises(ValueError, match="unknown target"):
        compile_for_target(GOOD, RELU, "v100")
    with pytest.raises(ValueError, match="shapes"):
        compile_for_target(GOOD, RELU, "h200", shapes="medium")  # type: ignore[arg-type]


def test_a_half_matmul_compiles_the_kernel_its_target_runs(tmp_path, monkeypatch):
    """The writer's half-precision GEMM launches its tensor-descriptor twin on sm_90+ and its pointer kernel
    on older GPUs; the offline compile captures on meta tensors and must compile that same kernel."""
    import json

    import torch

    from kernelwright.hardware.compile.feedback import CAPTURE_TMA_ENV, _child_env
    from kernelwright.providers.offline import write_program
    from kernelwright.providers.offline.emit.emit import HELPERS
    from tests.fakes.writer import writer_prompt

    task = _task("level2_bf16", "01_linear_bias_relu")
    r = compile_for_target(write_program(writer_prompt(task.source)).code, task, "h200", shapes="full")
    assert r.ok and [k.name for k in r.kernels] == ["k1_matmul_tma"], r.summary()

    # the capture tells the launcher whether its target has TMA; without it, the pointer kernel is taken
    for arch, has in ((90, "1"), (80, "0")):
        (tmp_path / "job.json").write_text(json.dumps({"backend": "cuda", "arch": arch}))
        assert _child_env(tmp_path, interpret=True)[CAPTURE_TMA_ENV] == has
    meta = torch.empty(64, 64, dtype=torch.float16, device="meta")
    for has, taken in (("0", False), ("1", True)):
        monkeypatch.setenv(CAPTURE_TMA_ENV, has)
        helpers: dict = {"torch": torch}
        exec(HELPERS["_kw_tma"], helpers)
        assert (helpers["_kw_tma"](meta, 64, 64, 64, 1, 32, 32) is not None) is taken


@pytest.mark.parametrize(
    "stem, stages, coop",
    [("16_bmm", 5, False), ("17_matmul_transposed_a", 3, True)],  # K = 1024: ping-pong; K = 4096: cooperative
)
def test_a_plain_bf16_product_compiles_its_gluon_gemm_for_sm90_only(tmp_path, stem, stages, coop):
    """The writer's plain bf16 products start from Hopper's Gluon GEMM (the bmm, K = 1024, ping-pong at WS=5;
    A.T @ B, K = 4096, cooperative at WS=3); compiled for sm_90 the capture takes that kernel
    (KERNELWRIGHT_CAPTURE_WS) and Gluon's source compiles it: 12 warps (two consumer warpgroups, a producer's),
    within the shared memory emit_gluon.ws_smem_bytes counts and without spills. For another architecture the
    capture takes the Triton twin, as that GPU would."""
    import json

    from kernelwright.hardware.compile.feedback import CAPTURE_WS_ENV, _child_env
    from kernelwright.providers.offline import parse_meta, write_program
    from kernelwright.providers.offline.emit.emit_gluon import ws_smem_bytes
    from tests.fakes.writer import writer_prompt

    task = _task("level1_bf16", stem)
    code = write_program(writer_prompt(task.source)).code
    config = parse_meta(code).config
    assert (config.get("WS"), config.get("WS_COOP", "0")) == (str(stages), str(int(coop)))
    r = compile_for_target(code, task, "h200", shapes="full")
    assert r.ok and [k.name for k in r.kernels] == ["_kw_ws_gemm_kernel"], r.summary()
    k = r.kernels[0]
    assert k.num_warps == 12 and k.spill_store_bytes == 0, r.summary()
    smem = ws_smem_bytes(stages, coop=coop)
    assert smem - 64 < k.shared_memory_bytes <= smem <= 232448, r.summary()
    for arch, has in ((90, "1"), (100, "0"), (89, "0")):
        (tmp_path / "job.json").write_text(json.dumps({"backend": "cuda", "arch": arch}))
        assert _child_env(tmp_path, interpret=True)[CAPTURE_WS_ENV] == has


@pytest.mark.slow  # two real sm_90 compiles, ~5 s
def test_a_warm_server_reports_what_a_cold_process_reports(monkeypatch, over_limits):
    """Phases forked from a warm server (torch and Triton imported once) give the report cold processes
    give: the same kernels, registers, shared memory, spills and errors."""
    monkeypatch.setenv("KERNELWRIGHT_COMPILE_SERVER", "0")
    hot, cold = over_limits, compile_for_target(OVER_LIMITS, MATMUL, "h200", shapes="small")
    assert hot.error_kind == cold.error_kind == "compile_error" and hot.shapes == cold.shapes

    def facts(r):
        return [(k.name, k.registers, k.shared_memory_bytes, k.spill_store_bytes, k.ok) for k in r.kernels]

    assert facts(hot) == facts(cold) and len(facts(hot)) == 2


def test_servers_inherited_through_a_fork_are_left_to_their_owner(monkeypatch):
    """A copy of the caller made by fork() must not talk over its parent's server pipes: it starts its own."""
    from kernelwright.hardware.compile import server as compile_server

    class Stub:
        def __init__(self, env):
            self.owner, self.closed = os.getpid(), False

        def alive(self):
            return True

        def close(self):
            self.closed = True

    monkeypatch.setattr(compile_server, "_Server", Stub)
    monkeypatch.setattr(compile_server, "_idle", {True: [], False: []})
    parents = Stub({})
    parents.owner = os.getpid() + 1  # as if made by the process this one was forked from
    compile_server._idle[False].append(parents)
    taken = compile_server._take(False)
    assert taken is not parents and taken.owner == os.getpid()
    assert not parents.closed and compile_server._idle[False] == []  # dropped, not closed: not ours
    compile_server._give_back(taken, False)
    assert compile_server._take(False) is taken  # our own idle server is reused
