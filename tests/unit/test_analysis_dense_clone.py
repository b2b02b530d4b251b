"""A copy of a contiguous tensor traced without torch's layout search (frontend/dense_clone.py): the same
graph, shapes and strides as torch's path, which still copies anything not contiguous."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.fx.experimental._config as fx_config
from torch._decomp import decomposition_table
from torch.fx.experimental.proxy_tensor import make_fx

from kernelwright.providers.offline.frontend.dense_clone import contiguous_clones

_CLONE = torch.ops.aten.clone.default


def _conv_then_dropout(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.conv2d(x, w, padding=1)
    return torch.relu(torch.nn.functional.dropout(y, p=0.0, training=False))


def _transposed_copies(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    t = x.transpose(1, 3)
    return t.contiguous() + torch.nn.functional.dropout(t, p=0.0, training=False)


def _trace(fn: Callable, shortcut: bool) -> list[tuple[str, str, str]]:
    with torch.device("meta"):
        inputs = (torch.randn(2, 3, 5, 7), torch.randn(4, 3, 3, 3))
    with torch.no_grad(), fx_config.patch(use_duck_shape=False):  # type: ignore[attr-defined]
        if shortcut:
            with contiguous_clones():
                gm = make_fx(fn, tracing_mode="symbolic", pre_dispatch=True)(*inputs)
        else:
            gm = make_fx(fn, tracing_mode="symbolic", pre_dispatch=True)(*inputs)
    out = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            sizes = tuple(str(d.node.expr) if isinstance(d, torch.SymInt) else str(d) for d in val.shape)
            strides = tuple(str(d.node.expr) if isinstance(d, torch.SymInt) else str(d) for d in val.stride())
            out.append((f"{node.name}:{node.target}", str(sizes), str(strides)))
    return out


@pytest.mark.parametrize(("fn", "torch_copies"), [(_conv_then_dropout, 0), (_transposed_copies, 2)])
def test_same_graph_shapes_and_strides(
    fn: Callable, torch_copies: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    original = decomposition_table[_CLONE]

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)

    without = _trace(fn, shortcut=False)
    monkeypatch.setitem(decomposition_table, _CLONE, counted)
    with_it = _trace(fn, shortcut=True)
    assert with_it == without
    # The contiguous conv output is copied directly; a transposed input still goes through torch's path.
    assert len(calls) == torch_copies
    assert decomposition_table[_CLONE] is counted  # the shortcut is gone after the trace
