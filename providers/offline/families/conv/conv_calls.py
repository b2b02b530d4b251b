"""Reading the calls of a traced forward (nn modules, torch functions and tensor methods) into ops.

`CallReader` maps each call_module / call_function / call_method node to the OpBuilder's pointwise ops
or to RegionOps (reductions, pooling, normalisation, views), checking the arguments the generated
program cannot honour (dropout in training mode, ceil_mode, in-place ops whose input is read again).
It also keeps the value of every node read so far.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx as fx
import torch.nn as nn

from kernelwright.providers.offline.families.conv.conv_builder import OpBuilder
from kernelwright.providers.offline.families.conv.conv_ir import Const, PoolPart
from kernelwright.providers.offline.families.conv.conv_regions import RegionOps
from kernelwright.providers.offline.families.conv.conv_spec_reader import (
    CONV_FUNCTIONS,
    CONV_MODULES,
    spec_from_function,
    spec_from_module,
)
from kernelwright.providers.offline.families.conv.conv_values import (
    Chain,
    ConvUnsupported,
    Indep,
    ReductionTuple,
    SizeValue,
    call_arg,
    check_inplace,
    const_of,
    dims_arg,
    expr_of,
    node_shape,
)
from kernelwright.providers.offline.operators import (
    CALL_BINARY,
    CALL_IDENTITY,
    CALL_REDUCTIONS,
    CALL_UNARY,
    NN_ACTIVATIONS,
)

_ACT_MODULES: dict[type, str] = {getattr(nn, name): op for name, op in NN_ACTIVATIONS.items()}


class CallReader:
    """Reads call nodes into `b`'s plan; `vals` holds every node's value read so far."""

    def __init__(self, b: OpBuilder, r: RegionOps, attr: Callable[[str], Any]) -> None:
        self.b = b
        self.r = r
        self.attr = attr  # the traced module's attribute by dotted name
        self.vals: dict[fx.Node, Any] = {}

    def value(self, arg: Any) -> Any:
        if isinstance(arg, fx.Node):
            if arg not in self.vals:
                raise ConvUnsupported(f"unknown value {arg}")
            return self.vals[arg]
        if isinstance(arg, bool):
            raise ConvUnsupported("boolean argument")
        if isinstance(arg, int | float):
            return const_of(arg)
        raise ConvUnsupported(f"argument of type {type(arg).__name__}")

    def raw(self, arg: Any) -> Any:
        if isinstance(arg, fx.Node):
            return self.vals.get(arg)
        return arg

    def module(self, node: fx.Node, mod: nn.Module) -> Any:
        t = str(node.target)
        if type(mod) in CONV_MODULES:
            if self.b.spec is not None:
                raise ConvUnsupported("more than one convolution")
            return self.b.conv_value(node, spec_from_module(node, mod, t), node.args[0])
        x = self.value(node.args[0]) if node.args else None
        if isinstance(mod, nn.Identity):
            return x
        if type(mod) in _ACT_MODULES:
            check_inplace(node, bool(getattr(mod, "inplace", False)))
            return self.b.unary(node, _ACT_MODULES[type(mod)], x)
        if isinstance(mod, nn.GELU):
            return self.b.unary(node, "gelu_tanh" if mod.approximate == "tanh" else "gelu", x)
        if isinstance(mod, nn.LeakyReLU):
            check_inplace(node, mod.inplace)
            c = Const(value=float(mod.negative_slope), expr=f"self.{t}.negative_slope")
            return self.b.unary(node, "leaky_relu", x, [c])
        if isinstance(mod, nn.Hardtanh):  # ReLU6 is a Hardtanh too, but caught above
            lo = Const(value=float(mod.min_val), expr=f"self.{t}.min_val")
            hi = Const(value=float(mod.max_val), expr=f"self.{t}.max_val")
            return self.b.unary(node, "hardtanh", x, [lo, hi])
        if isinstance(mod, nn.ELU | nn.CELU):
            c = Const(value=float(mod.alpha), expr=f"self.{t}.alpha")
            return self.b.unary(node, "elu" if isinstance(mod, nn.ELU) else "celu", x, [c])
        if isinstance(mod, nn.Softplus):
            b = Const(value=float(mod.beta), expr=f"self.{t}.beta")
            th = Const(value=float(mod.threshold), expr=f"self.{t}.threshold")
            return self.b.unary(node, "softplus", x, [b, th])
        if isinstance(mod, nn.Dropout | nn.Dropout1d | nn.Dropout2d | nn.Dropout3d | nn.AlphaDropout):
            if mod.training and mod.p > 0:
                raise ConvUnsupported("dropout in training mode is random")
            return x
        if isinstance(mod, nn.Softmax | nn.LogSoftmax):
            return self.r.softmax(node, x, mod.dim, log=isinstance(mod, nn.LogSoftmax))
        if isinstance(mod, nn.MaxPool1d | nn.MaxPool2d | nn.MaxPool3d):
            if mod.ceil_mode or mod.return_indices:
                raise ConvUnsupported("max pooling with ceil_mode or indices")
            part = PoolPart(
                kernel=f"self.{t}.kernel_size",
                stride=f"self.{t}.stride",
                padding=f"self.{t}.padding",
                dilation=f"self.{t}.dilation",
            )
            nd = {nn.MaxPool1d: 1, nn.MaxPool2d: 2, nn.MaxPool3d: 3}[type(mod)]
            return self.r.pool(
                node, x, "max", part, nd, (mod.kernel_size, mod.stride, mod.padding, mod.dilation)
            )
        if isinstance(mod, nn.AvgPool1d | nn.AvgPool2d | nn.AvgPool3d):
            if mod.ceil_mode or getattr(mod, "divisor_override", None):
                raise ConvUnsupported("average pooling with ceil_mode or divisor_override")
            part = PoolPart(
                kernel=f"self.{t}.kernel_size",
                stride=f"self.{t}.stride",
                padding=f"self.{t}.padding",
                count_include_pad=bool(mod.count_include_pad),
            )
            nd = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}[type(mod)]
            return self.r.pool(node, x, "avg", part, nd, (mod.kernel_size, mod.stride, mod.padding, 1))
        if isinstance(mod, nn.AdaptiveAvgPool1d | nn.AdaptiveAvgPool2d | nn.AdaptiveAvgPool3d):
            return self.r.adaptive(node, x, "mean", mod.output_size)
        if isinstance(mod, nn.AdaptiveMaxPool1d | nn.AdaptiveMaxPool2d | nn.AdaptiveMaxPool3d):
            if mod.return_indices:
                raise ConvUnsupported("adaptive max pooling with indices")
            return self.r.adaptive(node, x, "max", mod.output_size)
        if isinstance(mod, nn.GroupNorm):
            w_expr = f"self.{t}.weight" if mod.affine else None
            b_expr = f"self.{t}.bias" if mod.affine else None
            return self.r.norm(node, x, "group", f"self.{t}.num_groups", f"self.{t}.eps", w_expr, b_expr)
        if isinstance(mod, nn.InstanceNorm1d | nn.InstanceNorm2d | nn.InstanceNorm3d):
            w_expr = f"self.{t}.weight" if mod.affine else None
            b_expr = f"self.{t}.bias" if mod.affine else None
            if mod.training or not mod.track_running_stats:
                return self.r.norm(node, x, "instance", "None", f"self.{t}.eps", w_expr, b_expr)
            return self.r.running_norm(node, x, t, mod.affine)
        if isinstance(mod, nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d):
            w_expr = f"self.{t}.weight" if mod.affine else None
            b_expr = f"self.{t}.bias" if mod.affine else None
            if mod.training or not mod.track_running_stats:
                # With running statistics, the program follows the module's mode: batch statistics and
                # their update in train mode, the running statistics in eval mode (conv_codegen).
                running = f"self.{t}" if mod.track_running_stats else None
                return self.r.norm(node, x, "batch", "None", f"self.{t}.eps", w_expr, b_expr, running=running)
            return self.r.running_norm(node, x, t, mod.affine)
        if isinstance(mod, nn.LayerNorm):
            w_expr = f"self.{t}.weight" if mod.elementwise_affine else None
            b_expr = f"self.{t}.bias" if (mod.elementwise_affine and mod.bias is not None) else None
            return self.r.layer_norm(node, x, len(mod.normalized_shape), f"self.{t}.eps", w_expr, b_expr)
        if isinstance(mod, nn.Flatten):
            return self.r.view(node, x)
        raise ConvUnsupported(f"module {type(mod).__name__}")

    def function(self, node: fx.Node, name: str) -> Any:
        if name in CONV_FUNCTIONS:
            if self.b.spec is not None:
                raise ConvUnsupported("more than one convolution")
            return self.b.conv_value(node, spec_from_function(node, name, self.attr), node.args[0])
        if name == "builtins.getattr":
            base = self.raw(node.args[0])
            if isinstance(base, ReductionTuple):
                if node.args[1] != "values":
                    raise ConvUnsupported("indices of a max/min reduction")
                return base.items[0]
            return SizeValue()
        if name in ("size", "dim", "numel"):
            return SizeValue()
        if name == "getitem":
            base = self.raw(node.args[0])
            if isinstance(base, ReductionTuple):
                idx = node.args[1]
                if idx != 0:
                    raise ConvUnsupported("indices of a max/min reduction")
                return base.items[0]
            if isinstance(base, SizeValue):
                return SizeValue()
            raise ConvUnsupported("indexing a tensor")
        args = node.args
        x = self.raw(args[0]) if args else None
        if isinstance(x, SizeValue):
            return SizeValue()
        inplace = name.endswith("_") or bool(node.kwargs.get("inplace", False))
        check_inplace(node, inplace)
        if name in CALL_IDENTITY:
            return self.value(args[0])
        if name in ("to", "type"):
            raise ConvUnsupported("dtype conversions")
        if name in CALL_UNARY:
            return self.b.unary(node, CALL_UNARY[name], self.value(args[0]))
        if name == "gelu":
            approx = call_arg(node, 1, "approximate", "none")
            return self.b.unary(node, "gelu_tanh" if approx == "tanh" else "gelu", self.value(args[0]))
        if name in ("leaky_relu", "leaky_relu_"):
            slope = call_arg(node, 1, "negative_slope", 0.01)
            return self.b.unary(node, "leaky_relu", self.value(args[0]), [const_of(slope)])
        if name in ("hardtanh", "hardtanh_"):
            lo, hi = call_arg(node, 1, "min_val", -1.0), call_arg(node, 2, "max_val", 1.0)
            return self.b.unary(node, "hardtanh", self.value(args[0]), [const_of(lo), const_of(hi)])
        if name in ("elu", "elu_", "celu", "celu_"):
            alpha = call_arg(node, 1, "alpha", 1.0)
            return self.b.unary(node, name.rstrip("_"), self.value(args[0]), [const_of(alpha)])
        if name == "softplus":
            beta, th = call_arg(node, 1, "beta", 1.0), call_arg(node, 2, "threshold", 20.0)
            return self.b.unary(node, "softplus", self.value(args[0]), [const_of(beta), const_of(th)])
        if name in (
            "dropout",
            "dropout1d",
            "dropout2d",
            "dropout3d",
            "alpha_dropout",
            "feature_alpha_dropout",
        ):
            p, training = call_arg(node, 1, "p", 0.5), call_arg(node, 2, "training", True)
            if training and p > 0:
                raise ConvUnsupported("dropout in training mode is random")
            return self.value(args[0])
        if name in ("clamp", "clip", "clamp_", "clip_", "clamp_min", "clamp_max", "clamp_min_", "clamp_max_"):
            return self._clamp(node, name.rstrip("_"))
        if name == "rsub":
            a, b = self.value(args[0]), self.value(args[1])
            return self.b.binary(node, "sub", b, a)
        if name in CALL_BINARY:
            return self._binary_call(node, CALL_BINARY[name])
        if name in ("max", "min") and len(args) >= 2 and isinstance(args[1], fx.Node):
            return self._binary_call(node, "maximum" if name == "max" else "minimum")
        if name == "where":
            return self._where(node)
        if name in CALL_REDUCTIONS:
            return self._reduce(node, name)
        if name == "logsumexp":
            return self.r.logsumexp(node, self.value(node.args[0]))
        if name in ("softmax", "log_softmax", "_softmax"):
            dim = call_arg(node, 1, "dim")
            return self.r.softmax(node, self.value(args[0]), dim, log=name == "log_softmax")
        if name in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
            return self._pool_function(node, name)
        if name.startswith("adaptive_avg_pool") or name.startswith("adaptive_max_pool"):
            out = call_arg(node, 1, "output_size")
            if name.startswith("adaptive_max_pool") and call_arg(node, 2, "return_indices", False):
                raise ConvUnsupported("adaptive max pooling with indices")
            return self.r.adaptive(node, self.value(args[0]), "mean" if "avg" in name else "max", out)
        if name == "group_norm":
            return self._group_norm_function(node)
        if name in ("batch_norm", "instance_norm", "layer_norm"):
            return self._norm_function(node, name)
        if name in ("view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as", "reshape_as"):
            return self.r.view(node, self.value(args[0]))
        raise ConvUnsupported(f"{node.op} {name}")

    def _binary_call(self, node: fx.Node, fn: str) -> Any:
        a = self.value(node.args[0])
        b = self.value(call_arg(node, 1, "other"))
        alpha = node.kwargs.get("alpha")
        if alpha is not None and fn in ("add", "sub"):
            scaled = self._binary_scalar_mul(b, const_of(alpha), node)
            return self.b.binary(node, fn, a, scaled)
        if fn == "div" and node.kwargs.get("rounding_mode") is not None:
            raise ConvUnsupported("division with a rounding mode")
        return self.b.binary(node, fn, a, b)

    def _binary_scalar_mul(self, b: Any, c: Const, node: fx.Node) -> Any:
        if isinstance(b, Chain):
            raise ConvUnsupported("add/sub with alpha on a convolution value")
        tb = b.tree if isinstance(b, Indep) else ("const", b)
        shape = b.shape if isinstance(b, Indep) else ()
        return Indep(("binary", "mul", (tb, ("const", c))), shape)

    def _clamp(self, node: fx.Node, name: str) -> Any:
        x = self.value(node.args[0])
        if name == "clamp_min":
            lo, hi = call_arg(node, 1, "min"), None
        elif name == "clamp_max":
            lo, hi = None, call_arg(node, 1, "max")
        else:
            lo, hi = call_arg(node, 1, "min"), call_arg(node, 2, "max")
        if isinstance(lo, fx.Node) or isinstance(hi, fx.Node):  # tensor bounds: max/min with tensors
            out = x
            if lo is not None:
                out = self.b.binary(node, "maximum", out, self.value(lo))
            if hi is not None:
                out = self.b.binary(node, "minimum", out, self.value(hi))
            return out
        if lo is not None and hi is not None:
            return self.b.unary(node, "clamp", x, [const_of(lo), const_of(hi)])
        if lo is not None:
            return self.b.unary(node, "clamp_min", x, [const_of(lo)])
        if hi is not None:
            return self.b.unary(node, "clamp_max", x, [const_of(hi)])
        raise ConvUnsupported("clamp without bounds")

    def _where(self, node: fx.Node) -> Any:
        c, a, b = (self.value(call_arg(node, i, n)) for i, n in enumerate(("condition", "input", "other")))
        chains = [v for v in (c, a, b) if isinstance(v, Chain)]
        if not chains:
            trees = tuple(v.tree if isinstance(v, Indep) else ("const", v) for v in (c, a, b))
            return Indep(("where", trees), node_shape(node))
        region = self.b.common_region(chains, "where()")
        ref = next(v for v in chains if v.region == region)
        out_shape = node_shape(node)
        ids = []
        for v in (c, a, b):
            if isinstance(v, Chain):
                self.b.check_plain(v, "where")
                ids.append(v.op)
            else:
                ids.append(self.b.materialize(v, ref))
        if any(self.b.chain_shape(v) != out_shape for v in chains):
            raise ConvUnsupported("where() broadcasts values of the convolution")
        op = self.b.new_op("where", ids, cred=all(v.cred for v in chains))
        return self.b.chain_like(ref, op, node, cred=all(v.cred for v in chains))

    def _reduce(self, node: fx.Node, name: str) -> Any:
        x = self.value(node.args[0])
        if not isinstance(x, Chain):
            raise ConvUnsupported(f"{name} of a tensor independent of the convolution")
        ndim = len(x.dims)
        dims = dims_arg(node, 1, ndim)
        if dims is None:
            raise ConvUnsupported(f"{name} over every dim (including the batch)")
        keepdim = bool(call_arg(node, 2, "keepdim", False))
        fn = CALL_REDUCTIONS[name]
        result = self.r.reduce_dims(node, x, fn, dims, keepdim)
        if name in ("max", "min"):
            return ReductionTuple([result])
        return result

    def _pool_function(self, node: fx.Node, name: str) -> Any:
        nd = int(name[-2])
        x = self.value(node.args[0])
        kernel = call_arg(node, 1, "kernel_size")
        stride = call_arg(node, 2, "stride")
        padding = call_arg(node, 3, "padding", 0)
        if name.startswith("max"):
            dilation = call_arg(node, 4, "dilation", 1)
            if call_arg(node, 5, "ceil_mode", False) or call_arg(node, 6, "return_indices", False):
                raise ConvUnsupported("max pooling with ceil_mode or indices")
            part = PoolPart(
                kernel=expr_of(kernel),
                stride=expr_of(stride if stride not in (None, [], ()) else kernel),
                padding=expr_of(padding),
                dilation=expr_of(dilation),
            )
            return self.r.pool(node, x, "max", part, nd, (kernel, stride, padding, dilation))
        if call_arg(node, 4, "ceil_mode", False) or call_arg(node, 6, "divisor_override"):
            raise ConvUnsupported("average pooling with ceil_mode or divisor_override")
        include = bool(call_arg(node, 5, "count_include_pad", True))
        part = PoolPart(
            kernel=expr_of(kernel),
            stride=expr_of(stride if stride not in (None, [], ()) else kernel),
            padding=expr_of(padding),
            count_include_pad=include,
        )
        return self.r.pool(node, x, "avg", part, nd, (kernel, stride, padding, 1))

    def _group_norm_function(self, node: fx.Node) -> Any:
        x = self.value(node.args[0])
        groups = call_arg(node, 1, "num_groups")
        weight, bias = call_arg(node, 2, "weight"), call_arg(node, 3, "bias")
        eps = call_arg(node, 4, "eps", 1e-5)
        return self.r.norm(
            node,
            x,
            "group",
            expr_of(groups),
            const_of(eps).expr,
            self._param_expr(weight),
            self._param_expr(bias),
        )

    def _param_expr(self, arg: Any) -> str | None:
        if arg is None:
            return None
        if isinstance(arg, fx.Node) and arg.op == "get_attr":
            return f"self.{arg.target}"
        raise ConvUnsupported("normalisation parameters that are not parameters of the model")

    def _norm_function(self, node: fx.Node, name: str) -> Any:
        x = self.value(node.args[0])
        if name == "layer_norm":
            shape = call_arg(node, 1, "normalized_shape")
            n_norm = 1 if isinstance(shape, int) else len(shape)
            weight, bias = call_arg(node, 2, "weight"), call_arg(node, 3, "bias")
            eps = call_arg(node, 4, "eps", 1e-5)
            return self.r.layer_norm(
                node, x, n_norm, const_of(eps).expr, self._param_expr(weight), self._param_expr(bias)
            )
        if name == "batch_norm":
            weight, bias = call_arg(node, 3, "weight"), call_arg(node, 4, "bias")
            training = call_arg(node, 5, "training", False)
            eps = call_arg(node, 7, "eps", 1e-5)
            if not training:
                raise ConvUnsupported("functional batch norm in eval mode")
            return self.r.norm(
                node, x, "batch", "None", const_of(eps).expr, self._param_expr(weight), self._param_expr(bias)
            )
        weight, bias = call_arg(node, 3, "weight"), call_arg(node, 4, "bias")
        if not call_arg(node, 5, "use_input_stats", True):
            raise ConvUnsupported("functional instance norm with running statistics")
        eps = call_arg(node, 7, "eps", 1e-5)
        return self.r.norm(
            node, x, "instance", "None", const_of(eps).expr, self._param_expr(weight), self._param_expr(bias)
        )
