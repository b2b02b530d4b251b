"""The stitched model's runtime (tasks/region_runtime.py): a plan's steps, made once into functions, run the
model as its own forward does, reading its modules, parameters and buffers as they are on each call."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from kernelwright.tasks import exec_task_module
from kernelwright.tasks.region_runtime import RegionPlan, trace
from kernelwright.tasks.regions import split_model

SOURCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.branch = nn.Conv2d(4, 4, 1)
        self.head = nn.Linear(8, 5)
        self.register_buffer("shift", torch.full((5,), 0.5))

    def forward(self, x, scale=2.0):
        a = self.stem(x)
        b = self.branch(a)
        c = torch.cat([a, b * scale], dim=1)[:, :, 1:, :]
        self.last = c.amax()
        pooled = torch.mean(c, dim=(2, 3), keepdim=False)
        return self.head(pooled) + self.shift, {"pooled": pooled, "sizes": [c.shape[0], 3]}


def get_inputs():
    return [torch.randn(2, 3, 5, 6)]


def get_init_inputs():
    return []
"""


def _task() -> types.ModuleType:
    return exec_task_module(SOURCE, "plan_task")


def _plan(model: nn.Module, inputs: list[torch.Tensor]) -> tuple[RegionPlan, list]:
    split = split_model(model, inputs)
    assert not split.specialized
    return RegionPlan(trace(model, set(split.leaves)), [r.plan() for r in split.regions]), split.regions


def _same(a: object, b: object) -> None:
    torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_the_plan_runs_the_model_as_its_forward_does(mode: str) -> None:
    task = _task()
    torch.manual_seed(0)
    model, twin = task.Model(), task.Model()
    twin.load_state_dict(model.state_dict())
    plan, _ = _plan(model, task.get_inputs())
    getattr(model, mode)()
    getattr(twin, mode)()
    x = torch.randn(3, 3, 4, 7)
    for _ in range(2):  # the second call runs the steps made on the first
        got, want = plan.run(model, (x,)), twin(x)
        _same(got, want)
        _same(model.last, twin.last)  # the attribute the forward assigns
    _same(model.stem[1].running_mean, twin.stem[1].running_mean)
    _same(plan.run(model, (x, 0.25)), twin(x, 0.25))  # a default given


def test_modules_and_buffers_are_read_on_every_call() -> None:
    task = _task()
    torch.manual_seed(0)
    model = task.Model().eval()
    plan, _ = _plan(model, task.get_inputs())
    x = torch.randn(2, 3, 5, 6)
    plan.run(model, (x,))
    model.branch = nn.Conv2d(4, 4, 1)  # a module replaced
    model.double()  # buffers replaced by new tensors
    twin = task.Model().double().eval()
    twin.load_state_dict(model.state_dict())
    _same(plan.run(model, (x.double(),)), twin(x.double()))


def test_a_region_with_a_kernel_binds_the_models_parameters_and_mode() -> None:
    """The region's kernel here is the region's own task module (torch): what matters is that the plan
    calls it with the model's parameters and buffers bound to it, in the model's mode."""
    task = _task()
    torch.manual_seed(0)
    model, twin = task.Model(), task.Model()
    twin.load_state_dict(model.state_dict())
    plan, regions = _plan(model, task.get_inputs())
    first = regions[0]
    assert first.ops[:3] == ["Conv2d", "BatchNorm2d", "ReLU"], first.ops
    region = exec_task_module(first.source, "region")
    kernel = region.Model(*region.get_init_inputs())  # weights of its own, never used
    modes: list[bool] = []
    kernel.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    plan.attach(first.index, kernel)
    x = torch.randn(2, 3, 5, 6)
    with torch.no_grad():
        model.stem[0].weight.mul_(1.5)
        twin.stem[0].weight.mul_(1.5)
    _same(plan.run(model, (x,)), twin(x))
    _same(model.stem[1].running_var, twin.stem[1].running_var)  # the model's statistics moved
    model.eval()
    twin.eval()
    _same(plan.run(model, (x,)), twin(x))
    assert modes == [True, False]


def test_a_kernel_is_built_around_the_models_own_tensors() -> None:
    """The stitched model's kernels (tasks/region_runtime.py build_kernel) hold the model's parameters and
    buffers from the start: no weight is made twice (a whole model's worth at the size it was cut at)."""
    from kernelwright.tasks.region_runtime import build_kernel

    class Region(nn.Module):  # the region's module at the size it was cut at: 4 MB of weights if made
        def __init__(self) -> None:
            super().__init__()
            self.m0 = nn.Linear(1024, 1024)
            self.m1 = nn.BatchNorm1d(1024)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(1024, 1024)
            self.bn = nn.BatchNorm1d(1024)

    model = Model()
    bindings = {f"m0.{k}": f"fc.{k}" for k in ("weight", "bias")}
    bindings |= {f"m1.{k}": f"bn.{k}" for k in model.bn.state_dict()}
    kernel = build_kernel(Region, bindings, model)
    assert kernel.m0.weight is model.fc.weight and kernel.m1.running_var is model.bn.running_var
    assert not any(t.is_meta for t in [*kernel.parameters(), *kernel.buffers()])

    class Keeps(Region):  # a tensor of its own, made in its constructor: built as it is
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.arange(4.0))

    kept = build_kernel(Keeps, bindings, model)
    assert torch.equal(kept.table, torch.arange(4.0)) and kept.m0.weight is not model.fc.weight
    missing = build_kernel(
        Region, {**bindings, "m0.weight": "lifted_constant0"}, model
    )  # not on the model yet
    assert not missing.m0.weight.is_meta


def test_a_kernel_takes_its_region_tasks_sizes_and_one_written_before_them_still_builds() -> None:
    """A region task passes its modules' sizes through get_init_inputs; a kernel written for a task file that
    took none (memory may hold one) is built without them."""
    from kernelwright.tasks.region_runtime import build_kernel

    class Sized(nn.Module):
        def __init__(self, size_8: int, size_4: int) -> None:
            super().__init__()
            self.m0 = nn.Linear(size_8, size_4)

    class Before(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m0 = nn.Linear(8, 4)

    model = nn.Sequential(nn.Linear(8, 4))
    bindings = {"m0.weight": "0.weight", "m0.bias": "0.bias"}
    for kernel_class in (Sized, Before):
        kernel = build_kernel(kernel_class, bindings, model, [8, 4])
        assert kernel.m0.weight is model[0].weight
