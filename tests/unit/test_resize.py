"""tasks/resize.py: a task's size constants read and changed, a varied size for the writer's second trace,
and other sizes for judging a program where it was not traced."""

from __future__ import annotations

from kernelwright.tasks import exec_task_module
from kernelwright.tasks.resize import other_sizes, size_constants, vary, with_sizes, without_small_inputs

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return self.gn(x)


batch_size = 16
channels = 64
groups = 8
height, width = 30, 20


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, groups]


def get_small_inputs():
    return [torch.rand(2, 6, 3, 5)]


def get_small_init_inputs():
    return [6, 3]
"""


def _input_shape(source: str) -> list[int]:
    return list(exec_task_module(source, "t").get_inputs()[0].shape)


def test_a_tuple_assignment_is_one_constant_per_name() -> None:
    assert [(c.name, c.value) for c in size_constants(TASK)] == [
        ("batch_size", 16), ("channels", 64), ("groups", 8), ("height", 30), ("width", 20)
    ]  # fmt: skip
    changed = with_sizes(TASK, {"width": 7, "channels": 48})
    assert "height, width = 30, 7" in changed and "channels = 48" in changed
    assert _input_shape(changed) == [16, 48, 30, 7]


def test_without_small_inputs_drops_only_the_small_functions() -> None:
    stripped = without_small_inputs(TASK)
    module = exec_task_module(stripped, "t")
    assert not hasattr(module, "get_small_inputs") and not hasattr(module, "get_small_init_inputs")
    assert module.get_init_inputs() == [64, 8]


def test_vary_changes_every_constant_it_can_and_keeps_the_task_valid() -> None:
    varied = vary(TASK, "t")
    assert varied is not None
    # Every constant changes; the group count still divides the channels (checked on the meta device).
    assert set(varied.sizes) == {"batch_size", "channels", "groups", "height", "width"}
    assert varied.sizes["channels"] % varied.sizes["groups"] == 0
    assert varied.input_shapes == [_input_shape(varied.source)]


def test_other_sizes_are_new_shapes_without_small_inputs() -> None:
    sizes = other_sizes(TASK, "t")
    assert len(sizes) == 2
    shapes = [s.input_shapes for s in sizes]
    assert shapes[0] != shapes[1] and [[16, 64, 30, 20]] not in shapes and [[2, 6, 3, 5]] not in shapes
    for s in sizes:
        assert "get_small_inputs" not in s.source
        assert s.input_shapes == [_input_shape(s.source)]


MLP_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers, width = [], input_size
        for size in layer_sizes:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        self.net = nn.Sequential(*layers, nn.Linear(width, output_size))

    def forward(self, x):
        return self.net(x)


batch_size = 128
input_size = 16384
layer_sizes = [16384, 8192]
deep = [1024] * 3  # a depth of 3: the count is not a size
output_size = 8192


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes + deep, output_size]
"""


def test_the_sizes_in_a_list_are_constants_and_a_model_of_them_shrinks() -> None:
    """A whole model's widths in a list (KernelBench level3/1-3): each element is a size, so a judge on the
    CPU can verify the model at a size it can hold (at the published sizes its weights take 1.6 GB)."""
    from kernelwright.tasks.resize import shrink

    assert [(c.name, c.value) for c in size_constants(MLP_TASK)] == [
        ("batch_size", 128), ("input_size", 16384), ("layer_sizes[0]", 16384), ("layer_sizes[1]", 8192),
        ("deep[0]", 1024), ("output_size", 8192),
    ]  # fmt: skip
    changed = with_sizes(MLP_TASK, {"layer_sizes[1]": 96, "deep[0]": 48})
    assert "layer_sizes = [16384, 96]" in changed and "deep = [48] * 3  # a depth" in changed
    small = shrink(MLP_TASK, "mlp", 250_000)
    assert small is not None and small.input_shapes[0][1] < 16384
    module = exec_task_module(small.source, "mlp_small")
    model = module.Model(*module.get_init_inputs())
    assert sum(p.numel() for p in model.parameters()) <= 250_000
    assert len(model.net) == 2 * 5 + 1  # the depth kept
    assert model(*module.get_inputs()).shape == (small.input_shapes[0][0], module.output_size)


def test_the_literal_sizes_of_the_inputs_are_constants_too() -> None:
    """`torch.rand(batch_size, in_channels, 224, 224)` (KernelBench level3/8 and 21): the spatial sizes are
    literals in get_inputs, and a model that takes any size shrinks there; the input channels the model's
    first convolution fixes do not change."""
    from kernelwright.tasks.resize import shrink

    source = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(3, out_channels, 3, padding=1)

    def forward(self, x, mask):
        return self.conv(x) + mask.float().mean()


batch_size = 10
out_channels = 64


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224), torch.randint(0, 2, (4, 7))]


def get_init_inputs():
    return [out_channels]
"""
    literals = [(c.name, c.value) for c in size_constants(source) if c.name.startswith("get_inputs@")]
    assert [v for _, v in literals] == [3, 224, 4, 7]  # randint's bounds are values, not sizes
    (square,) = [c for c in size_constants(source) if c.value == 224]  # equal literals change together
    assert len(square.spans()) == 2
    small = shrink(source, "conv", 250_000)
    assert small is not None
    x, mask = small.input_shapes
    assert x[1] == 3 and x[2] == x[3] < 224 and len(mask) == 2
    assert list(exec_task_module(small.source, "conv_small").get_inputs()[0].shape) == x


def test_a_constant_the_model_reads_itself_stays() -> None:
    """level3/33 makes its hidden state from the module's `batch_size` in __init__: a candidate's file keeps
    its own copy of that constant, so a task with it changed would build the two models differently."""
    source = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.fc = nn.Linear(hidden_size, hidden_size)

    def forward(self, x):
        width = x.shape[1]
        return self.fc(x[:, :width] + self.hidden)


batch_size = 256
hidden_size = 2048


def get_inputs():
    return [torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [hidden_size]
"""
    assert [c.name for c in size_constants(source)] == ["hidden_size"]
    varied = vary(source, "t")
    assert varied is not None and set(varied.sizes) == {"hidden_size"}
