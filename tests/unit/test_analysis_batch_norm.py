"""A training-mode BatchNorm's fake result made directly (frontend/batch_norm_stats.py): it only saves time.
A trace with it has the graph, every node's shape, strides and dtype, and a ShapeEnv (guards in order,
replacements, ranges, symbols, axioms) equal to torch's decomposition's; inputs it cannot vouch for go
through torch's path; the writer's program is the same; nothing of it outlives the trace."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch._decomp import decomposition_table

from kernelwright.providers.offline import write_program
from kernelwright.providers.offline.frontend import analysis, batch_norm_stats, cat_width
from kernelwright.providers.protocol import render_section
from kernelwright.tasks import exec_task_module

_BN = torch.ops.aten._native_batch_norm_legit.default

_HEADER = "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
_FOOTER = "\n\ndef get_init_inputs():\n    return []\n"

# A DenseNet layer: a concatenation (7 inputs: its width is one symbol while tracing), BatchNorm, ReLU, conv.
_WIDE = (
    _HEADER
    + """    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(25)
        self.conv = nn.Conv2d(25, 3, 3, padding=1, bias=False)

    def forward(self, x0, x1, x2, x3, x4, x5, x6):
        return self.conv(torch.relu(self.norm(torch.cat([x0, x1, x2, x3, x4, x5, x6], 1))))


def get_inputs():
    return [torch.randn(2, c, 5, 3) for c in (3, 2, 4, 5, 2, 3, 6)]
"""
    + _FOOTER
)

# Three inputs: the width is a sum of three symbols.
_NARROW = (
    _HEADER
    + """    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(9)

    def forward(self, x0, x1, x2):
        return torch.relu(self.norm(torch.cat([x0, x1, x2], 1)))


def get_inputs():
    return [torch.randn(3, c, 7, 5) for c in (3, 2, 4)]
"""
    + _FOOTER
)

# A strided convolution's output: sizes with floor divisions, strides with Max(1, ...): torch's path.
_AFTER_STRIDED_CONV = (
    _HEADER
    + """    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, stride=2, bias=False)
        self.norm = nn.BatchNorm2d(5)

    def forward(self, x):
        return self.norm(self.conv(x))


def get_inputs():
    return [torch.randn(2, 3, 11, 9)]
"""
    + _FOOTER
)

# BatchNorm1d after a Linear, and one without affine parameters.
_LINEAR_NO_AFFINE = (
    _HEADER
    + """    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(7, 6)
        self.norm = nn.BatchNorm1d(6)
        self.plain = nn.BatchNorm1d(6, affine=False)

    def forward(self, x):
        return self.plain(self.norm(self.fc(x)))


def get_inputs():
    return [torch.randn(5, 7)]
"""
    + _FOOTER
)

# Eval mode: the running statistics, another decomposition's path (not this one's).
_EVAL = (
    _HEADER
    + """    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(4)
        self.eval()

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(2, 4, 3, 5)]
"""
    + _FOOTER
)


def _state(gm: torch.fx.GraphModule) -> dict:
    env = gm.shape_env
    nodes = []
    for n in gm.graph.nodes:
        v = n.meta.get("val")
        if isinstance(v, torch.Tensor):
            nodes.append((n.name, str(tuple(v.shape)), str(v.stride()), str(v.dtype)))
    return {
        "code": gm.code,
        "nodes": nodes,
        "guards": [str(g.expr) for g in env.guards],
        "replacements": {str(k): str(env.replace(k)) for k in env.replacements},
        "ranges": {str(k): str(v) for k, v in env.var_to_range.items()},
        "values": {str(k): str(v) for k, v in env.backed_var_to_val.items()},
        "axioms": sorted(str(a) for a in env.axioms),
    }


def _traced(source: str, direct: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, int]:
    made = []
    plain = batch_norm_stats.plain_result

    def counting(*args: object) -> object:
        out = plain(*args)  # type: ignore[arg-type]
        made.append(out is not None)
        return out

    with monkeypatch.context() as m:
        m.setattr(batch_norm_stats, "plain_result", counting if direct else lambda *args: None)
        m.setattr(cat_width, "_counter", itertools.count())  # width symbols named alike in both traces
        model, inputs = analysis._build(exec_task_module(source, "batch_norm_case"))
        gm, _ = analysis._trace(model, inputs, "symbolic")
    return _state(gm), sum(made)


@pytest.mark.parametrize(
    ("source", "direct_results"),
    [(_WIDE, 1), (_NARROW, 1), (_AFTER_STRIDED_CONV, 0), (_LINEAR_NO_AFFINE, 2), (_EVAL, 0)],
    ids=["wide-cat", "narrow-cat", "after-strided-conv", "linear-no-affine", "eval"],
)
def test_trace_equals_torchs_decomposition(
    source: str, direct_results: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    without, none = _traced(source, False, monkeypatch)
    with_it, made = _traced(source, True, monkeypatch)
    assert none == 0
    assert made == direct_results
    for key in without:
        assert with_it[key] == without[key], key


def test_nothing_outlives_the_trace_even_a_failing_one() -> None:
    original = decomposition_table[_BN]

    class Fails(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm(x).view(-1, 7, 11)  # 2 * 4 * 3 * 5 elements: no such view

    with torch.device("meta"):
        model, x = Fails().to("meta"), torch.randn(2, 4, 3, 5)
    with pytest.raises(Exception):  # noqa: B017 (the trace's own error, whatever its type)
        analysis._trace(model, [x], "symbolic")
    assert decomposition_table[_BN] is original


def test_the_program_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    prompt = "\n\n".join([
        render_section("request", "Write a faster kernel.", kind="large_step"),
        render_section("task", _WIDE, name="batch_norm_program"),
    ])  # fmt: skip
    monkeypatch.setattr(cat_width, "_counter", itertools.count())
    analysis._CACHE.clear()
    with_it = write_program(prompt).code
    analysis._CACHE.clear()
    monkeypatch.setattr(cat_width, "_counter", itertools.count())
    monkeypatch.setattr(batch_norm_stats, "plain_result", lambda *args: None)
    without = write_program(prompt).code
    analysis._CACHE.clear()
    assert with_it is not None and "norm kernel" in with_it  # the BatchNorm is a kernel of the program
    assert with_it == without
