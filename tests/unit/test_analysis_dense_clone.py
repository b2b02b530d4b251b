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


def _window_views(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # a Swin window partition's views of a contiguous tensor, one with an inferred -1, then a view of a
    # transposed (not contiguous) tensor, which must take torch's path
    b, c, h, ww = x.shape
    y = (x + 1).view(b, c, h, 1, ww).view(b * c, h, ww).view(-1, ww)
    t = x.transpose(2, 3).view(b, c, ww, h, 1)
    return y.sum() + t.sum()


def test_a_view_of_a_contiguous_tensor_has_torch_s_shape_and_strides(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._subclasses import fake_impls

    from kernelwright.providers.offline.frontend.dense_clone import contiguous_views

    view = torch.ops.aten.view.default
    calls = []
    original = fake_impls.op_implementations_dict[view]

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setitem(fake_impls.op_implementations_dict, view, counted)
    without = _trace(_window_views, shortcut=False)
    with contiguous_views():
        with_it = _trace(_window_views, shortcut=False)
    assert with_it == without
    # four views through torch's path without the shortcut; with it, only the transposed tensor's
    assert len(calls) == 4 + 1
    assert fake_impls.op_implementations_dict[view] is counted  # the shortcut is gone after the trace
