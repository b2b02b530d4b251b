"""torch.compile(model, backend="kernelwright"): regions memory holds a kernel for run that kernel (a real
Chroma store in a temporary folder, kernels under the Triton interpreter); the rest runs in torch."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

import kernelwright.graphs.backend as backend
from kernelwright.memory import Case
from kernelwright.nodes import resources
from kernelwright.tasks.regions import split_model
from kernelwright.tasks.task import TaskSignature
from tests.kernels.tiny_model_src import TINY_MODEL, copy_kernel


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels run in this process under the Triton interpreter, for these tests only: set when the module
    is imported, the variable would reach every test that pytest-xdist's worker runs after collecting it."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _tiny() -> types.ModuleType:
    mod = types.ModuleType("tiny_backend")
    exec(compile(TINY_MODEL, "<tiny>", "exec"), mod.__dict__)
    return mod


def test_backend_swaps_in_the_kernel_memory_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = _tiny()
    torch.manual_seed(0)
    model = tiny.Model(*tiny.get_init_inputs())
    x = torch.randn(2, 3, 7, 9)
    split = split_model(model, [x])
    block = split.regions[1]  # the residual block's conv + BN + add + ReLU (two regions share it)
    memory = resources.open_shared_memory(tmp_path / "memory")
    memory.cases.add(
        Case(
            task_name=f"region_{block.signature}",
            signature=TaskSignature(),
            code=copy_kernel(block.source),
            correct=True,
            hardware="cpu-interpreter",
        )  # fmt: skip
    )
    monkeypatch.setenv("KERNELWRIGHT_MEMORY", str(tmp_path / "memory"))
    torch._dynamo.reset()
    expected = model(x)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    compiled = torch.compile(model, backend="kernelwright")
    # the eager call above moved the running statistics: compare from the same state
    model.load_state_dict(before)
    ref_model = tiny.Model(*tiny.get_init_inputs())
    ref_model.load_state_dict(before)
    out = compiled(x)
    assert backend.last_error == []
    swapped = [s["region"] for s in backend.last_swaps]
    assert swapped == [1, 2]
    calls = backend.last_swaps[0]["kernel"].forward.__globals__["CALLS"]
    assert calls[0] == 2  # the memory's kernel ran for both blocks
    torch.testing.assert_close(out, ref_model(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(model.blocks[1].bn.running_mean, ref_model.blocks[1].bn.running_mean)
    assert expected.shape == out.shape
    torch._dynamo.reset()


def test_backend_name_is_registered() -> None:
    from torch._dynamo import list_backends

    assert "kernelwright" in list_backends(exclude_tags=())
