"""A region of a model written as a KernelBench-format task a person can read and run alone: its operators
as a `Model` (the leaf modules it calls rebuilt from their constructors, functions by their torch names),
`get_inputs()` making inputs of the shapes and dtypes it was cut with, `get_init_inputs()`; and its
signature (tasks/regions.py cuts the model and calls `describe_region` for each region)."""

from __future__ import annotations

import ast
import hashlib
import json
import math
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from kernelwright.tasks.pyast import parse_python
from kernelwright.tasks.region_runtime import WRAPPED_MODULES, SizeExpr, fetch
from kernelwright.tasks.region_sizes import size_text, with_sizes
from kernelwright.tasks.regions import (
    WIDE_CAT,
    NodeValue,
    Region,
    SplitError,
    function_source,
    is_library,
    layout_only,
    module_constructor,
    random_in_training,
    wide_concatenation,
)

_DEVICE = "<device>"
"""The names entry a device constant is written as (its region's first tensor input's device)."""


def _literal(x: Any, names: dict[str, str]) -> str:
    if isinstance(x, fx.Node):
        return names[x.name]
    if isinstance(x, SizeExpr):  # a size read from the region's values (tasks/region_sizes.py)
        return size_text(x.expr, names)
    if isinstance(x, tuple):
        inner = ", ".join(_literal(v, names) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(_literal(v, names) for v in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_literal(v, names)}" for k, v in x.items()) + "}"
    if isinstance(x, slice):
        return f"slice({_literal(x.start, names)}, {_literal(x.stop, names)}, {_literal(x.step, names)})"
    if isinstance(x, float) and not math.isfinite(x):
        return f"float({str(x)!r})"
    if isinstance(x, (bool, int, float, str, type(None))) or x is Ellipsis:
        return repr(x) if x is not Ellipsis else "..."
    if isinstance(x, torch.dtype):
        return str(x)
    if isinstance(x, torch.device):  # where the region's inputs are, not where the model was traced
        return names.get(_DEVICE, f"torch.device({str(x)!r})")
    if isinstance(x, torch.memory_format | torch.layout):
        return str(x)
    raise SplitError(f"no source for argument {x!r}")


def _input_maker(v: NodeValue, sizes: dict[int, str]) -> str:
    shape = _shape_text(v.shape, sizes)
    if v.dtype.startswith("float") or v.dtype.startswith("bfloat"):
        return f"torch.randn({shape}, dtype=torch.{v.dtype})"
    if v.dtype == "bool":
        return f"torch.rand({shape}) > 0.5"
    return f"torch.randint({int(v.low)}, {int(v.high) + 1}, {shape}, dtype=torch.{v.dtype})"


def _shape_text(shape: Any, sizes: dict[int, str], *, new: bool = False) -> str:
    """`[10, size_64, 7, 7]`: a shape with each size `sizes` names written as its name (with `new`, every
    size of 2 or more, named as it is first met: a parameter's shape is the task's to change too)."""
    if new:
        for d in shape:
            if int(d) >= 2:
                _size_name(sizes, int(d))
    return "[" + ", ".join(sizes.get(int(d), str(int(d))) for d in shape) + "]"


def _size_name(sizes: dict[int, str], value: int) -> str:
    """The name of a size `value` in a region task, `size_<value>`, noted in `sizes` (one name per value)."""
    return sizes.setdefault(value, f"size_{value}")


_SIZE_ARGUMENTS: dict[str, tuple[int | str, ...]] = {
    **{f"Conv{d}": (0, 1) for d in ("1d", "2d", "3d", "Transpose1d", "Transpose2d", "Transpose3d")},
    **{f"{n}{d}": (0,) for n in ("BatchNorm", "InstanceNorm") for d in ("1d", "2d", "3d")},
    "Linear": ("in_features", "out_features"),
    "LayerNorm": (0,),
    "RMSNorm": (0,),
    "GroupNorm": (1,),
    "Embedding": (1,),
}
"""Per module class, the constructor arguments that are sizes of the tensors it takes and makes (a position
or a keyword; a tuple's elements each): a region task passes them through `get_init_inputs`, so a judge can
build the task at other sizes (the CPU's interpreter, unseen sizes). A convolution's `groups` follows its
channels only where it equals them (a depthwise one); kernel sizes, strides and group counts stay literals."""


def _sized_constructor(ctor: str, sizes: dict[int, str]) -> str:
    """`ctor` (module_constructor's text) with each size argument (_SIZE_ARGUMENTS) of 2 or more written as
    a name, `size_<value>`, added to `sizes` (one name per value: equal sizes change together)."""
    call = parse_python(ctor, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
    wanted = _SIZE_ARGUMENTS.get(call.func.attr, ())
    if not wanted:
        return ctor

    def named(node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 2:
            return ast.Name(_size_name(sizes, node.value), ast.Load())
        if isinstance(node, ast.Tuple | ast.List):
            return type(node)([named(e) for e in node.elts], ast.Load())
        return node

    channels = set()
    for i, a in enumerate(call.args):
        if i in wanted:
            if isinstance(a, ast.Constant):
                channels.add(a.value)
            call.args[i] = named(a)
    for kw in call.keywords:
        if kw.arg in wanted or (
            kw.arg == "groups" and isinstance(kw.value, ast.Constant) and kw.value.value in channels
        ):
            kw.value = named(kw.value)
    return ast.unparse(call)


def root_module(group: list[fx.Node], model: nn.Module) -> nn.Module | None:
    """The module a region is built around when that is a module call (its first library node)."""
    for node in group:
        if node.op == "call_module" and is_library(node, model):
            return model.get_submodule(str(node.target))
    return None


def describe_region(
    region: Region, group: list[fx.Node], model: nn.Module, values: dict[str, NodeValue]
) -> None:
    """Fill the region's signature, bindings and task source (or why it has none)."""
    names = {n: f"x{i}" for i, n in enumerate(region.inputs)}
    tensor_in = next((names[n] for n in region.inputs if values[n].tensor), None)
    if tensor_in is not None:
        names[_DEVICE] = f"{tensor_in}.device"
    modules: dict[str, str] = {}
    params: dict[str, str] = {}
    sig: list[Any] = [[(values[n].shape, values[n].dtype) for n in region.inputs]]
    inits: list[str] = []
    body: list[str] = []
    sizes: dict[int, str] = {}  # the constructors' sizes -> their names (get_init_inputs passes them)
    try:
        for n in region.inputs:
            if not values[n].tensor:  # a forward argument that is not a tensor: no example to write for it
                raise SplitError(f"its input {n} is not a tensor")
        if any(random_in_training(n, model) for n in group):
            raise SplitError(
                "it draws random numbers in training mode (a dropout with p > 0): no kernel can match it"
            )
        for node in group:
            for a in node.all_input_nodes:
                if a.op == "get_attr" and a.name not in names:
                    local = f"p{len(params)}"
                    params[str(a.target)] = local
                    names[a.name] = f"self.{local}"
                    t = fetch(model, str(a.target))
                    if not isinstance(t, torch.Tensor):
                        raise SplitError(f"attribute {a.target} is not a tensor")
                    region.bindings[local] = str(a.target)
                    shape = _shape_text(t.shape, sizes, new=True)
                    maker = f"torch.randn({shape}, dtype={t.dtype})"
                    if not (t.is_floating_point() or t.is_complex()):  # an index or a mask: zeros are valid
                        maker = f"torch.zeros({shape}, dtype={t.dtype})"
                    if isinstance(t, nn.Parameter):
                        inits.append(f"self.{local} = nn.Parameter({maker})")
                    else:
                        inits.append(f"self.register_buffer({local!r}, {maker})")
                    sig.append(("attr", tuple(t.shape), str(t.dtype)))
            var = f"t{len(body)}"
            node_args, node_kwargs = with_sizes(node, region.sizes)
            args = ", ".join([_literal(a, names) for a in node_args]
                             + [f"{k}={_literal(v, names)}" for k, v in node_kwargs.items()])  # fmt: skip
            if node.op == "call_module":
                path = str(node.target)
                if path not in modules:
                    local = f"m{len(modules)}"
                    modules[path] = local
                    mod = model.get_submodule(path)
                    ctor = module_constructor(mod)
                    if ctor is None:
                        raise SplitError(f"nn.{type(mod).__name__} cannot be written back as source")
                    dtypes = {t.dtype for t in mod.state_dict().values() if t.is_floating_point()}
                    cast = f".to({dtypes.pop()})" if len(dtypes) == 1 and torch.float32 not in dtypes else ""
                    inits.append(f"self.{local} = {_sized_constructor(ctor, sizes)}{cast}")
                    # the module itself, so a kernel reads the model's own (its groups, channels, eps at
                    # the model's size, not the constructor's at the size the region was cut at), and its
                    # tensors, for a kernel that keeps modules of its own (the torch.compile backend's)
                    region.bindings[local] = path
                    for k in mod.state_dict():
                        region.bindings[f"{local}.{k}"] = f"{path}.{k}"
                    sig.append(("module", ctor, cast))
                body.append(f"{var} = self.{modules[path]}({args})")
                sig.append(("call", modules[path], _literal(node_args, {**names, node.name: "?"}),
                            sorted(node.kwargs)))  # fmt: skip
            elif node.op == "call_function":
                body.append(f"{var} = {function_source(node.target)}({args})")
                sig.append(("fn", function_source(node.target), _literal(node_args, names),
                            _literal(node_kwargs, names)))  # fmt: skip
            elif node.op == "call_method":
                first, _, rest = args.partition(", ")
                body.append(f"{var} = {first}.{node.target}({rest})")
                sig.append(("method", str(node.target), _literal(node_args, names),
                            _literal(node_kwargs, names)))  # fmt: skip
            names[node.name] = var
        if isinstance(root_module(group, model), nn.RNNBase):
            # the writer has no recurrence: asked, it traces every time step and then refuses (75 s for a
            # 6-layer LSTM over 512 steps); the library's recurrence runs, the regions around it are tasks
            raise SplitError("a recurrence: the library's kernel is kept")
        if len(group) == 1 and wide_concatenation(group[0]):
            raise SplitError(
                f"a concatenation of more than {WIDE_CAT} tensors: a copy torch makes at memory speed, kept in"
                " torch (the operators that read it are a region of their own)"
            )
        if not region.outputs:
            raise SplitError("no value of it is used outside it (an in-place write or an unused value)")
        if layout_only(group, model):
            raise SplitError("views, indexing and layout only: nothing for a kernel to compute")
        for out in region.outputs:
            if not values[out].tensor:
                raise SplitError(f"its output {out} is not a tensor")
    except SplitError as exc:
        region.why_not = str(exc)
    # which of its values leave it: the same operators with another set of outputs is another task
    sig.append(("outputs", [region.nodes.index(o) for o in region.outputs]))
    # variable names are numbered by position, so the text is the same for identical regions
    text = json.dumps(sig, default=str)
    region.signature = hashlib.sha256(text.encode()).hexdigest()[:16]
    if region.why_not:
        return
    outs = [names[o] for o in region.outputs]
    ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ",)"
    init_lines = "\n".join(f"        {line}" for line in inits) or "        pass"
    body_lines = "\n".join(f"        {line}" for line in body)
    params_text = ", ".join(f"x{i}" for i in range(len(region.inputs)))
    # the sizes the constructors take, in the order of first use; known before the inputs are written, so
    # an input's dimension of the same size is written with the same name
    init_names = list(sizes.values())
    region.init_args = list(sizes)
    gets = ",\n        ".join(_input_maker(values[n], sizes) for n in region.inputs)
    constants = "".join(f"{name} = {value}\n" for value, name in sizes.items())
    constants = f"\n{constants}" if constants else ""
    init_params = "".join(f", {name}" for name in init_names)
    init_list = ", ".join(init_names)
    imports = "".join(f"import {m}\n" for m in WRAPPED_MODULES if f"{m}." in body_lines)
    region.source = f'''"""Region {region.index}: {" + ".join(region.ops)} (signature {region.signature}).

Cut from a whole model by kernelwright (tasks/regions.py); runs alone as a KernelBench-format task.
"""

import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F
{imports}{constants}

class Model(nn.Module):
    def __init__(self{init_params}):
        super().__init__()
{init_lines}

    def forward(self, {params_text}):
{body_lines}
        return {ret}


def get_inputs():
    return [
        {gets}
    ]


def get_init_inputs():
    return [{init_list}]
'''


# -- a model built for analysis only -----------------------------------------------------------------
