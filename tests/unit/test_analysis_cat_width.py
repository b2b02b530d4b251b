"""A concatenation's width as one symbol while tracing (frontend/cat_width.py): it only saves time. A trace
with it has the graph, every node's symbolic shape and the values of a trace without it, the writer's
program is the same, and nothing of it outlives the trace."""

from __future__ import annotations

import functools

import pytest
import torch
from torch._decomp import decomposition_table

from kernelwright.providers.offline import write_program
from kernelwright.providers.offline.frontend import analysis
from kernelwright.providers.protocol import render_section

_SOURCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d({width})
        self.conv = nn.Conv2d({width}, 3, 3, padding=1, bias=False)

    def forward(self, {args}):
        x = torch.cat([{args}], 1)
        return self.conv(torch.relu(self.norm(x)))


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def _source(channels: list[int], height: int = 5) -> str:
    """A BatchNorm + convolution after concatenating inputs of `channels` channels (2 x c x height x 3 each)."""
    args = ", ".join(f"x{i}" for i in range(len(channels)))
    inputs = ", ".join(f"torch.randn(2, {c}, {height}, 3)" for c in channels)
    return _SOURCE.format(width=sum(channels), args=args, inputs=inputs)


def _traced(source: str, one_width: bool) -> torch.fx.GraphModule:
    from kernelwright.tasks import exec_task_module

    model, inputs = analysis._build(exec_task_module(source, "cat_width_case"))
    gm, _ = analysis._trace(model, inputs, "symbolic", one_width=one_width)
    return gm


def _shapes(gm: torch.fx.GraphModule) -> list[tuple[str, str, str]]:
    out = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        shape = str(tuple(d.node.expr if isinstance(d, torch.SymInt) else d for d in val.shape)) if isinstance(val, torch.Tensor) else ""  # fmt: skip
        out.append((node.name, str(node.target), shape))
    return out


@pytest.mark.parametrize("channels", [[3, 2, 4, 5, 2, 3, 6], [3, 2, 4]])
def test_shapes_and_values_equal_a_trace_without_it(channels: list[int]) -> None:
    source = _source(channels)
    with_it, without = _traced(source, True), _traced(source, False)
    # Only a width summing more than 5 symbols gets one (fewer are solved for by the ShapeEnv).
    assert len(with_it.meta["kw_width_symbols"]) == (1 if len(channels) > 5 else 0)
    assert _shapes(with_it) == _shapes(without)
    assert analysis._var_to_val(with_it) == analysis._var_to_val(without)
    cat = next(n for n in with_it.graph.nodes if n.target == torch.ops.aten.cat.default)
    assert str(cat.meta["val"].shape[1].node.expr).count("+") == len(channels) - 1


def test_nothing_outlives_the_trace_even_a_failing_one() -> None:
    cat = decomposition_table[torch.ops.aten.cat.default]
    gm = _traced(_source([2, 3, 2, 3, 2, 3]), True)
    env = next(iter(gm.graph.nodes)).meta["val"][0].fake_mode.shape_env
    assert decomposition_table[torch.ops.aten.cat.default] is cat
    assert "_maybe_guard_rel" not in vars(env)

    class Fails(torch.nn.Module):
        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            y = torch.cat(xs, 1)
            return y.view(-1, 7, 5)  # 2 * 15 * 5 * 3 elements: no such view

    with torch.device("meta"):
        inputs = [torch.randn(2, c, 5, 3) for c in (2, 3, 2, 3, 2, 3)]
    with pytest.raises(Exception):  # noqa: B017 (the trace's own error, whatever its type)
        analysis._trace(Fails(), inputs, "symbolic")
    assert decomposition_table[torch.ops.aten.cat.default] is cat


def test_the_program_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    prompt = "\n\n".join([
        render_section("request", "Write a faster kernel.", kind="large_step"),
        render_section("task", _source([3, 2, 4, 5, 2, 3, 6]), name="cat_width_program"),
    ])  # fmt: skip
    analysis._CACHE.clear()
    with_it = write_program(prompt).code
    analysis._CACHE.clear()
    monkeypatch.setattr(analysis, "_trace", functools.partial(analysis._trace, one_width=False))
    without = write_program(prompt).code
    analysis._CACHE.clear()
    assert with_it is not None and "kept as torch: cat" in with_it
    assert with_it == without
