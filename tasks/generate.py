"""Tasks no one wrote by hand: seeded, random but valid chains of the operators kernelwright supports.

`generate_tasks(count, seed)` returns `GeneratedTask`s, each a KernelBench-format source (Model,
get_inputs, get_init_inputs) with `get_small_inputs` / `get_small_init_inputs` for the CPU interpreter.
A chain is one head (a Linear layer, a matmul or batched matmul of two inputs, or a same-padded Conv2d),
one to three pointwise ops, and an optional tail (a reduction, softmax, log-softmax, logsumexp or layer
norm over the last dim; over channels after a convolution). Sizes are drawn per task from GPU-sized
menus and small CPU ones; matmul heads are fp16 about a third of the time, everything else fp32.

Two more convolution heads are drawn only when asked for (`heads=`, `--heads`), so that the default sets
stay what they were: `conv2d_depthwise` (groups = channels, 3/5/7 taps, stride 1 or 2) and
`conv2d_few_channels` (1-4 input channels into 16-64, as an image model's first layer).

The same (count, seed) gives the same files byte for byte, and task i does not depend on `count`: these
are the unseen tasks the learning measurements use (`kernelwright tasks generate`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

HEADS = ("linear", "matmul", "bmm", "conv2d")
"""The heads a set is drawn from by default."""
EXTRA_HEADS = ("conv2d_depthwise", "conv2d_few_channels")
"""Heads drawn only when named (`generate_tasks(..., heads=...)`)."""
CONV_HEADS = ("conv2d", *EXTRA_HEADS)

POINTWISE: dict[str, str] = {
    "relu": "torch.relu(x)",
    "gelu": "F.gelu(x)",
    "silu": "F.silu(x)",
    "sigmoid": "torch.sigmoid(x)",
    "tanh": "torch.tanh(x)",
    "leaky_relu": "F.leaky_relu(x, negative_slope={slope})",
    "hardswish": "F.hardswish(x)",
    "scale": "x * {scale}",
    "shift": "x + {shift}",
    "clamp": "torch.clamp(x, min=-{bound}, max={bound})",
}

TAILS: dict[str, str] = {
    "none": "",
    "sum": "torch.sum(x, dim={dim}, keepdim=True)",
    "mean": "torch.mean(x, dim={dim}, keepdim=True)",
    "amax": "torch.amax(x, dim={dim}, keepdim=True)",
    "softmax": "torch.softmax(x, dim={dim})",
    "log_softmax": "torch.log_softmax(x, dim={dim})",
    "logsumexp": "torch.logsumexp(x, dim={dim}, keepdim=True)",
    "layer_norm": "F.layer_norm(x, (x.shape[-1],))",
}

_ROWS = (1024, 2048, 4096, 8192)
_FEATURES = (512, 768, 1024, 2048, 4096)
_SMALL_ROWS = (5, 7, 9)
_SMALL_FEATURES = (37, 64, 96, 129)


@dataclass(frozen=True)
class GeneratedTask:
    name: str
    """File stem: <index>_<head>_<ops>_<tail>."""
    source: str
    chain: tuple[str, ...]
    """head, pointwise ops, tail, in order."""


def _rng(seed: int, index: int) -> random.Random:
    return random.Random(f"kernelwright-tasks:{seed}:{index}")


def _op(rng: random.Random, name: str) -> str:
    return POINTWISE[name].format(
        slope=rng.choice((0.01, 0.1, 0.2)),
        scale=rng.choice((0.5, 1.5, 2.0, -0.75)),
        shift=rng.choice((0.25, -0.5, 1.0)),
        bound=rng.choice((0.5, 1.0, 3.0)),
    )


def check_heads(heads: tuple[str, ...]) -> tuple[str, ...]:
    """`heads` when each is known and there is at least one (ValueError naming the known ones otherwise)."""
    unknown = [h for h in heads if h not in HEADS + EXTRA_HEADS]
    if unknown or not heads:
        raise ValueError(
            f"unknown head {', '.join(unknown) or '(none given)'}; known: {', '.join(HEADS + EXTRA_HEADS)}"
        )
    return heads


def generate_task(seed: int, index: int, heads: tuple[str, ...] = HEADS) -> GeneratedTask:
    """Task `index` of the set drawn with `seed` from `heads`."""
    rng = _rng(seed, index)
    head = rng.choice(check_heads(heads))
    ops = rng.sample(sorted(POINTWISE), rng.randint(1, 3))
    tail = rng.choice(sorted(TAILS))
    conv = head in CONV_HEADS
    if conv and tail == "layer_norm":
        tail = "softmax"  # a layer norm over the image width only: not a chain anyone writes
    dtype = "float16" if head in ("matmul", "bmm") and rng.random() < 1 / 3 else "float32"
    dim = 1 if conv else -1
    body = [f"        x = {_op(rng, op)}" for op in ops]
    if TAILS[tail]:
        body.append(f"        x = {TAILS[tail].format(dim=dim)}")
    chain = (head, *ops, tail)
    name = f"{index:02d}_{'_'.join(c for c in chain if c != 'none')}"
    describe = " -> ".join(c for c in chain if c != "none")
    h = _head(rng, head, dtype)
    source = f'''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Generated task (seed {seed}, #{index}): {describe}, {dtype}."""

    def __init__(self{h.init_params}):
        super().__init__()
{h.init_body}
    def forward(self, {h.forward_head}
{chr(10).join(body)}
        return x


{h.constants}


def get_inputs():
    return [{h.inputs}]


def get_init_inputs():
    return [{h.init_inputs}]


def get_small_inputs():
    return [{h.small_inputs}]


def get_small_init_inputs():
    return [{h.small_init_inputs}]
'''
    return GeneratedTask(name=name, source=source, chain=chain)


class _Head(NamedTuple):
    """The source pieces of one head, in the order the task file uses them."""

    init_params: str
    """`__init__`'s parameters after self (with a leading comma), or empty."""
    init_body: str
    forward_head: str
    """forward's parameters, the rest of its signature line and the head's own line."""
    constants: str
    """The module-level size constants, full and small."""
    inputs: str
    small_inputs: str
    init_inputs: str
    small_init_inputs: str


def _head(rng: random.Random, head: str, dtype: str) -> _Head:
    """The source pieces of one head, its sizes drawn from `rng`."""
    rows, feats = rng.choice(_ROWS), rng.choice(_FEATURES)
    out = rng.choice(_FEATURES)
    srows, sfeats, sout = rng.choice(_SMALL_ROWS), rng.choice(_SMALL_FEATURES), rng.choice(_SMALL_FEATURES)
    dt = f", dtype=torch.{dtype}"
    if head == "linear":
        bias = rng.random() < 0.7
        return _Head(
            ", in_features: int, out_features: int",
            f"        self.linear = nn.Linear(in_features, out_features, bias={bias})\n",
            "x: torch.Tensor) -> torch.Tensor:\n        x = self.linear(x)",
            f"batch_size = {rows}\nin_features = {feats}\nout_features = {out}\n\n"
            f"small_batch_size = {srows}\nsmall_in_features = {sfeats}\nsmall_out_features = {sout}",
            "torch.randn(batch_size, in_features)",
            "torch.randn(small_batch_size, small_in_features)",
            "in_features, out_features",
            "small_in_features, small_out_features",
        )
    if head == "matmul":
        return _Head(
            "",
            "        pass\n",
            "a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n        x = a @ b",
            f"M = {rows}\nK = {feats}\nN = {out}\n\nsmall_M = {srows}\nsmall_K = {sfeats}\nsmall_N = {sout}",
            f"torch.randn(M, K{dt}), torch.randn(K, N{dt})",
            f"torch.randn(small_M, small_K{dt}), torch.randn(small_K, small_N{dt})",
            "",
            "",
        )
    if head == "bmm":
        batch, sbatch = rng.choice((4, 8, 16)), rng.choice((2, 3))
        return _Head(
            "",
            "        pass\n",
            "a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n        x = torch.bmm(a, b)",
            f"batch = {batch}\nM = {rows // 4}\nK = {feats // 2}\nN = {out // 2}\n\n"
            f"small_batch = {sbatch}\nsmall_M = {srows}\nsmall_K = {sfeats}\nsmall_N = {sout}",
            f"torch.randn(batch, M, K{dt}), torch.randn(batch, K, N{dt})",
            f"torch.randn(small_batch, small_M, small_K{dt}), torch.randn(small_batch, small_K, small_N{dt})",
            "",
            "",
        )
    if head == "conv2d_depthwise":
        return _depthwise_head(rng)
    if head == "conv2d_few_channels":
        return _few_channels_head(rng)
    # conv2d: same padding, odd kernel
    k = rng.choice((1, 3, 5))
    cin, cout = rng.choice((16, 32, 64)), rng.choice((32, 64, 128))
    side, sside = rng.choice((32, 64, 128)), rng.choice((6, 9, 11))
    scin, scout = rng.choice((3, 4)), rng.choice((5, 8))
    bias = rng.random() < 0.7
    return _Head(
        ", in_channels: int, out_channels: int, kernel_size: int",
        "        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, "
        f"bias={bias})\n",
        "x: torch.Tensor) -> torch.Tensor:\n        x = self.conv(x)",
        f"batch_size = {rng.choice((8, 16, 32))}\nin_channels = {cin}\nout_channels = {cout}\nkernel_size = {k}\n"
        f"height = width = {side}\n\nsmall_batch_size = 2\nsmall_in_channels = {scin}\n"
        f"small_out_channels = {scout}\nsmall_height = small_width = {sside}",
        "torch.randn(batch_size, in_channels, height, width)",
        "torch.randn(small_batch_size, small_in_channels, small_height, small_width)",
        "in_channels, out_channels, kernel_size",
        "small_in_channels, small_out_channels, kernel_size",
    )


def _depthwise_head(rng: random.Random) -> _Head:
    """A depthwise Conv2d (groups = channels), odd kernel, padding k // 2, stride 1 or 2."""
    c, k, stride = rng.choice((32, 64, 128)), rng.choice((3, 5, 7)), rng.choice((1, 1, 2))
    side, sside, sc = rng.choice((56, 112, 128)), rng.choice((7, 9, 11)), rng.choice((3, 4, 6))
    bias = rng.random() < 0.5
    return _Head(
        ", channels: int, kernel_size: int, stride: int",
        "        self.conv = nn.Conv2d(channels, channels, kernel_size, stride=stride, padding=kernel_size // 2, "
        f"groups=channels, bias={bias})\n",
        "x: torch.Tensor) -> torch.Tensor:\n        x = self.conv(x)",
        f"batch_size = {rng.choice((8, 16, 32))}\nchannels = {c}\nkernel_size = {k}\nstride = {stride}\n"
        f"height = width = {side}\n\nsmall_batch_size = 2\nsmall_channels = {sc}\n"
        f"small_height = small_width = {sside}",
        "torch.randn(batch_size, channels, height, width)",
        "torch.randn(small_batch_size, small_channels, small_height, small_width)",
        "channels, kernel_size, stride",
        "small_channels, kernel_size, stride",
    )


def _few_channels_head(rng: random.Random) -> _Head:
    """A same-padded Conv2d from 1-4 input channels (an image model's first layer): a short reduction."""
    cin, cout, k = rng.choice((1, 3, 4)), rng.choice((16, 32, 64)), rng.choice((3, 5))
    side, sside, scout = rng.choice((64, 128, 256)), rng.choice((6, 9, 11)), rng.choice((5, 8))
    bias = rng.random() < 0.7
    return _Head(
        ", in_channels: int, out_channels: int, kernel_size: int",
        "        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, "
        f"bias={bias})\n",
        "x: torch.Tensor) -> torch.Tensor:\n        x = self.conv(x)",
        f"batch_size = {rng.choice((8, 16, 32))}\nin_channels = {cin}\nout_channels = {cout}\n"
        f"kernel_size = {k}\nheight = width = {side}\n\nsmall_batch_size = 2\nsmall_out_channels = {scout}\n"
        f"small_height = small_width = {sside}",
        "torch.randn(batch_size, in_channels, height, width)",
        "torch.randn(small_batch_size, in_channels, small_height, small_width)",
        "in_channels, out_channels, kernel_size",
        "in_channels, small_out_channels, kernel_size",
    )


def generate_tasks(count: int, seed: int = 0, heads: tuple[str, ...] = HEADS) -> list[GeneratedTask]:
    """`count` tasks drawn with `seed` from `heads` (task i is the same whatever `count` is)."""
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    return [generate_task(seed, i, heads) for i in range(1, count + 1)]
