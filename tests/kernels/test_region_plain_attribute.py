"""A tensor a model keeps as a plain attribute (not a parameter or buffer), as level3/33_VanillaRNN keeps its
hidden state: `.cuda()` leaves it where it was made and the forward moves it (`self.hidden.to(x.device)`).
The region's task holds it as a buffer, and its program drops the `.to` (a no-op where it was traced), so the
stitched model's kernel got the CPU tensor beside CUDA inputs ("Expected all tensors to be on the same
device", on an H200). The kernel now gets it on its inputs' device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.tasks import load_task
from kernelwright.tasks.region_runtime import _plain_attribute
from tests.fakes.writer import first_programs_stitched, import_program

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


def _stitched() -> str:
    split, kernels, refused, stitched = first_programs_stitched(SOURCE)
    assert not refused, refused
    assert any("state" in r.bindings.values() for r in split.regions if r.index in kernels)
    return stitched


def test_a_plain_tensor_attribute_is_told_from_parameters_and_buffers() -> None:
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3))
    model.extra = torch.zeros(2)
    assert _plain_attribute(model, "extra")
    assert not _plain_attribute(model, "0.weight") and not _plain_attribute(model, "0.running_mean")
    assert not _plain_attribute(model, "missing.path")


def test_the_stitched_model_with_a_plain_attribute_is_correct(pool: WorkerPool, tmp_path: Path) -> None:
    stitched = _stitched()
    path = tmp_path / "task.py"
    path.write_text(SOURCE)
    verdict = pool.evaluate(load_task(path), stitched, EvalConfig(device="cpu"))  # the session's judge
    assert verdict.correct, verdict.error


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_attribute_left_on_the_cpu_reaches_the_kernel_on_the_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")
    reference = import_program(SOURCE, tmp_path / "plain_reference.py")
    candidate = import_program(_stitched(), tmp_path / "stitched_plain.py")  # ModelNew only
    torch.manual_seed(0)
    ref = reference.Model(*reference.get_init_inputs()).cuda()
    new = candidate.ModelNew(*reference.get_init_inputs()).cuda()
    new.load_state_dict(ref.state_dict())
    new.state = ref.state.clone()
    assert ref.state.device.type == "cpu" and new.state.device.type == "cpu"  # .cuda() left them there
    x = torch.randn(4, 16, device="cuda")
    torch.testing.assert_close(new(x), ref(x))
