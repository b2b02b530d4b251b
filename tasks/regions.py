"""Splitting a whole model into regions, each a KernelBench-format task of its own.

A region is a library operation (convolution, GEMM, attention, a recurrence) with the pointwise,
reduction and norm operators that follow it and only it (its epilogue) and a pointwise chain right before
it (its prologue), or a chain of pointwise, reduction and norm operators alone. The model is traced once
with torch.fx (tasks/region_runtime.py's tracer: torch.nn leaf modules kept whole), run once on the
example inputs to learn every value's shape and dtype, and cut greedily in graph order: a node joins the
region being built when it reads a value of it (a second library operation starts a new one). Values that
are not tensors (a `size()`, an LSTM's tuple) never cross a region boundary: the regions between their
producer and user are merged.

A region's **signature** hashes its operators, attributes, input and parameter shapes and dtypes (never
weights): identical residual blocks share one, and are searched once.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import math
import operator
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from kernelwright.tasks.pyast import parse_python
from kernelwright.tasks.region_analysis import analysis_model as analysis_model  # where callers find it
from kernelwright.tasks.region_runtime import (
    LIBRARY_MODULES,
    LIBRARY_NAMES,
    WRAPPED_MODULES,
    fake_inputs,
    fake_run_node,
    random_call,
    region_fingerprint,
    trace,
)
from kernelwright.tasks.region_sizes import derive_sizes, peel_sizes


class SplitError(ValueError):
    """A model that cannot be traced into regions (one line: why)."""


def module_constructor(module: nn.Module) -> str | None:
    """`nn.Conv2d(3, 8, kernel_size=(3, 3), ...)`: source that builds a module like this one (same
    class, attributes and parameter shapes), or None for one that cannot be written that way."""
    cls = type(module)
    if getattr(nn, cls.__name__, None) is not cls or isinstance(module, (nn.Sequential, nn.ModuleList,
                                                                         nn.ModuleDict)):  # fmt: skip
        return None
    if any(True for _ in module.children()):
        return None
    found = _constructor_text(cls, module.extra_repr())
    if found is None:
        return None
    text, shapes = found
    return text if {k: tuple(v.shape) for k, v in module.state_dict().items()} == shapes else None


@functools.lru_cache(maxsize=512)
def _constructor_text(cls: type, extra_repr: str) -> tuple[str, dict[str, tuple[int, ...]]] | None:
    """`nn.<cls>(...)` from a module's extra_repr, with no keyword the module does not need, and the shapes
    of the state of the module it builds; None where the text does not build a module with that extra_repr.

    A keyword is left out where the module built without it is the same (a default such as BatchNorm2d's
    `bias=True`, or `bias=False` beside `affine=False`): the text then builds the module under other torch
    versions too (torch 2.13's BatchNorm2d writes `bias`, a keyword torch 2.11's does not take)."""

    def build(text: str) -> nn.Module | None:
        try:
            with torch.device("meta"):  # shapes only: no memory, no random init of large weights
                built = eval(text, {"nn": nn, "torch": torch, "inf": math.inf})  # noqa: S307 - text we made
        except Exception:
            return None
        return built if isinstance(built, nn.Module) and built.extra_repr() == extra_repr else None

    whole = f"nn.{cls.__name__}({extra_repr})"
    built = build(whole)
    if built is None:
        return None
    try:
        call = parse_python(f"f({extra_repr})", mode="eval").body
    except SyntaxError:
        call = None
    if isinstance(call, ast.Call):
        args = [ast.unparse(a) for a in call.args]
        keywords = [ast.unparse(k) for k in call.keywords]
        for kw in list(keywords):
            fewer = [k for k in keywords if k != kw]
            text = f"nn.{cls.__name__}({', '.join(args + fewer)})"
            if (smaller := build(text)) is not None:
                keywords, whole, built = fewer, text, smaller
    return whole, {k: tuple(v.shape) for k, v in built.state_dict().items()}


def leaf_modules(model: nn.Module) -> set[str]:
    return {name for name, m in model.named_modules() if name and module_constructor(m) is not None}


@dataclass
class NodeValue:
    """What one node produced on the example inputs."""

    tensor: bool
    shape: tuple[int, ...] = ()
    dtype: str = ""
    low: float = 0.0
    high: float = 0.0
    seconds: float = 0.0
    """How long computing it took (once, on the example inputs): the regions' shares of the model's time."""


@dataclass
class Region:
    index: int
    nodes: list[str]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    library: str = ""
    """The library operation it is built around ("" for a chain of pointwise/reduction/norm ops)."""
    ops: list[str] = field(default_factory=list)
    """The operators it computes, in order (attribute reads and tuple unpacking left out): the model's table."""
    bindings: dict[str, str] = field(default_factory=dict)
    """The region task's state_dict names -> the model's."""
    signature: str = ""
    source: str = ""
    """The region as a KernelBench-format task file ("" when it cannot be written: see `why_not`)."""
    why_not: str = ""
    fingerprint: str = ""
    """What it computes in the trace (tasks/region_runtime.py region_fingerprint): the stitched model runs
    its kernel only where its own trace gives the same."""
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Node -> {k: expression}: its k-th int argument is written as a size of the region's values
    (tasks/region_sizes.py; a specialized trace's numbers), so the kernel applies at other sizes."""
    init_args: list[int] = field(default_factory=list)
    """What the task's `get_init_inputs()` returns: its modules' sizes, which its kernel is built with."""

    def plan(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "bindings": self.bindings,
            "fingerprint": self.fingerprint,
            **({"sizes": self.sizes} if self.sizes else {}),
            **({"init": self.init_args} if self.init_args else {}),
        }


@dataclass
class ModelSplit:
    graph: fx.Graph
    leaves: set[str]
    regions: list[Region]
    values: dict[str, NodeValue]
    seconds: float
    inputs: int = 0
    specialized: bool = False
    """Traced on the inputs' sizes (python control flow or sizes fx cannot follow symbolically)."""
    measured: bool = True
    """Values' `seconds` were measured (a real run); False: shapes from fake tensors, no times."""

    constant_args: dict[str, Any] = field(default_factory=dict)
    """Forward arguments not given, each a constant of the trace at its default (`constant_arguments`)."""
    wrap: list[str] = field(default_factory=list)
    """Modules (einops) whose functions the graph calls as one node each: the stitched file imports them."""

    @property
    def spec(self) -> dict[str, Any]:
        """How the stitched model traces it again (tasks/region_runtime.py plan_for)."""
        return {"leaves": sorted(self.leaves), "inputs": self.inputs, "specialized": self.specialized,
                "constant_args": self.constant_args, "wrap": self.wrap}  # fmt: skip

    def unique(self) -> dict[str, list[Region]]:
        """Signature -> its regions, in first-seen order."""
        out: dict[str, list[Region]] = {}
        for r in self.regions:
            out.setdefault(r.signature, []).append(r)
        return out


def _value(x: Any) -> NodeValue:
    if isinstance(x, torch.Tensor):
        low = high = 0.0
        fake = type(x).__name__ == "FakeTensor"
        if not x.is_floating_point() and not x.is_complex() and x.numel() and not x.is_meta and not fake:
            low, high = float(x.min()), float(x.max())
        return NodeValue(True, tuple(x.shape), str(x.dtype).removeprefix("torch."), low, high)
    return NodeValue(False)


def _op_name(node: fx.Node, root: nn.Module) -> str:
    if node.op == "call_module":
        return type(root.get_submodule(str(node.target))).__name__
    if node.op == "call_method":
        return str(node.target)
    return getattr(node.target, "__name__", str(node.target))


_BOOKKEEPING = ("getattr", "getitem")
"""Attribute reads (`mha.in_proj_weight`) and tuple unpacking: nodes of a region, not operators it computes."""


def _shown_ops(names: list[str]) -> list[str]:
    """A region's operator names as its table shows them: the bookkeeping nodes left out, unless that is all
    the region holds."""
    return [n for n in names if n not in _BOOKKEEPING] or names


def is_library(node: fx.Node, root: nn.Module) -> bool:
    if node.op == "call_module":
        return isinstance(root.get_submodule(str(node.target)), LIBRARY_MODULES)
    if node.op in ("call_function", "call_method"):
        return _op_name(node, root) in LIBRARY_NAMES or node.target is operator.matmul
    return False


def _record(model: nn.Module, graph: fx.Graph, inputs: tuple[Any, ...]) -> dict[str, NodeValue]:
    """Run the graph (on copies of the state: batch norm's running statistics are not touched): once, or
    twice when that took under a second, timing the second run (a first call's warm-up would dominate)."""
    from kernelwright.tasks.region_runtime import RegionPlan

    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    # tensors held as plain attributes (a hidden state the forward updates in place) are kept too
    plain = [(v, v.detach().clone()) for m in model.modules() for v in vars(m).values()
             if isinstance(v, torch.Tensor) and not v.is_meta]  # fmt: skip
    values: dict[str, NodeValue] = {}
    try:
        with torch.no_grad():
            for _ in range(2):
                env: dict[str, Any] = {}
                it = iter(inputs)
                for node in graph.nodes:
                    seconds = 0.0
                    if node.op == "placeholder":
                        env[node.name] = next(it, node.args[0] if node.args else None)
                    elif node.op == "output":
                        continue
                    else:
                        t0 = time.perf_counter()
                        env[node.name] = RegionPlan.run_node(model, node, env)
                        seconds = time.perf_counter() - t0
                    values[node.name] = _value(env[node.name])
                    values[node.name].seconds = seconds
                if sum(v.seconds for v in values.values()) >= 1.0:
                    break
                model.load_state_dict(saved)
    finally:
        model.load_state_dict(saved)
        with torch.no_grad():
            for tensor, before in plain:
                tensor.copy_(before)
    return values


def _propagate(model: nn.Module, graph: fx.Graph, inputs: list[Any]) -> dict[str, NodeValue]:
    """Every node's shape and dtype from one run on fake tensors (no data: fast at any size)."""
    fakes, mode = fake_inputs(inputs)
    env: dict[str, Any] = {}
    values: dict[str, NodeValue] = {}
    it = iter(fakes)
    with mode:
        for node in graph.nodes:
            if node.op == "placeholder":
                env[node.name] = next(it, node.args[0] if node.args else None)
            elif node.op == "output":
                continue
            else:
                args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda a: env[a.name])
                env[node.name] = fake_run_node(model, node, args, kwargs)
            values[node.name] = _value(env[node.name])
    return values


def _fake_values(graph: fx.Graph) -> dict[str, NodeValue]:
    traced = getattr(graph, "_kw_values", {})
    return {n.name: _value(traced.get(n.name)) for n in graph.nodes if n.op != "output"}


def _writable(node: fx.Node, root: nn.Module) -> bool:
    if node.op == "call_module":  # a module kept whole because fx cannot follow it: run as it is
        return module_constructor(root.get_submodule(str(node.target))) is not None
    if node.op != "call_function":
        return True
    try:
        function_source(node.target)
    except SplitError:
        return False
    return True


_REDUCTIONS = frozenset({"mean", "sum", "var", "std", "amax", "amin", "logsumexp", "norm"})

_LAYOUT = frozenset({"view", "reshape", "permute", "transpose", "getitem", "contiguous", "split", "chunk",
                     "expand", "expand_as", "view_as", "unsqueeze", "squeeze", "flatten", "unflatten", "t",
                     "narrow", "select", "unbind", "movedim", "split_with_sizes", "size", "getattr", "rearrange"})  # fmt: skip
"""Operators that only view, index or lay out their input: a region of these alone has nothing to compute."""


WIDE_CAT = 8
"""A concatenation of more tensors than this stands alone, kept in torch (`wide_concatenation`)."""


def wide_concatenation(node: fx.Node) -> bool:
    """A torch.cat of more than WIDE_CAT tensors (a DenseNet layer's input: every earlier layer's output).
    In a region with the operators that read it, the writer keeps it in torch all the same (a copy torch
    makes at memory speed), and its many inputs are what its analysis spends on: each one's sizes are
    symbols of the region's trace (DenseNet201's 98 concatenations, of up to 49 tensors, took most of its
    first program's time). Alone, its readers are a region of one input."""
    if node.op != "call_function" or node.target not in (torch.cat, torch.concat, torch.concatenate):
        return False
    parts = node.args[0] if node.args else node.kwargs.get("tensors")
    return isinstance(parts, list | tuple) and len(parts) > WIDE_CAT


_DROPOUT_MODULES = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)


def random_in_training(node: fx.Node, root: nn.Module) -> bool:
    """A dropout with p > 0 (a module, a function, attention's dropout_p): random in training mode, so no
    kernel can match it. It runs in torch between the regions around it, reading its module's mode as
    its forward does (tasks/region_runtime.py `_Mode`), and the regions around it keep their kernels."""
    if node.op == "call_module":
        mod = root.get_submodule(str(node.target))
        return isinstance(mod, _DROPOUT_MODULES) and mod.p > 0
    return node.op in ("call_function", "call_method") and random_call(
        _op_name(node, root), node.args, node.kwargs
    )


def _pointwise(node: fx.Node, root: nn.Module) -> bool:
    return node.op in ("call_function", "call_method") and not is_library(node, root)


def _norm_units(graph: fx.Graph, root: nn.Module, values: dict[str, NodeValue]) -> dict[str, int]:
    """Node -> its norm: a reduction over the last dim (RMSNorm's mean of squares, LayerNorm's mean and
    variance written out by hand), the single-use steps that prepare its input, the steps on its reduced
    value and the operators at the input's full shape that read it (the scale). Their nodes are cut into
    one region: a reduction in one task and the scale that reads it in another computes the norm twice
    over memory. A reduction nothing at its input's shape reads (pooling before a Linear) is no norm."""

    def shape(n: fx.Node) -> tuple[int, ...] | None:
        v = values.get(n.name)
        return v.shape if v is not None and v.tensor else None

    def back(n: fx.Node, full: tuple[int, ...], unit: set[str]) -> fx.Node:
        """Walk back from `n` over single-use pointwise steps at the full shape; the first value that is
        not one (the norm's input)."""
        while n.name not in unit and _pointwise(n, root) and len(n.users) == 1 and shape(n) == full:
            unit.add(n.name)
            nxt = next((a for a in n.all_input_nodes if shape(a) == full), None)
            if nxt is None:
                break
            n = nxt
        return n

    units: list[tuple[set[str], str]] = []
    for r in graph.nodes:
        if not _pointwise(r, root) or _op_name(r, root) not in _REDUCTIONS or not r.args:
            continue
        src, reduced = r.args[0], shape(r)
        full = shape(src) if isinstance(src, fx.Node) else None
        if not isinstance(src, fx.Node) or not full or reduced is None or full[-1] == 1:
            continue
        if reduced not in (full[:-1], full[:-1] + (1,)):
            continue
        unit = {r.name}
        base = back(src, full, unit)
        joins: list[fx.Node] = []
        frontier, steps = list(r.users), 0
        while frontier and steps < 32:  # the reduced value's few steps (add eps, rsqrt) to the scale
            steps += 1
            n = frontier.pop()
            if n.name in unit or not _pointwise(n, root):
                continue
            if shape(n) == reduced:
                unit.add(n.name)
                frontier.extend(n.users)
            elif shape(n) == full:
                unit.add(n.name)
                joins.append(n)
        if not joins:
            continue
        for j in joins:  # the scaled operand's own single-use steps (RMSNorm's second x.float())
            for a in j.all_input_nodes:
                back(a, full, unit)
        units.append((unit, base.name))
    unit_of: dict[str, int] = {}
    for i, (unit, base_name) in enumerate(units):
        # one norm of units that share a node or where one's input is another's step (LayerNorm's
        # variance reads the centred input its mean's unit computed)
        ids = {unit_of[n] for n in (*unit, base_name) if n in unit_of} | {i}
        target = min(ids)
        for n, u in list(unit_of.items()):
            if u in ids:
                unit_of[n] = target
        for n in unit:
            unit_of[n] = target
    return unit_of


def _cut(graph: fx.Graph, root: nn.Module, values: dict[str, NodeValue]) -> list[list[fx.Node]]:
    groups: list[list[fx.Node]] = []
    group_of: dict[str, int] = {}
    has_library: list[bool] = []
    closed: list[bool] = []
    norm_of = _norm_units(graph, root, values)
    norm_group: dict[int, int] = {}

    def merge_from(first: int) -> None:
        merged = [n for g in groups[first:] for n in g]
        del groups[first + 1 :]
        del closed[first + 1 :]
        groups[first] = merged
        has_library[first:] = [any(is_library(n, root) for n in merged)]
        for n in merged:
            group_of[n.name] = first
        for u, g in norm_group.items():
            norm_group[u] = min(g, first)

    for node in graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        reads = [a for a in node.all_input_nodes if a.name in group_of]
        # indexing into a tensor that no open region computes (`x[t]` of an input, a step of a loop) is a
        # view, run where it stands: in a region it would put its index in the signature (one per step)
        source = node.args[0] if node.args else None
        if (node.op == "call_function" and node.target is operator.getitem and isinstance(source, fx.Node)
                and values.get(source.name, NodeValue(False)).tensor
                and not (groups and group_of.get(source.name) == len(groups) - 1)):  # fmt: skip
            continue
        library = is_library(node, root)
        # a non-tensor value never crosses a boundary: merge every group from its producer's onward
        held = [group_of[a.name] for a in reads if not values.get(a.name, NodeValue(False)).tensor]
        if held and min(held) < len(groups) - 1:
            merge_from(min(held))
        unit = norm_of.get(node.name)
        norm_at = norm_group.get(unit) if unit is not None else None
        if norm_at is not None and norm_at < len(groups) - 1:
            # the norm's earlier steps sit in an earlier region: pull the regions since into one, where
            # that keeps one library operation and no region kept alone
            span = range(norm_at, len(groups))
            if sum(is_library(n, root) for g in span for n in groups[g]) <= 1 and not any(
                closed[g] for g in span
            ):
                merge_from(norm_at)
                norm_at = len(groups) - 1
        last = len(groups) - 1
        reads_last = any(group_of[a.name] == last for a in reads) if groups else False
        # after a library operation only shape-keeping operators (its epilogue) join: pooling or a
        # reshape starts a chain of its own, so blocks that end the same way keep one signature
        keeps_shape = values.get(node.name, NodeValue(False)).shape in {
            values[a.name].shape for a in node.all_input_nodes if a.name in values and values[a.name].tensor
        }
        joins = reads_last and not library and (not has_library[last] or keeps_shape)
        joins = joins or (reads_last and library and not has_library[last])
        # a library operation with several results (attention and its weights) takes no epilogue: what
        # follows its indexing starts a region whose kernel need not be written for its inner sizes
        joins = joins and not (groups and any(is_library(n, root) and not values[n.name].tensor
                                              for n in groups[last] if n.name in values))  # fmt: skip
        # an operator that cannot be written as source sits alone (kept in torch), not its neighbours
        alone = (
            not _writable(node, root)
            or (node.op == "call_module" and isinstance(root.get_submodule(str(node.target)), nn.RNNBase))
            or random_in_training(node, root)
            or wide_concatenation(node)
        )
        if unit is not None and groups:
            if norm_at == last and not library:
                joins = True  # the norm's next step: with the rest of it
            elif norm_at is None and has_library[last]:
                joins = False  # a norm starts after a library operation: its own region, or its prologue
        joins = joins and not alone and not closed[last] if groups else False
        if groups and (held or joins):
            groups[last].append(node)
            has_library[last] = has_library[last] or library
        else:
            groups.append([node])
            has_library.append(library)
            closed.append(alone)
        group_of[node.name] = len(groups) - 1
        if unit is not None:
            norm_group.setdefault(unit, group_of[node.name])
    return _place_layout(groups, closed, root)


def _place_layout(groups: list[list[fx.Node]], closed: list[bool], root: nn.Module) -> list[list[fx.Node]]:
    """A region of views, indexing and layout operators alone computes nothing a kernel could speed up:
    it joins the region after it that reads it, else the one before it that it reads (neighbours in
    graph order, so the merged region stays one span of the graph), else stands alone (kept in torch,
    never searched: `describe_region`)."""
    i = 0
    while i < len(groups):
        if not layout_only(groups[i], root):
            i += 1
            continue
        names = {n.name for n in groups[i]}
        after = (
            i + 1 < len(groups)
            and not closed[i + 1]
            and any(a.name in names for n in groups[i + 1] for a in n.all_input_nodes)
        )
        before = (
            i > 0
            and not closed[i - 1]
            and any(a.name in {m.name for m in groups[i - 1]} for n in groups[i] for a in n.all_input_nodes)
        )
        if after:
            groups[i : i + 2] = [groups[i] + groups[i + 1]]
            closed[i : i + 2] = [False]
        elif before:
            groups[i - 1 : i + 1] = [groups[i - 1] + groups[i]]
            closed[i - 1 : i + 1] = [False]
            i -= 1
        else:
            i += 1
    return groups


def _peel_shared_views(
    groups: list[list[fx.Node]], root: nn.Module, values: dict[str, NodeValue]
) -> list[list[fx.Node]]:
    """The views at a region's start that later regions read too (`flat = x.reshape(-1, D)` read by the
    router's Linear and by the experts): in the region they would be outputs computed from its inputs
    alone, which no kernel writes (the judge refuses such an output), so they run in torch before it,
    with the size reads before them (`x.shape[-1]`), unless the region reads one of those sizes itself."""
    out = []
    for group in groups:
        lead = 0
        while lead < len(group) - 1 and layout_only(group[lead : lead + 1], root):
            lead += 1
        shared = [i for i in range(lead) if any(u not in group for u in group[i].users)]
        if shared:
            peeled, rest = group[: shared[-1] + 1], group[shared[-1] + 1 :]
            reads = {a for n in rest for a in n.all_input_nodes}
            if all(values.get(n.name, NodeValue(False)).tensor for n in peeled if n in reads):
                group = rest
        out.append(group)
    return out


def layout_only(group: list[fx.Node], root: nn.Module) -> bool:
    return all(n.op in ("call_function", "call_method") and _op_name(n, root) in _LAYOUT for n in group)


def failing_module(model: nn.Module, exc: BaseException) -> str | None:
    """The innermost submodule of `model` whose forward raised `exc` (its path), None if only the
    model's own forward did: that module can be kept whole (a leaf run in torch) and the trace tried
    again."""
    paths = {id(m): name for name, m in model.named_modules() if name}
    found = None
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if owner is not None and id(owner) in paths:
            found = paths[id(owner)]
        tb = tb.tb_next
    return found


def constant_arguments(model: nn.Module, given: int) -> dict[str, Any]:
    """Forward's arguments after the first `given` whose default is a plain value (None, a bool, number or
    string): constants of the trace at that value (`if mask is None` takes its branch, `x * scale` reads
    2.0), as the call with only the inputs given computes. Others stay the graph's inputs."""
    params = list(inspect.signature(model.forward).parameters.values())[given:]
    return {
        p.name: p.default
        for p in params
        if p.kind is p.POSITIONAL_OR_KEYWORD
        and (p.default is None or isinstance(p.default, bool | int | str)
             or isinstance(p.default, float) and math.isfinite(p.default))
    }  # fmt: skip


def wrapped_modules() -> tuple[Any, ...]:
    """The modules of WRAPPED_MODULES that are installed."""
    found = []
    for name in WRAPPED_MODULES:
        try:
            found.append(importlib.import_module(name))
        except ImportError:
            pass
    return tuple(found)


def _trace(
    model: nn.Module, leaves: set[str], inputs: list[Any], specialized: bool
) -> tuple[fx.Graph, set[str]]:
    """Trace once (symbolic), or specialized on the inputs' sizes with every submodule fx still cannot
    follow (data-dependent control flow) kept whole, run in torch."""
    leaves = set(leaves)
    constants, wrap = constant_arguments(model, len(inputs)), wrapped_modules()  # before any trace touches it
    if not specialized:
        return trace(model, leaves, constants, None, wrap), leaves
    for _ in range(64):
        try:
            return trace(model, leaves, constants, inputs, wrap), leaves
        except Exception as exc:
            path = failing_module(model, exc)
            if path is None or path in leaves:
                raise
            leaves.add(path)
    raise SplitError("more than 64 submodules cannot be traced")


def split_model(model: nn.Module, inputs: tuple[Any, ...] | list[Any], *, measure: bool = True) -> ModelSplit:
    """Trace `model`, learn every value's shape on `inputs`, and cut it into regions with signatures and
    task files. `measure`: run it for real (on copies of its state) and time each node (the regions'
    shares of the model's time); otherwise shapes come from fake tensors, with no data (fast at any
    size). A model fx cannot trace symbolically (python control flow on sizes, devices or shapes, a
    buffer sliced to a size) is traced specialized on its inputs' sizes; one whose symbolic trace would
    put two library operations in one region (sizes crossing regions) is too."""
    from kernelwright.tasks.region_task import describe_region  # it imports this module

    t0 = time.perf_counter()
    inputs = list(inputs)
    leaves = leaf_modules(model)
    constants = constant_arguments(model, len(inputs))
    specialized = False
    try:
        graph, leaves = _trace(model, leaves, inputs, False)
    except Exception as exc:
        specialized = True
        try:
            graph, leaves = _trace(model, leaves, inputs, True)
        except Exception:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SplitError(
                f"torch.fx cannot trace {type(model).__name__}: {first}. Where its own forward decides Python"
                " code or sizes from its tensors' values (`if x.sum() > 0`, a loop over the rows an index"
                " selects), move that part into a submodule: a submodule that reads its data runs whole, in"
                " torch, and the rest is split"
            ) from exc
    result = next(n for n in graph.nodes if n.op == "output").args[0]
    # checked before any region is searched (a dict result is fx's immutable_dict)
    plain_dict = isinstance(result, dict) and all(type(k) is str for k in result)
    if not (isinstance(result, fx.Node | tuple | list) or plain_dict):
        kind = "dict with keys other than strings" if isinstance(result, dict) else type(result).__name__
        raise SplitError(
            f"{type(model).__name__}.forward returns a {kind}: the judge compares a tensor, a tuple/list of "
            "tensors or a dict of them with string keys (return one of those, or wrap the model in one that "
            "does)"
        )
    if measure:
        values = _record(model, graph, tuple(inputs))
    else:
        values = _fake_values(graph) if specialized else _propagate(model, graph, inputs)
    groups = _cut(graph, model, values)
    if not specialized and any(sum(is_library(n, model) for n in g) > 1 for g in groups):
        try:
            special, special_leaves = _trace(model, leaves, inputs, True)
        except Exception:
            pass  # the symbolic trace's regions stand
        else:
            graph, leaves, specialized = special, special_leaves, True
            values = _record(model, graph, tuple(inputs)) if measure else _fake_values(graph)
            groups = _cut(graph, model, values)
    groups = _peel_shared_views(groups, model, values)
    if specialized:  # views whose sizes their region's inputs do not give run between the regions
        groups = peel_sizes(groups, values, lambda n: layout_only([n], model))
    written = set(getattr(graph, "_kw_writes", {}).values())
    regions = []
    for i, group in enumerate(groups):
        names = [n.name for n in group]
        inside = set(names)
        inputs_: list[str] = []
        for n in group:
            for a in n.all_input_nodes:
                if a.name not in inside and a.op != "get_attr" and a.name not in inputs_:
                    inputs_.append(a.name)
        outputs = [n.name for n in group if n.name in written or any(u.name not in inside for u in n.users)]
        lib = next((_op_name(n, model) for n in group if is_library(n, model)), "")
        region = Region(i, names, inputs_, outputs, lib, _shown_ops([_op_name(n, model) for n in group]))
        if specialized:
            region.sizes = derive_sizes(group, inputs_, values)
        region.fingerprint = region_fingerprint(graph, names, region.sizes)
        describe_region(region, group, model, values)
        regions.append(region)
    used = {getattr(n.target, "__module__", "") or "" for n in graph.nodes if n.op == "call_function"}
    wrap = [m.__name__ for m in wrapped_modules() if any(u.split(".")[0] == m.__name__ for u in used)]
    seconds = time.perf_counter() - t0
    return ModelSplit(
        graph, leaves, regions, values, seconds, len(inputs), specialized, measure, constants, wrap
    )


# -- a region as source ------------------------------------------------------------------------------

_NAMESPACES: list[tuple[str, Any]] = [("torch", torch), ("F", F), ("operator", operator), ("math", math),
                                      ("torch.Tensor", torch.Tensor)]  # fmt: skip
for _name in WRAPPED_MODULES:  # functions the tracer records whole (einops), where installed
    try:
        _NAMESPACES.append((_name, importlib.import_module(_name)))
    except ImportError:
        pass


def function_source(target: Any) -> str:
    name = getattr(target, "__name__", "")
    for prefix, ns in _NAMESPACES:
        if name and getattr(ns, name, None) is target:
            return f"{prefix}.{name}"
    if target is getattr:
        return "getattr"
    raise SplitError(f"no source for function {target!r}")
