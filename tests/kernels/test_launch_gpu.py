"""A generated program's direct launch (emit.HELPERS["_kw_launch"]) on a real GPU: after the first launch
through Triton's JIT, later launches run the compiled kernel it returned, and every argument Triton
specializes on (a 1, a multiple of 16, a misaligned pointer) still gets a kernel of its own (skipped
without CUDA; `pytest tests/kernels/test_launch_gpu.py -q` on a GPU machine)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, n, stride, alpha, BLOCK: tl.constexpr, SHIFT: tl.constexpr = 0.0):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y + SHIFT, mask=mask)
"""


@pytest.fixture()
def program(tmp_path: Path):
    from kernelwright.providers.offline.emit.emit import HELPERS

    path = tmp_path / "kw_launch_program.py"
    path.write_text(KERNEL + HELPERS["_kw_launch"])
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_later_launches_run_the_kept_kernel_and_stay_right(program):
    base = torch.randn(4096 + 3, device="cuda")
    y = torch.randn(4096, device="cuda")
    cases = [  # (x view, n, stride, alpha, meta): each differs from the one before in what Triton specializes
        (base[:4096], 4096, 1, 2.0, {}),
        (base[:4096], 4096, 1, 2.0, {}),  # the same: the kept kernel
        (base[1:4097], 4096, 1, 2.0, {}),  # a pointer 4 bytes off 16
        (base[:4096], 4095, 1, -1.0, {}),  # n not a multiple of 16
        (base[:1], 1, 1, 0.5, {}),  # n == 1: Triton makes it a constant
        (base[:4096:2], 2048, 2, 1.5, {}),  # stride 2
        (base[:4096], 4096, 1, 2.0, {"SHIFT": 1.0}),  # a constexpr given
    ]
    for x, n, stride, alpha, meta in cases * 2:
        out = torch.full((4096,), float("nan"), device="cuda")
        x_flat = x if stride == 1 else base
        program._kw_launch(program.axpy, (-(-n // 256),), x_flat, y, out, n, stride, alpha, BLOCK=256, **meta)
        want = alpha * x[:n] + y[:n] + meta.get("SHIFT", 0.0)
        torch.testing.assert_close(out[:n], want)
        assert torch.isnan(out[n:]).all()
    assert len(program._KW_COMPILED) == 6  # one kept kernel per distinct case


def test_the_kept_kernel_is_the_one_the_jit_compiled(program):
    x, y, out = (torch.randn(1024, device="cuda") for _ in range(3))
    program._kw_launch(program.axpy, (4,), x, y, out, 1024, 1, 1.0, BLOCK=256)
    ((_device, compiled, tail, _launch),) = program._KW_COMPILED.values()
    assert compiled is program.axpy[(4,)](x, y, out, 1024, 1, 1.0, BLOCK=256)  # the JIT's cache returns it
    assert tail == [256, 0.0]


def test_kept_launches_run_on_the_current_stream_and_reach_a_launch_hook(program):
    """The kept kernel's launch looks the stream up at each launch (a launch on a side stream waits for
    that stream's work), and with a launch hook set (a profiler's) goes through Triton's runner, whose
    metadata the hook reads."""
    import triton

    x, y, out = (torch.randn(1 << 20, device="cuda") for _ in range(3))
    grid = ((1 << 20) // 256,)
    program._kw_launch(program.axpy, grid, x, y, out, 1 << 20, 1, 2.0, BLOCK=256)  # the JIT's launch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # the fill below is still queued behind this when the launch is made
        x.fill_(3.0)
        program._kw_launch(program.axpy, grid, x, y, out, 1 << 20, 1, 2.0, BLOCK=256)  # the kept kernel
    side.synchronize()
    torch.testing.assert_close(out, 6.0 + y)
    seen = []
    chain = triton.knobs.runtime.launch_enter_hook  # Triton 3.6: a chain of hooks, empty by default
    chain.add(seen.append)
    try:
        program._kw_launch(program.axpy, grid, x, y, out, 1 << 20, 1, 2.0, BLOCK=256)
    finally:
        chain.remove(seen.append)
    assert len(seen) == 1


def test_kept_launches_skip_triton_runner_while_no_hook_is_set(program, monkeypatch):
    """With the hook chains empty (Triton 3.6's default), a kept kernel's launch goes to its launcher
    without the runner (`compiled[grid]`, which looks the device, stream and hooks up per launch)."""
    from triton.compiler.compiler import CompiledKernel

    x, y, out = (torch.randn(1024, device="cuda") for _ in range(3))
    program._kw_launch(program.axpy, (4,), x, y, out, 1024, 1, 2.0, BLOCK=256)  # the JIT's launch
    runner = []
    original = CompiledKernel.__getitem__
    monkeypatch.setattr(
        CompiledKernel, "__getitem__", lambda self, grid: runner.append(grid) or original(self, grid)
    )
    for _ in range(3):
        program._kw_launch(program.axpy, (4,), x, y, out, 1024, 1, 2.0, BLOCK=256)
    torch.testing.assert_close(out, 2.0 * x + y)
    assert runner == []


def test_the_judge_records_each_launch_once_jit_or_direct(program):
    """The judge's recorder (hardware/judge/evidence) sees the JIT's launch and the direct one alike, once each."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    from kernelwright.hardware.judge.evidence import Recorder, install_launch_hooks

    originals = {cls: cls.__dict__["run"] for cls in (JITFunction, CompiledKernel)}
    recorder = Recorder(sync=torch.cuda.synchronize)
    install_launch_hooks(recorder)
    try:
        x, y, out = (torch.randn(512, device="cuda") for _ in range(3))
        recorder.start()
        for _ in range(3):  # the first through the JIT, then the kept kernel
            program._kw_launch(program.axpy, (2,), x, y, out, 512, 1, 1.0, BLOCK=256)
        recorder.stop()
    finally:
        for cls, run in originals.items():
            cls.run = run
    assert len(program._KW_COMPILED) == 1
    assert recorder.launches == {"axpy": 3}
