"""Reading a convolution's spec (sizes, stride, padding, groups, dtype) from an nn module or an F.conv*
call in the traced graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx as fx
import torch.nn as nn

from kernelwright.providers.offline.families.conv.conv_ir import ConvSpec
from kernelwright.providers.offline.families.conv.conv_values import (
    ConvUnsupported,
    call_arg,
    expr_of,
    int_tuple,
)

CONV_MODULES: dict[type, tuple[int, bool]] = {
    nn.Conv1d: (1, False), nn.Conv2d: (2, False), nn.Conv3d: (3, False),
    nn.ConvTranspose1d: (1, True), nn.ConvTranspose2d: (2, True), nn.ConvTranspose3d: (3, True),
}  # fmt: skip

CONV_FUNCTIONS = {
    "conv1d": (1, False), "conv2d": (2, False), "conv3d": (3, False),
    "conv_transpose1d": (1, True), "conv_transpose2d": (2, True), "conv_transpose3d": (3, True),
}  # fmt: skip


def spec_from_module(node: fx.Node, mod: nn.Module, t: str) -> ConvSpec:
    """The spec of a convolution module called as `self.<t>(x)`."""
    ndim, transposed = CONV_MODULES[type(mod)]
    if mod.padding_mode != "zeros":  # type: ignore[comparison-overlap]
        raise ConvUnsupported(f"padding_mode={mod.padding_mode}")
    if len(node.args) != 1 or node.kwargs:
        raise ConvUnsupported("a transposed convolution called with output_size")
    same = isinstance(mod.padding, str)
    if same and mod.padding == "same":  # type: ignore[comparison-overlap]
        padding = [d * (k - 1) // 2 for d, k in zip(mod.dilation, mod.kernel_size, strict=True)]  # type: ignore[arg-type]
    elif same:
        padding, same = [0] * ndim, False
    else:
        padding = list(mod.padding)  # type: ignore[arg-type]
    weight = mod.weight  # type: ignore[union-attr]
    spec = ConvSpec(
        ndim=ndim,  # type: ignore[arg-type]
        transposed=transposed,
        in_channels=int(mod.in_channels),  # type: ignore[arg-type]
        out_channels=int(mod.out_channels),  # type: ignore[arg-type]
        kernel_size=list(mod.kernel_size),  # type: ignore[arg-type]
        stride=list(mod.stride),  # type: ignore[arg-type]
        padding=padding,
        dilation=list(mod.dilation),  # type: ignore[arg-type]
        output_padding=list(getattr(mod, "output_padding", (0,) * ndim)),
        groups=int(mod.groups),  # type: ignore[arg-type]
        bias=mod.bias is not None,
        dtype=str(weight.dtype).removeprefix("torch."),  # type: ignore[union-attr]
        same_padding=same,
        module=t,
        weight=f"self.{t}.weight",
        bias_expr=f"self.{t}.bias" if mod.bias is not None else None,
    )
    return spec


def spec_from_function(node: fx.Node, name: str, attr: Callable[[str], Any]) -> ConvSpec:
    """The spec of F.conv*(x, self.weight, ...): the weight and bias must be parameters of the model
    (`attr` reads them by dotted name); the hyper-parameters stay expressions (named scalars)."""
    ndim, transposed = CONV_FUNCTIONS[name]
    w_node = call_arg(node, 1, "weight")
    b_node = call_arg(node, 2, "bias")
    if not isinstance(w_node, fx.Node) or w_node.op != "get_attr":
        raise ConvUnsupported("a functional convolution whose weight is not a parameter")
    if b_node is not None and (not isinstance(b_node, fx.Node) or b_node.op != "get_attr"):
        raise ConvUnsupported("a functional convolution whose bias is not a parameter")
    weight = attr(str(w_node.target))
    if transposed:
        stride = call_arg(node, 3, "stride", 1)
        padding = call_arg(node, 4, "padding", 0)
        out_pad = call_arg(node, 5, "output_padding", 0)
        groups = call_arg(node, 6, "groups", 1)
        dilation = call_arg(node, 7, "dilation", 1)
    else:
        stride = call_arg(node, 3, "stride", 1)
        padding = call_arg(node, 4, "padding", 0)
        dilation = call_arg(node, 5, "dilation", 1)
        groups = call_arg(node, 6, "groups", 1)
        out_pad = 0
    if isinstance(padding, str):
        raise ConvUnsupported("string padding in a functional convolution")
    for v in (stride, padding, dilation, groups, out_pad):
        if isinstance(v, fx.Node):
            raise ConvUnsupported("convolution hyper-parameters computed in the forward")
    g = int(groups)
    spec = ConvSpec(
        ndim=ndim,  # type: ignore[arg-type]
        transposed=transposed,
        in_channels=int(weight.shape[0] if transposed else weight.shape[1] * g),
        out_channels=int(weight.shape[1] * g if transposed else weight.shape[0]),
        kernel_size=[int(k) for k in weight.shape[2:]],
        stride=int_tuple(stride, ndim),
        padding=int_tuple(padding, ndim),
        dilation=int_tuple(dilation, ndim),
        output_padding=int_tuple(out_pad, ndim),
        groups=g,
        bias=b_node is not None,
        dtype=str(weight.dtype).removeprefix("torch."),
        weight=f"self.{w_node.target}",
        bias_expr=f"self.{b_node.target}" if b_node is not None else None,
        hyper={
            "stride": expr_of(stride),
            "padding": expr_of(padding),
            "dilation": expr_of(dilation),
            "groups": expr_of(groups),
            "output_padding": expr_of(out_pad),
        },
    )
    return spec
