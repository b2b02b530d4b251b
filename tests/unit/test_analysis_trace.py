"""The writer's trace settings (frontend/analysis.py `_trace`): fake tensors' dispatch cache off and
make_fx's tensor_meta without its memory-format search. They only save time: the graph, every node's
symbolic shape and the sizes the ShapeEnv proved equal are those of a trace without them; and neither
setting outlives the trace."""

from __future__ import annotations

import functools

import pytest
import torch
import torch._dynamo.config as dynamo_config
import torch.fx.experimental._config as fx_config
from torch.func import functional_call
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.proxy_tensor import make_fx

from kernelwright.providers.offline.frontend import analysis


class _Block(torch.nn.Module):
    """A DenseNet layer's shape work (a concatenation, a norm over its width) and Swin's views."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm2d(7)
        self.conv = torch.nn.Conv2d(7, 3, 3, padding=1, bias=False)

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        x = self.conv(torch.relu(self.norm(torch.cat([a, b, c], 1))))
        n, ch, h, w = x.shape
        return x.view(n, ch, h * w).transpose(1, 2).reshape(n, -1).softmax(-1)


def _inputs() -> list[torch.Tensor]:
    with torch.device("meta"):
        return [torch.randn(2, 3, 5, 6), torch.randn(2, 1, 5, 6), torch.randn(2, 3, 5, 6)]


def _plain_trace(model: torch.nn.Module, inputs: list[torch.Tensor]) -> torch.fx.GraphModule:
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    values = [p for _, p in model.named_parameters()] + [b for _, b in model.named_buffers()]

    def fwd(plist: list[torch.Tensor], *args: torch.Tensor) -> torch.Tensor:
        return functional_call(model, dict(zip(names, plist, strict=True)), args)

    with torch.no_grad(), torch.device("meta"), fx_config.patch(use_duck_shape=False):  # type: ignore[attr-defined]
        return make_fx(fwd, tracing_mode="symbolic", pre_dispatch=True)(values, *inputs)


def _shapes(gm: torch.fx.GraphModule) -> list[tuple[str, str, str]]:
    out = []
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        meta = node.meta.get("tensor_meta")
        shape = str(tuple(val.shape)) if isinstance(val, torch.Tensor) else str(val)
        out.append((node.name, shape, str(tuple(meta.shape)) if meta is not None else ""))
    return out


def test_the_trace_is_the_one_without_the_settings() -> None:
    with torch.device("meta"):
        model = _Block().to("meta")
    inputs = _inputs()
    fast, names = analysis._trace(model, inputs, "symbolic")
    plain = _plain_trace(model, inputs)
    assert names[:2] == ["norm.weight", "norm.bias"]
    assert str(fast.graph) == str(plain.graph)
    assert _shapes(fast) == _shapes(plain)
    # The concatenation made its inputs' batch and spatial sizes one symbol each, in both traces.
    placeholders = [n for n in fast.graph.nodes if n.op == "placeholder"][-3:]
    sizes = [tuple(str(d) for d in n.meta["val"].shape) for n in placeholders]
    assert {s[0] for s in sizes} == {sizes[0][0]} and {s[2:] for s in sizes} == {sizes[0][2:]}
    assert len({s[1] for s in sizes}) == 3  # the concatenated widths stay three sizes
    meta = next(n for n in fast.graph.nodes if n.name.startswith("cat")).meta["tensor_meta"]
    assert meta.dtype == torch.float32 and meta.memory_format is None


def test_the_settings_do_not_outlive_the_trace_even_when_it_fails() -> None:
    extract = proxy_tensor._extract_tensor_metadata
    cached = dynamo_config.fake_tensor_cache_enabled

    class Broken(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("the forward failed")

    with pytest.raises(RuntimeError, match="the forward failed"):
        analysis._trace(Broken(), _inputs()[:1], "symbolic")
    assert proxy_tensor._extract_tensor_metadata is extract
    assert not isinstance(proxy_tensor._extract_tensor_metadata, functools.partial)
    assert dynamo_config.fake_tensor_cache_enabled == cached
