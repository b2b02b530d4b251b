"""The split of a decoder-like model: a norm written by hand stays in one region, views and indexing
alone are never a task, rotary embedding lands with the attention it feeds, and the stitched model (each
region's kernel a Triton copy under the interpreter) equals the original."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from kernelwright.tasks import exec_task_module
from kernelwright.tasks.region_stitch import stitched_source
from kernelwright.tasks.regions import _LAYOUT, split_model
from tests.kernels.tiny_model_src import copy_kernel

DECODER = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).to(x.dtype) * self.weight


class LayerNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        var = centred.pow(2).mean(-1, keepdim=True)
        return centred / torch.sqrt(var + self.eps) * self.weight + self.bias


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Model(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.norm2 = LayerNorm(dim)
        self.head = nn.Linear(dim, 5)
        angles = torch.outer(torch.arange(16).float(), torch.linspace(0.1, 1.0, dim // heads // 2))
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        cos, sin = self.cos[:s], self.sin[:s]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(attn.transpose(1, 2).reshape(b, s, d))
        return self.head(self.norm2(x)).transpose(1, 2)


def get_inputs():
    return [torch.randn(2, 7, 12)]


def get_init_inputs():
    return [12, 2]
"""

RMS_NORM = ["float", "pow", "mean", "add", "rsqrt", "float", "mul", "to", "mul"]
LAYER_NORM = ["mean", "sub", "pow", "mean", "add", "sqrt", "truediv", "mul", "add"]


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _contains_run(ops: list[str], run: list[str]) -> bool:
    return any(ops[i : i + len(run)] == run for i in range(len(ops) - len(run) + 1))


def test_norms_whole_no_views_only_region_and_the_stitch_equals_the_model() -> None:
    task = exec_task_module(DECODER, "decoder")
    torch.manual_seed(0)
    model = task.Model(*task.get_init_inputs())
    split = split_model(model, task.get_inputs())
    ops = [r.ops for r in split.regions]
    # each norm's reduction and the scale that reads it are in one region (with the Linear it feeds)
    assert [o for o in ops if _contains_run(o, RMS_NORM)] == [RMS_NORM + ["Linear"]], ops
    assert [o for o in ops if _contains_run(o, LAYER_NORM)] == [LAYER_NORM + ["Linear", "transpose"]], ops
    assert sum(o.count("rsqrt") for o in ops) == 1 and sum(o.count("sqrt") for o in ops) == 1
    # nothing but views and indexing is never a region of its own: the head's transpose joined its Linear
    assert not [o for o in ops if set(o) <= _LAYOUT], ops
    # rotary embedding's pieces are with the attention they feed, in one region
    attention = [o for o in ops if "scaled_dot_product_attention" in o]
    assert len(attention) == 1 and attention[0].count("cat") == 2 and attention[0].count("neg") == 2
    assert all(r.source for r in split.regions), [r.why_not for r in split.regions]

    kernels = {r.index: (r.signature, copy_kernel(r.source)) for r in split.regions}
    plans = [r.plan() for r in split.regions]
    stitched = exec_task_module(stitched_source(DECODER, split.leaves, plans, kernels, spec=split.spec), "st")
    new = stitched.ModelNew(*task.get_init_inputs())
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    new.load_state_dict(model.state_dict())
    x = torch.randn(2, 7, 12)
    calls = sum(c for k, v in vars(stitched).items() if k.endswith("CALLS") for c in v)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x), rtol=1e-5, atol=1e-5)
    after = sum(c for k, v in vars(stitched).items() if k.endswith("CALLS") for c in v)
    assert after - calls == len(split.regions)  # every region ran its kernel


def test_a_views_only_region_with_nowhere_to_go_is_kept_in_torch_not_a_task() -> None:
    class AfterRecurrence(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(6, 5, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.rnn(x)
            return out.transpose(1, 2)

    model = AfterRecurrence()
    split = split_model(model, [torch.randn(2, 3, 6)])
    views = [r for r in split.regions if set(r.ops) <= _LAYOUT]
    assert views, [r.ops for r in split.regions]
    for region in views:
        assert not region.source
        assert "views, indexing and layout only" in region.why_not
