"""The hyper-parameters of the calls a program keeps as torch calls, read as the task computes them.

A trace records a convolution's or a pooling's stride, padding, dilation, groups and window as numbers,
though they come from the constructor (`nn.Conv2d(c, c, k, padding=k // 2)`, `F.max_pool2d(x, self.k,
padding=self.k // 2)`): right at the traced sizes only. `module_calls` finds the calls that are a conv
module's own (the program passes `self.conv.padding`); `bind_named_arguments` reads a functional call's
arguments from a torch.fx trace of the forward with the model's scalars named (named_scalars.py);
`bind_pad_widths` reads the widths of the pad a convolution module with reflect (or other) padding makes.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelwright.providers.offline.frontend.named_scalars import name_scalars, restore_scalars

# Ops with a lowering handler that still keeps them as torch calls (lowering_views._conv): their integer
# arguments (stride, padding, dilation) are passed to torch at run time, so they can be read from the module.
KEPT_AS_TORCH = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}


def bind_schema(schema: Any, node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    positional = [a for a in schema if not a.kwarg_only]
    for a, v in zip(positional, node.args, strict=False):
        out[a.name] = v
    out.update(node.kwargs)
    for a in schema:
        if a.name not in out and a.has_default_value():
            out[a.name] = a.default_value
    return out


def _as_list(value: Any, n: int) -> Any:
    """An int or a sequence of ints as a list of n ints (a conv hyper-parameter, as torch expands it)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value) * n if len(value) == 1 else list(value)
    return value


def module_calls(gm: Any, pnames: list[str], model: torch.nn.Module) -> dict[str, str]:
    """The convolution modules the trace calls, by op node name: module path ("conv", "blocks.0.conv").

    A convolution traced from a module call has its stride, padding, dilation and groups as numbers,
    though they come from the constructor (`padding=kernel_size // 2`): the program reads them from the
    module instead. Only where the call is the module's own: the weight (and bias, if any) are its
    parameters and the traced hyper-parameters are its attributes (a `padding_mode` other than zeros
    pads before the call, so its padding differs and the numbers stay)."""
    param_of = _params_by_placeholder(gm, pnames)
    out: dict[str, str] = {}
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        packet = target.overloadpacket.__name__
        if packet not in KEPT_AS_TORCH:
            continue
        args = bind_schema(target._schema.arguments, node)
        owner = _weight_owner(param_of.get(args.get("weight")), model)
        if owner is None:
            continue
        path, mod = owner
        transposed, nd = packet.startswith("conv_transpose"), int(packet[-2])
        if (
            not isinstance(mod, torch.nn.modules.conv._ConvNd)
            or mod.transposed != transposed
            or len(mod.kernel_size) != nd
            or mod.padding_mode != "zeros"
        ):
            continue
        bias = args.get("bias")
        if bias is not None and param_of.get(bias) != f"{path}.bias":
            continue
        hyper = ("stride", "padding", "dilation", "groups") + (("output_padding",) if transposed else ())
        if all(_as_list(args.get(h), nd) == _as_list(getattr(mod, h), nd) for h in hyper):
            out[node.name] = path
    return out


# Functional calls and the modules that make the same aten op, in the order a torch.fx trace meets them.
_CALLED = {f"{kind}{nd}d" for kind in ("conv", "conv_transpose", "max_pool", "avg_pool") for nd in (1, 2, 3)}
_MODULE_OP = {f"{cls}{nd}d": f"{op}{nd}d" for cls, op in (("Conv", "conv"), ("ConvTranspose", "conv_transpose"),
              ("MaxPool", "max_pool"), ("AvgPool", "avg_pool")) for nd in (1, 2, 3)}  # fmt: skip
_HYPER = ("kernel_size", "stride", "padding", "dilation", "groups", "output_padding")


def bind_named_arguments(gm: Any, model: torch.nn.Module, var_to_val: dict, sources: dict) -> set[str]:
    """Replace, in `gm`, the integer arguments of functional convolutions and poolings that the forward
    computes from the model's scalar attributes (`F.max_pool2d(x, self.k, padding=self.k // 2)`) by
    symbols whose source (into `sources`) is that Python; returns the names of the nodes changed.

    The trace records those arguments as numbers, right at the traced attributes only; a torch.fx trace
    of the forward with the attributes named (frontend/named_scalars.py) says how each was computed. The
    two traces' calls are paired in order, op by op (modules counted where they make the same op); an op
    met a different number of times in the two is left alone."""
    import sympy

    from kernelwright.providers.offline.frontend.ir import SymScalar

    own = set(vars(model))
    saved = name_scalars(model)
    try:
        traced = torch.fx.symbolic_trace(model)
    except Exception:  # a forward torch.fx cannot trace in Python (control flow on values): nothing named
        return set()
    finally:
        restore_scalars(model, saved)
        for name in set(vars(model)) - own:  # constants the tracer lifted onto the model
            delattr(model, name)
    calls: dict[str, list[Any]] = {}
    for n in traced.graph.nodes:
        op: str | None = None
        if n.op == "call_function":
            op = getattr(n.target, "__name__", "")
        elif n.op == "call_module":
            op = _MODULE_OP.get(type(traced.get_submodule(n.target)).__name__)
        if op in _CALLED:
            calls.setdefault(op, []).append(n if n.op == "call_function" else None)
    ops: dict[str, list[Any]] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            if n.target.overloadpacket.__name__ in _CALLED:
                ops.setdefault(n.target.overloadpacket.__name__, []).append(n)
    by_text: dict[str, Any] = {}

    def symbol(text: str, value: int) -> Any:
        if text not in by_text:
            sym = sympy.Symbol(f"a{len(by_text)}")
            by_text[text], sources[sym], var_to_val[sym] = sym, text, sympy.Integer(value)
        return SymScalar(by_text[text], False)

    def named(traced_value: Any, python: Any) -> Any:
        """`traced_value` with each number that `python` computed from a named attribute as its symbol."""
        if isinstance(traced_value, list | tuple):
            items = list(python) if isinstance(python, list | tuple) else [python] * len(traced_value)
            if len(items) != len(traced_value):
                return traced_value
            return type(traced_value)(named(t, p) for t, p in zip(traced_value, items, strict=True))
        text = getattr(python, "kw_expr", None)
        if text is None or type(traced_value) is not int or traced_value != python:
            return traced_value
        return symbol(text, traced_value)

    changed: set[str] = set()
    for op, nodes in ops.items():
        if len(calls.get(op, [])) != len(nodes):
            continue
        for call, node in zip(calls[op], nodes, strict=True):
            if call is None:
                continue
            schema = node.target._schema.arguments
            positional = [a.name for a in schema if not a.kwarg_only]
            python = {**dict(zip(positional, call.args, strict=False)), **call.kwargs}
            bound = bind_schema(schema, node)
            args, kwargs = list(node.args), dict(node.kwargs)
            for i, a in enumerate(schema):
                if a.name not in _HYPER or a.name not in python or a.name not in bound:
                    continue
                new = named(bound[a.name], python[a.name])
                if new == bound[a.name] and not _has_symbol(new):
                    continue
                if i < len(args):
                    args[i] = new
                elif a.name in kwargs or a.kwarg_only:
                    kwargs[a.name] = new
                else:
                    while len(args) < i:
                        args.append(bound[schema[len(args)].name])
                    args.append(new)
                changed.add(node.name)
            node.args, node.kwargs = tuple(args), kwargs
    return changed


def bind_pad_widths(
    gm: Any, pnames: list[str], model: torch.nn.Module, var_to_val: dict, sources: dict
) -> set[str]:
    """A convolution module with a `padding_mode` other than zeros pads before its call (`F.pad(x,
    self._reversed_padding_repeated_twice, mode)`, then the convolution without padding): the trace records
    the pad's widths as numbers, right at the traced kernel size only (`padding=kernel_size // 2`). Where a
    pad node feeds only such a module's own convolution (its weight the module's, the mode and widths the
    module's), its widths become symbols read from the module; returns the names of the pad nodes changed."""
    import sympy

    from kernelwright.providers.offline.frontend.ir import SymScalar

    param_of = _params_by_placeholder(gm, pnames)
    changed: set[str] = set()
    for node in gm.graph.nodes:
        if (
            node.op != "call_function"
            or getattr(node.target, "overloadpacket", None) is not torch.ops.aten.pad
        ):
            continue
        users = list(node.users)
        conv = users[0] if len(users) == 1 else None
        if (
            conv is None
            or getattr(getattr(conv.target, "overloadpacket", None), "__name__", "") not in KEPT_AS_TORCH
        ):
            continue
        owner = _weight_owner(
            param_of.get(bind_schema(conv.target._schema.arguments, conv).get("weight")), model
        )
        if owner is None:
            continue
        path, mod = owner
        args = bind_schema(node.target._schema.arguments, node)
        widths = list(getattr(mod, "_reversed_padding_repeated_twice", []))
        if (
            not isinstance(mod, torch.nn.modules.conv._ConvNd)
            or mod.padding_mode == "zeros"
            or args.get("mode") != mod.padding_mode
            or list(args.get("pad") or []) != widths
        ):
            continue
        named = []
        for i, w in enumerate(widths):
            sym = sympy.Symbol(f"pad_{node.name}_{i}")
            sources[sym], var_to_val[sym] = (
                f"self.{path}._reversed_padding_repeated_twice[{i}]",
                sympy.Integer(w),
            )
            named.append(SymScalar(sym, False))
        node.args = (node.args[0], named, *node.args[2:])
        changed.add(node.name)
    return changed


def _params_by_placeholder(gm: Any, pnames: list[str]) -> dict[Any, str]:
    """The trace's parameter placeholders by node, each with its parameter's name (its first placeholders)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return dict(zip(placeholders, pnames, strict=False))


def _weight_owner(weight: str | None, model: torch.nn.Module) -> tuple[str, torch.nn.Module] | None:
    """(path, module) of the module whose `weight` parameter this is ("blocks.0.conv.weight"), or None."""
    if weight is None or not weight.endswith(".weight"):
        return None
    path = weight.removesuffix(".weight")
    try:
        return path, model.get_submodule(path)
    except AttributeError:
        return None


def _has_symbol(value: Any) -> bool:
    from kernelwright.providers.offline.frontend.ir import SymScalar

    if isinstance(value, list | tuple):
        return any(_has_symbol(v) for v in value)
    return isinstance(value, SymScalar)
