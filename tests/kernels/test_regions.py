"""The split of a model into regions, their task files, signatures and the stitched model (in process,
kernels under the Triton interpreter)."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from kernelwright.tasks.region_stitch import stitched_source
from kernelwright.tasks.regions import split_model
from tests.kernels.tiny_model_src import TINY_MODEL, copy_kernel


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels run in this process under the Triton interpreter, for these tests only: set when the module
    is imported, the variable would reach every test that pytest-xdist's worker runs after collecting it."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _module(source: str, name: str = "m") -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod


@pytest.fixture
def tiny() -> types.ModuleType:
    return _module(TINY_MODEL, "tiny")


def test_split_cuts_library_ops_with_epilogues_and_dedupes_blocks(tiny: types.ModuleType) -> None:
    torch.manual_seed(0)
    model = tiny.Model(*tiny.get_init_inputs())
    split = split_model(model, tiny.get_inputs())
    ops = [r.ops for r in split.regions]
    assert ops[0] == ["Conv2d", "BatchNorm2d", "relu"]
    assert ops[1] == ops[2] == ["Conv2d", "BatchNorm2d", "add", "relu"]
    assert split.regions[1].signature == split.regions[2].signature
    assert len(split.unique()) == len(split.regions) - 1
    assert split.regions[0].signature != split.regions[1].signature
    # every region is a task file that runs alone and matches the model's value at that point
    for region in split.regions:
        task = _module(region.source, f"region{region.index}")
        m = task.Model(*task.get_init_inputs())
        out = m(*task.get_inputs())
        assert list(out.shape) == list(split.values[region.outputs[0]].shape)


def test_running_state_is_untouched_by_the_split(tiny: types.ModuleType) -> None:
    model = tiny.Model(*tiny.get_init_inputs())
    before = model.bn.running_mean.clone()
    split_model(model, tiny.get_inputs())
    assert torch.equal(model.bn.running_mean, before)


def test_signature_changes_with_shapes_and_attributes(tiny: types.ModuleType) -> None:
    model = tiny.Model(*tiny.get_init_inputs())
    a = split_model(model, [torch.randn(2, 3, 7, 9)])
    b = split_model(model, [torch.randn(2, 3, 5, 9)])
    assert a.regions[1].signature != b.regions[1].signature
    wider = tiny.Model(8, 5)
    c = split_model(wider, [torch.randn(2, 3, 7, 9)])
    assert c.regions[0].signature != a.regions[0].signature


def _stitch(tiny: types.ModuleType, kernel_regions: set[int]) -> tuple[types.ModuleType, nn.Module]:
    torch.manual_seed(0)
    model = tiny.Model(*tiny.get_init_inputs())
    split = split_model(model, tiny.get_inputs())
    kernels = {
        r.index: (r.signature, copy_kernel(r.source)) for r in split.regions if r.index in kernel_regions
    }
    source = stitched_source(TINY_MODEL, split.leaves, [r.plan() for r in split.regions], kernels)
    stitched = _module(source, "stitched")
    return stitched, model


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_stitched_model_equals_the_original(tiny: types.ModuleType, mode: str) -> None:
    stitched, model = _stitch(tiny, {0, 1, 2, 4})
    new = stitched.ModelNew(*tiny.get_init_inputs())
    assert set(new.state_dict()) == set(model.state_dict())  # what the judge loads into it
    with torch.no_grad():
        for p in model.parameters():  # weights the defaults would not catch
            p.add_(torch.randn_like(p) * 0.1)
    new.load_state_dict(model.state_dict())
    getattr(model, mode)()
    getattr(new, mode)()
    x = torch.randn(3, 3, 5, 6)
    calls = sum(v for k, v in vars(stitched).items() if k.endswith("CALLS") for v in v)
    for _ in range(2):
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
    after = sum(v for k, v in vars(stitched).items() if k.endswith("CALLS") for v in v)
    assert after - calls == 2 * 4  # four regions ran their kernels on each call
    # batch norm's running statistics moved the same way (train) or not at all (eval)
    torch.testing.assert_close(new.bn.running_mean, model.bn.running_mean)
    torch.testing.assert_close(new.blocks[1].bn.running_var, model.blocks[1].bn.running_var)


def test_shared_signature_shares_one_copy_of_the_kernel(tiny: types.ModuleType) -> None:
    stitched, _ = _stitch(tiny, {1, 2})
    assert len([k for k in vars(stitched) if k.endswith("CALLS")]) == 1


def test_a_region_that_cannot_be_written_is_kept_in_torch() -> None:
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.lin(x)
            return y + torch.special.erfcx(y)  # no torch./F./operator name for it

    split = split_model(Odd(), [torch.randn(3, 4)])
    assert [r.ops for r in split.regions] == [["Linear"], ["special_erfcx"], ["add"]]
    assert split.regions[0].source and split.regions[2].source  # its neighbours are still tasks
    assert split.regions[1].why_not and not split.regions[1].source


def test_a_region_tasks_module_sizes_come_through_get_init_inputs_so_a_judge_can_change_them(
    tiny: types.ModuleType,
) -> None:
    """A region's modules take their sizes from `get_init_inputs()` (module constants, equal sizes one name,
    an input's dimension of that size the same name), so the CPU judge shrinks every size, not only the batch
    (level3/1_MLP's Linear regions ran at 128 x 16384 under the interpreter: 84-199 s an evaluation); kernel
    sizes and strides stay literals. The stitched model builds each kernel with those sizes."""
    from kernelwright.tasks import exec_task_module
    from kernelwright.tasks.resize import shrink

    model = tiny.Model(*tiny.get_init_inputs())
    split = split_model(model, tiny.get_inputs())
    conv = next(r for r in split.regions if r.ops[0] == "Conv2d" and r.source)
    task = exec_task_module(conv.source, "region")
    assert task.get_init_inputs() == conv.init_args and conv.init_args
    assert "def __init__(self, size_" in conv.source and "kernel_size=(3, 3)" in conv.source
    built = task.Model(*task.get_init_inputs())
    assert {k: v.shape for k, v in built.state_dict().items()} == {
        k: model.get_submodule(path.rpartition(".")[0]).state_dict()[path.rpartition(".")[2]].shape
        for k, path in conv.bindings.items() if "." in k
    }  # fmt: skip
    small = shrink(conv.source, "region_small", 256)
    assert small is not None
    small_task = exec_task_module(small.source, "region_small")
    assert small_task.get_init_inputs() != conv.init_args  # the channels changed, not only the batch
    x = small_task.get_inputs()[0]
    assert small_task.Model(*small_task.get_init_inputs())(x).shape[1] == small_task.get_init_inputs()[-1]
    kernels = {r.index: (r.signature, copy_kernel(r.source)) for r in split.regions if r.source}
    stitched = _module(stitched_source(TINY_MODEL, split.leaves, [r.plan() for r in split.regions], kernels,
                                       spec=split.spec))  # fmt: skip
    assert stitched._REGIONS[conv.index]["init"] == conv.init_args
    new = stitched.ModelNew(*tiny.get_init_inputs())
    new.load_state_dict(model.state_dict())
    x = tiny.get_inputs()[0]
    with torch.no_grad():
        torch.testing.assert_close(new.eval()(x), model.eval()(x), rtol=1e-5, atol=1e-5)
