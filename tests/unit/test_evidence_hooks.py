"""The judge's launch hooks (hardware/judge/evidence.install_launch_hooks) see a compiled kernel's launch too: a
program that keeps the kernel Triton's JIT returned and launches it again (the generated programs' direct
launch, `_kw_launch`) must be recorded as launching it, or the judge would read its forward as launching
nothing. Without a GPU a compiled kernel cannot be built; one whose launcher is a Python function stands in
(the hook wraps whatever `CompiledKernel.run` returns)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from triton.compiler.compiler import CompiledKernel  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from kernelwright.hardware.judge.evidence import Recorder, install_launch_hooks  # noqa: E402


@pytest.fixture()
def hooked():
    originals = {cls: cls.__dict__["run"] for cls in (JITFunction, CompiledKernel)}
    recorder = Recorder()
    replaced = install_launch_hooks(recorder)
    try:
        yield recorder, replaced
    finally:
        for cls, run in originals.items():
            cls.run = run


def _compiled(name: str) -> CompiledKernel:
    def launcher(gx, gy, gz, stream, function, packed, launch_meta, enter, exit, x, out, n):
        out[:n] += x[:n]

    kernel = CompiledKernel.__new__(CompiledKernel)
    kernel._run, kernel.name = launcher, name
    return kernel


def test_a_compiled_kernel_launch_is_recorded_with_what_it_wrote(hooked):
    recorder, replaced = hooked
    assert any(cls is CompiledKernel for cls, _ in replaced)  # the guard checks these hooks stay in place
    kernel = _compiled("_kw_stage0")
    x, out = torch.ones(8), torch.zeros(8)
    recorder.start([x, out])  # there before forward
    kernel.run(1, 1, 1, 0, None, None, None, None, None, x, out, 8)
    recorder.stop()
    assert torch.equal(out, torch.ones(8))  # the launch ran
    assert recorder.launches == {"_kw_stage0": 1}
    ((kind, name, reads, writes),) = recorder.events
    out_key = out.untyped_storage().data_ptr()
    assert kind == "triton" and name == "_kw_stage0" and writes == [out_key] and len(reads) == 2


def test_outside_a_recorded_forward_the_launch_just_runs(hooked):
    recorder, _ = hooked
    out = torch.zeros(4)
    _compiled("k").run(1, 1, 1, 0, None, None, None, None, None, torch.ones(4), out, 4)
    assert torch.equal(out, torch.ones(4)) and recorder.events == [] and not recorder.launches
