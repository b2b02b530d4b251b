"""Two size symbols proved equal, learned without solving (frontend/size_equalities.py): it only saves time.
The ShapeEnv (guards, replacements, ranges, axioms) and a region's trace equal torch's path; relations it
cannot vouch for go to torch's method; the class's method is torch's again afterwards."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch._dynamo.source import ConstantSource
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

from kernelwright.providers.offline.frontend import size_equalities
from kernelwright.providers.offline.frontend.size_equalities import plain_size_equalities


def _env_state(env: ShapeEnv) -> dict:
    return {
        "guards": [str(g.expr) for g in env.guards],
        "replacements": {str(k): str(env.replace(k)) for k in env.replacements},
        "ranges": {str(k): str(v) for k, v in env.var_to_range.items()},
        "axioms": sorted(str(a) for a in env.axioms),
    }


def _checks(env: ShapeEnv) -> None:
    """Equalities of sizes in the order a concatenation and a BatchNorm ask them, one with a narrowed range."""

    def size(name: str, hint: int) -> torch.SymInt:
        source = ConstantSource(name)
        sym = env.create_symbol(hint, source=source, dynamic_dim=DimDynamic.DYNAMIC)
        return env.create_symintnode(sym, hint=hint, source=source)

    batch = [size(f"x{i}.size(0)", 5) for i in range(4)]
    height = [size(f"x{i}.size(2)", 7) for i in range(4)]
    narrowed = size("y.size(0)", 7)
    env.constrain_symbol_range(narrowed.node.expr, 3, 10)
    for i in range(1, 4):
        torch._check(batch[i] == batch[0])
        torch._check(height[i] == height[0])
    torch._check(narrowed == height[2])  # unequal ranges: torch's own method narrows one
    torch._check(batch[3] + height[1] == 12)  # not two symbols: torch's own method


def _direct_pairs(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    pairs: list[object] = []
    plain: Callable = size_equalities._plain_pair

    def counting(env: object, expr: object) -> object:
        out = plain(env, expr)
        pairs.append(out)
        return out

    monkeypatch.setattr(size_equalities, "_plain_pair", counting)
    return pairs


def test_shape_env_equals_torchs_path(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ShapeEnv.__dict__["_maybe_guard_rel"]
    without = ShapeEnv()
    _checks(without)
    pairs = _direct_pairs(monkeypatch)
    with_it = ShapeEnv()
    with plain_size_equalities():
        _checks(with_it)
    assert _env_state(with_it) == _env_state(without)
    # Six equalities of two plain symbols made directly; the narrowed one and the sum went to torch.
    assert sum(p is not None for p in pairs) == 6
    assert sum(p is None for p in pairs) == 2
    assert "VR[3, 10]" in _env_state(with_it)["ranges"].values()  # the narrowed range, kept
    assert ShapeEnv.__dict__["_maybe_guard_rel"] is original


_DENSE_LAYER = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(9)
        self.conv = nn.Conv2d(9, 3, 3, padding=1, bias=False)

    def forward(self, x0, x1, x2):
        return self.conv(torch.relu(self.norm(torch.cat([x0, x1, x2], 1))))


def get_inputs():
    return [torch.randn(2, c, 5, 3) for c in (3, 2, 4)]


def get_init_inputs():
    return []
"""


def test_region_trace_equals_torchs_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.providers.offline.frontend import analysis
    from kernelwright.tasks import exec_task_module

    def traced() -> tuple[str, list[str], dict]:
        model, inputs = analysis._build(exec_task_module(_DENSE_LAYER, "size_equalities_case"))
        gm, _ = analysis._trace(model, inputs, "symbolic")
        shapes = [
            f"{n.name} {tuple(n.meta['val'].shape)} {n.meta['val'].stride()}"
            for n in gm.graph.nodes
            if isinstance(n.meta.get("val"), torch.Tensor)
        ]
        return gm.code, shapes, _env_state(gm.shape_env)

    with monkeypatch.context() as m:
        m.setattr(size_equalities, "_plain_pair", lambda env, expr: None)
        without = traced()
    pairs = _direct_pairs(monkeypatch)
    assert traced() == without
    assert sum(p is not None for p in pairs) >= 6  # the batch and spatial sizes of inputs 1 and 2
