"""A copy of a contiguous tensor traced without torch's layout search (frontend/dense_clone.py): the same
graph, shapes and strides as torch's path, which still copies anything not contiguous."""

from __future__ import annotations

import contextlib
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


def _window_merge_residual(x0: torch.Tensor, x1: torch.Tensor) -> torch.Tensor:
    # SwinV2's window merge as its region reads it: windows back to a square image (one size for both sides, a
    # -1 for the channels), then viewed as the residual's shape
    b, nh, nw, wh, ww, c = x0.shape
    y = x0.permute(0, 1, 3, 2, 4, 5).contiguous().view(b, nw * wh, nw * wh, -1)
    return x1 + y.view(x1.shape[0], x1.shape[1], x1.shape[2])


@pytest.mark.parametrize("shortcut", [False, True])
def test_a_view_to_another_input_s_sizes_makes_them_the_same_sizes(shortcut: bool) -> None:
    """A view's sizes equal group by group (torch's walk records that), not only its element counts: the
    residual x1 and the viewed windows then have one shape, so a kernel reading both sees one (the element
    counts' equality alone was solved for x1's last size, a floor division of x0's: SwinV2's residual add no
    longer fused into its LayerNorm). The channels' -1 is the channel size, no division."""
    from kernelwright.providers.offline.frontend.dense_clone import contiguous_views

    with torch.device("meta"):
        inputs = (torch.randn(2, 2, 2, 3, 3, 5), torch.randn(2, 36, 5))
    with torch.no_grad(), fx_config.patch(use_duck_shape=False):  # type: ignore[attr-defined]
        with contiguous_views() if shortcut else contextlib.nullcontext():
            gm = make_fx(_window_merge_residual, tracing_mode="symbolic", pre_dispatch=True)(*inputs)
    x1 = next(n for n in gm.graph.nodes if n.op == "placeholder" and n.name.startswith("x1"))
    add = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.add.Tensor)
    merged = add.args[1].args[0]  # the first view, the windows merged
    env = add.meta["val"].shape[0].node.shape_env
    simplify = env.simplify
    assert [simplify(d.node.expr) for d in x1.meta["val"].shape] == [
        simplify(d.node.expr) for d in add.meta["val"].shape
    ]
    channels = merged.meta["val"].shape[-1]
    assert "//" not in str(channels) and "floor" not in str(simplify(channels.node.expr)).lower()
