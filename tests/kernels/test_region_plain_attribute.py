"""A tensor a model keeps as a plain attribute (not a parameter or buffer), as level3/33_VanillaRNN keeps its
hidden state: `.cuda()` leaves it where it was made and the forward moves it (`self.hidden.to(x.device)`).
The region's task holds it as a buffer, and its program drops the `.to` (a no-op where it was traced), so the
stitched model's kernel got the CPU tensor beside CUDA inputs ("Expected all tensors to be on the same
device", on an H200). The kernel now gets it on its inputs' device."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest
import torch

from kernelwright.hardware import EvalConfig, evaluate
from kernelwright.providers.offline import write_program
from kernelwright.tasks import exec_task_module, load_task
from kernelwright.tasks.region_runtime import _plain_attribute
from kernelwright.tasks.region_stitch import stitched_source
from kernelwright.tasks.regions import split_model
from tests.fakes.writer import writer_prompt

SOURCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.state = torch.randn(batch_size, width)
        self.mix = nn.Linear(2 * width, width)

    def forward(self, x):
        self.state = self.state.to(x.device)
        return torch.tanh(self.mix(torch.cat((x, self.state), dim=1)))


batch_size = 4
width = 16


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return [width]
"""


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _stitched(folder: Path | None = None) -> tuple[types.ModuleType, str]:
    task = exec_task_module(SOURCE, "task")
    split = split_model(task.Model(*task.get_init_inputs()), task.get_inputs())
    kernels = {}
    for region in split.regions:
        if region.source:
            answer = write_program(writer_prompt(region.source))
            assert answer.code is not None, answer.explanation
            kernels[region.index] = (region.signature, answer.code)
    assert any("state" in r.bindings.values() for r in split.regions if r.index in kernels)
    stitched = stitched_source(SOURCE, split.leaves, [r.plan() for r in split.regions], kernels)
    if folder is None:
        return task, stitched
    path = folder / "stitched.py"  # a file: Triton's JIT reads each kernel's source from one
    path.write_text(stitched)
    spec = importlib.util.spec_from_file_location("stitched_plain", path)
    assert spec is not None and spec.loader is not None
    candidate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(candidate)
    return candidate, stitched


def test_a_plain_tensor_attribute_is_told_from_parameters_and_buffers() -> None:
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3))
    model.extra = torch.zeros(2)
    assert _plain_attribute(model, "extra")
    assert not _plain_attribute(model, "0.weight") and not _plain_attribute(model, "0.running_mean")
    assert not _plain_attribute(model, "missing.path")


def test_the_stitched_model_with_a_plain_attribute_is_correct(tmp_path: Path) -> None:
    _, stitched = _stitched()
    path = tmp_path / "task.py"
    path.write_text(SOURCE)
    verdict = evaluate(load_task(path), stitched, EvalConfig(device="cpu"))
    assert verdict.correct, verdict.error


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_attribute_left_on_the_cpu_reaches_the_kernel_on_the_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")
    candidate, _ = _stitched(tmp_path)
    torch.manual_seed(0)
    ref = candidate.Model(*candidate.get_init_inputs()).cuda()
    new = candidate.ModelNew(*candidate.get_init_inputs()).cuda()
    new.load_state_dict(ref.state_dict())
    new.state = ref.state.clone()
    assert ref.state.device.type == "cpu" and new.state.device.type == "cpu"  # .cuda() left them there
    x = torch.randn(4, 16, device="cuda")
    torch.testing.assert_close(new(x), ref(x))
