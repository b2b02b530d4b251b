"""Running a model's traced graph region by region, with some regions swapped for kernels.

This module is self-contained on purpose (torch only, no kernelwright import): its source is copied
verbatim into every stitched model file (tasks/region_stitch.py), which the judge loads as a candidate
and which may not import the agent's packages; the split (tasks/regions.py) and the torch.compile
backend (graphs/backend.py) import it, so the tracer's leaf rule, the node names and the way a region is
executed are the same in all three places.
"""

from __future__ import annotations

import os
import threading
from functools import partial
from typing import Any

import torch
import torch.fx as fx
from torch import nn
from torch.overrides import TorchFunctionMode

# Library operations a region is built around (the rest are pointwise, reduction, norm and layout ops).
LIBRARY_MODULES: tuple[type[nn.Module], ...] = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    nn.Linear,
    nn.Bilinear,
    nn.RNNBase,
)
LIBRARY_NAMES = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "linear",
        "matmul",
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "einsum",
        "scaled_dot_product_attention",
        "multi_head_attention_forward",
    }  # fmt: skip
)


# What a specialized trace reads as constants. The device too (a factory call with `device=x.device` runs
# while tracing): the stitched model traces again per input device, and a region's task names its inputs'
# device instead (tasks/region_task.py _literal).
_SHAPE_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "get_device", "element_size",
                            "is_floating_point", "is_complex", "is_contiguous"})  # fmt: skip
_SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "layout", "is_sparse"})
WRAPPED_MODULES = ("einops",)
"""Libraries whose functions are recorded as one call each (they check their arguments' types, so a
traced proxy cannot pass through them), where installed."""


UNKNOWN = type("Unknown", (), {"__repr__": lambda self: "<unknown without data>"})()
"""The example value of what a module kept whole (data-dependent) produced, and of all that follows."""


class SizeInt(int):
    """A size a specialized trace read (`x.shape[1]`, `H * W`), remembering where it came from: `origin` is
    ["dim", node name, d] or arithmetic on such (["mul", a, b], ["const", 3], ...). It is an int to the
    python code that reads it; a region whose operators take it writes it as its input's size instead of
    the number (tasks/region_sizes.py), so that region's kernel applies at other sizes."""

    origin: Any

    def __new__(cls, value: int, origin: Any) -> "SizeInt":  # noqa: UP037 - copied without __future__
        self = super().__new__(cls, value)
        self.origin = origin
        return self

    __repr__ = int.__repr__
    __str__ = int.__repr__

    def __reduce__(self) -> Any:  # a copy is the number alone
        return (int, (int(self),))

    def _arith(self, other: Any, op: str, swap: bool) -> Any:
        fn = getattr(int, f"__{'r' if swap else ''}{op}__")
        value = fn(int(self), other)
        if value is NotImplemented or isinstance(other, bool) or not isinstance(other, int):
            return value
        theirs = other.origin if isinstance(other, SizeInt) else ["const", int(other)]
        return SizeInt(value, [op, theirs, self.origin] if swap else [op, self.origin, theirs])


for _op in ("mul", "add", "sub", "floordiv"):  # arithmetic on sizes keeps where they came from
    setattr(SizeInt, f"__{_op}__", lambda self, o, _op=_op: self._arith(o, _op, False))
    setattr(SizeInt, f"__r{_op}__", lambda self, o, _op=_op: self._arith(o, _op, True))


def _sized(value: Any, source: Any, what: str, dims: tuple[Any, ...]) -> Any:
    """A shape or size the trace answers with, its numbers SizeInts of the traced value `source`."""
    if not isinstance(source, fx.Proxy) or what not in ("shape", "size"):
        return value
    name = source.node.name
    if isinstance(value, torch.Size):
        return torch.Size([SizeInt(v, ["dim", name, i]) for i, v in enumerate(value)])
    if isinstance(value, int) and len(dims) == 1 and isinstance(dims[0], int):
        rank = len(source.tracer.known(source).shape)  # type: ignore[attr-defined]
        return SizeInt(value, ["dim", name, dims[0] % max(rank, 1)])
    return value


class _Mode:
    """A traced-through module's `training` while it is traced: true or false as the module's mode, so `if
    self.training:` takes its branch, but passed to a random operator (a dropout with p > 0) it becomes a
    read of the module's mode in the graph, so the model's call in either mode draws as its forward would
    (elsewhere it is the constant it was)."""

    def __init__(self, path: str, value: bool) -> None:
        self.path, self.value = path, bool(value)

    def __bool__(self) -> bool:
        return self.value

    def __eq__(self, other: object) -> bool:
        return self.value == other

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


_DROPOUT_FUNCTIONS = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                "feature_alpha_dropout", "feature_dropout"})  # fmt: skip


def random_call(name: str, args: Any, kwargs: Any) -> bool:
    """Whether a call of the function or method `name` with these arguments draws random numbers in
    training mode: a dropout with p > 0, attention with dropout_p > 0."""
    if name in _DROPOUT_FUNCTIONS:
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    elif name == "multi_head_attention_forward":
        p = kwargs.get("dropout_p", args[10] if len(args) > 10 else 0.0)
    else:
        return False
    return not isinstance(p, int | float) or p > 0


class _ExampleProxy(fx.Proxy):
    """A proxy that answers size, device and dtype questions from the value it had on the example inputs
    (a specialized trace), so python code that reads them (a loop over a sequence length, a slice to a
    size, a device check) runs as it did."""

    def __getattr__(self, k: str) -> Any:
        tracer = self.tracer
        if k in _SHAPE_ATTRS and isinstance(tracer, RegionTracer) and tracer.example is not None:
            return _sized(getattr(tracer.known(self), k), self, k, ())
        return super().__getattr__(k)

    def __len__(self) -> int:
        tracer = self.tracer
        if isinstance(tracer, RegionTracer) and tracer.example is not None:
            return len(tracer.known(self))
        return super().__len__()


class RegionTracer(fx.Tracer):
    """torch.fx tracing that keeps the named modules in `leaves` whole (torch.nn modules that can be
    written back as constructor source: tasks/regions.py picks them, and modules fx cannot follow) and
    traces through the rest (the user's blocks, containers). Buffers are graph nodes where they are read
    (a buffer sliced to a traced size is then sliced in the graph). With `example` (fake tensors of the
    inputs), every node's value on them is computed as it is traced (`values`) and sizes are constants."""

    def __init__(
        self, leaves: set[str], example: list[Any] | None = None, wrap: tuple[Any, ...] = ()
    ) -> None:
        import math

        super().__init__(autowrap_modules=(math, *wrap))  # type: ignore[arg-type]
        self.leaves = leaves
        self.proxy_buffer_attributes = True
        self.example = example
        self.values: dict[str, Any] = {}
        self._fake: Any = None
        self._placeholders = 0
        if example is not None:
            self.example, self._fake = fake_inputs(example)

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return module_qualified_name in self.leaves

    def proxy(self, node: fx.Node) -> fx.Proxy:
        return _ExampleProxy(node, self)

    def value_of(self, a: Any) -> Any:
        if isinstance(a, fx.Proxy):
            a = a.node
        if isinstance(a, fx.Node):
            if a.name not in self.values and a.op == "get_attr":
                self.values[a.name] = self._compute(a)
            value = self.values[a.name]
            return value.value if isinstance(value, _Mode) else value
        return a

    def known(self, a: Any) -> Any:
        """The example value a python question is answered from (one not known cannot be traced)."""
        value = self.value_of(a)
        if value is UNKNOWN:
            raise fx.proxy.TraceError("a value that depends on a module kept whole decides python code")
        return value

    def create_proxy(self, kind: str, target: Any, args: Any, kwargs: Any, *rest: Any, **more: Any) -> Any:
        modes: list[_Mode] = []
        fx.node.map_aggregate((args, kwargs), lambda v: modes.append(v) if isinstance(v, _Mode) else v)
        if modes:  # a module's mode as an argument: read where the call draws random numbers, else constant
            name = getattr(target, "__name__", str(target))
            live = kind in ("call_function", "call_method") and random_call(name, args, kwargs)

            def mode(v: Any) -> Any:
                if not isinstance(v, _Mode):
                    return v
                return (
                    self.create_proxy("get_attr", f"{v.path}.training" if v.path else "training", (), {})
                    if live
                    else v.value
                )

            args, kwargs = fx.node.map_aggregate((args, kwargs), mode)
        if self.example is None:
            return super().create_proxy(kind, target, args, kwargs, *rest, **more)
        if kind == "call_method" and target in _SHAPE_METHODS:
            a, kw = fx.node.map_aggregate((args, kwargs), self.known)
            return _sized(getattr(a[0], target)(*a[1:], **kw), args[0], target, tuple(a[1:]))
        if kind == "call_function" and target is getattr and args[1] in _SHAPE_ATTRS:
            return _sized(getattr(self.known(args[0]), args[1]), args[0], args[1], ())
        proxy = super().create_proxy(kind, target, args, kwargs, *rest, **more)
        node = proxy.node
        if kind == "placeholder":
            i = self._placeholders
            self._placeholders += 1
            self.values[node.name] = self.example[i] if i < len(self.example) else None
            return proxy
        self.values[node.name] = self._compute(node)
        return proxy

    def _compute(self, node: fx.Node) -> Any:
        """The node's value on the fake inputs, computed with fx's patches of nn.Module lifted (a leaf
        module's forward runs as itself, its parameters real tensors, not proxies)."""
        from torch.fx._symbolic_trace import _maybe_revert_all_patches

        with _maybe_revert_all_patches():
            a, kw = fx.node.map_arg((node.args, node.kwargs), self.value_of)
            unknown = []
            fx.node.map_aggregate((a, kw), lambda v: unknown.append(v) if v is UNKNOWN else v)
            if unknown:
                return UNKNOWN
            try:
                with self._fake:
                    return fake_run_node(self.root, node, a, kw)
            except Exception:
                if node.op != "call_module":
                    raise
                # a module kept whole because its forward reads its input's data: its value is not known
                # without data; only asking a python question about it fails
                return UNKNOWN

    def to_bool(self, obj: fx.Proxy) -> bool:
        value = self.known(obj) if self.example is not None else None
        if self.example is None or isinstance(value, torch.Tensor):
            return super().to_bool(obj)  # a tensor's data: not known while tracing
        return bool(value)

    def iter(self, obj: fx.Proxy) -> Any:
        if self.example is None:
            return super().iter(obj)
        value = self.known(obj)
        return iter([obj[i] for i in range(len(value))])  # type: ignore[index]


def fake_inputs(inputs: list[Any]) -> tuple[list[Any], Any]:
    """Fake copies of tensor inputs (shape, dtype, device; no data), and their fake mode."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    mode = next((t.fake_mode for t in inputs if isinstance(t, FakeTensor)), None)
    mode = mode or FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        return [_fake(t) for t in inputs], mode


def _fake(value: Any) -> Any:
    """A real tensor's fake twin, made from its sizes (inside a fake mode): never from its storage, which
    may be memory the fake mode cannot convert (the judge's shared tensors)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
        return torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype,
                                   device=value.device)  # fmt: skip
    return value


def trace(
    model: nn.Module,
    leaves: set[str],
    constant_args: dict[str, Any] | None = None,
    example: list[Any] | None = None,
    wrap: tuple[Any, ...] = (),
) -> fx.Graph:
    """The model's forward as an FX graph (its node names are what a region plan refers to).

    `constant_args`: forward arguments not given -> their defaults, constants of the graph (so
    `if h0 is None` takes its branch, and `x * scale` reads the default scale). `example`: trace specialized on these inputs (see RegionTracer).
    `wrap`: modules whose functions are recorded as one node each (einops; the split picks them).
    Attributes the forward assigns (`self.hidden = ...`) are restored after the trace and listed in
    `graph._kw_writes` (attribute path -> node), so the plan assigns them as the forward did."""
    concrete = dict(constant_args or {})
    saved = {(path, k): v for path, m in model.named_modules() for k, v in vars(m).items()
             if not k.startswith("_")}  # fmt: skip
    tracer = RegionTracer(leaves, example, wrap)
    writes: dict[str, str] = {}
    for path, m in model.named_modules():  # the modules traced through; restored below with the rest
        kept_whole = any(path == leaf or path.startswith(leaf + ".") for leaf in leaves)
        if not kept_whole and isinstance(m.__dict__.get("training"), bool):
            m.__dict__["training"] = _Mode(path, m.training)
    # a parameter or buffer the forward reassigns (`self.steps += 1` on a buffer: fx's add, then the buffer
    # set to its proxy) is put back too, and assigned as a write: left a proxy, it grew the graph it was run in
    tables = {(path, name, k): v for path, m in model.named_modules() for name in ("_parameters", "_buffers")
              for k, v in getattr(m, name).items()}  # fmt: skip
    try:
        graph = tracer.trace(model, concrete_args=concrete or None)
    finally:
        for path, m in model.named_modules():
            for name in ("_parameters", "_buffers"):
                table = getattr(m, name)
                for k, v in list(table.items()):
                    if (path, name, k) in tables and tables[(path, name, k)] is v:
                        continue
                    if isinstance(v, fx.Proxy):
                        writes[f"{path}.{k}" if path else k] = v.node.name
                    if (path, name, k) in tables:
                        table[k] = tables[(path, name, k)]
                    else:
                        del table[k]
            for k, v in list(vars(m).items()):
                if k.startswith("_") or (path, k) in saved and saved[(path, k)] is v:
                    continue
                if isinstance(v, fx.Proxy):
                    writes[f"{path}.{k}" if path else k] = v.node.name
                if (path, k) in saved:
                    m.__dict__[k] = saved[(path, k)]
                else:
                    del m.__dict__[k]
    for node in reversed(list(graph.nodes)):  # fx's checks of the constant defaults: not the model's work
        specialized = node.target is torch._assert and "has been specialized to have value" in str(
            node.args[1:]
        )
        if (
            specialized
            or node.op == "call_function"
            and getattr(node.target, "__name__", "") == "_assert_is_none"
        ):
            check = node.args[0] if specialized else None
            graph.erase_node(node)
            if isinstance(check, fx.Node) and not check.users:
                graph.erase_node(check)  # the `==` the check read
    graph._kw_writes = writes  # type: ignore[attr-defined]
    graph._kw_values = tracer.values  # type: ignore[attr-defined]
    return graph


def replace_ints(value: Any, fn: Any) -> Any:
    """`value` (a node's args and kwargs) with its k-th int (bools aside, in order) replaced by
    `fn(k, number, in_slice)`; tuples, lists, dicts and slices rebuilt around them."""
    count = [0]

    def walk(x: Any, in_slice: bool) -> Any:
        if isinstance(x, bool) or isinstance(x, fx.Node):
            return x
        if isinstance(x, int):
            count[0] += 1
            return fn(count[0] - 1, x, in_slice)
        if isinstance(x, slice):
            return slice(walk(x.start, True), walk(x.stop, True), walk(x.step, True))
        if isinstance(x, (tuple, list)):
            items = [walk(v, in_slice) for v in x]
            return items if isinstance(x, list) else tuple(items)
        if isinstance(x, dict):
            return {k: walk(v, in_slice) for k, v in x.items()}
        return x

    return walk(value, False)


class SizeExpr:
    """A size written as what it is computed from (in a fingerprint: the same text at any sizes)."""

    def __init__(self, expr: Any) -> None:
        self.expr = expr

    def __repr__(self) -> str:
        return f"<size {self.expr!r}>"


def size_value(expr: Any, values: dict[str, Any]) -> int:
    """A size expression (tasks/region_sizes.py) evaluated on a trace's values."""
    op = expr[0]
    if op == "dim":
        return int(values[expr[1]].shape[expr[2]])
    if op == "const":
        return int(expr[1])
    a, b = size_value(expr[1], values), size_value(expr[2], values)
    return {"mul": a * b, "add": a + b, "sub": a - b}[op] if op != "floordiv" else a // b


def region_fingerprint(graph: fx.Graph, names: list[str], sizes: dict[str, Any] | None = None) -> str:
    """What a region computes in this trace (operators, targets, literal arguments): a region's kernel
    is used only where this is what it was cut with. `sizes`: node -> {k: expression} for its k-th int
    argument that is a size of the region's values (the expression, not the number, is what counts;
    `sizes_hold` checks the numbers)."""
    import hashlib

    nodes = {n.name: n for n in graph.nodes}
    parts = []
    for name in names:
        node = nodes.get(name)
        if node is None:
            return "missing"
        args, kwargs = node.args, node.kwargs
        mine = (sizes or {}).get(name)
        if mine:
            args, kwargs = replace_ints((args, kwargs), lambda k, v, _s, m=mine: SizeExpr(m[str(k)])
                                        if str(k) in m else v)  # fmt: skip
        parts.append(f"{node.op}|{getattr(node.target, '__name__', node.target)}|{args!r}|{kwargs!r}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def sizes_hold(graph: fx.Graph, sizes: dict[str, Any]) -> bool:
    """Whether every size a region writes as an expression is, in this trace, that expression's value on
    this trace's values (a specialized trace computes them: graph._kw_values)."""
    if not sizes:
        return True
    values = getattr(graph, "_kw_values", None) or {}
    nodes = {n.name: n for n in graph.nodes}
    try:
        for name, mine in sizes.items():
            seen: dict[str, int] = {}
            replace_ints(
                (nodes[name].args, nodes[name].kwargs), lambda k, v, _s, d=seen: d.setdefault(str(k), v)
            )
            if any(k not in seen or size_value(e, values) != seen[k] for k, e in mine.items()):
                return False
    except Exception:  # a value not known without data, a node not in this trace
        return False
    return True


def _attribute(obj: Any, name: str) -> Any:
    """`getattr(obj, name)`, reading a module's submodule, parameter or buffer from its own tables first:
    nn.Module.__getattr__ looks there only after python's lookup fails, about 0.7 us a step, and a path
    like `layer1.0.bn1.weight` takes four."""
    state = getattr(obj, "__dict__", None)
    if state is not None and name not in state:
        for table in ("_modules", "_parameters", "_buffers"):
            found = state.get(table)
            if found is not None and name in found:
                return found[name]
    return getattr(obj, name)


def fetch(root: nn.Module, path: str) -> Any:
    obj: Any = root
    for part in path.split("."):
        obj = _attribute(obj, part)
    return obj


def kernel_slot(kernel: nn.Module, local: str, value: Any = None) -> tuple[dict[str, Any], str]:
    """(the table, the name in it) where a binding's kernel-local name `local` ("m0", "m0.weight", "p0")
    puts the model's value: its owner's submodules (a module: the model's own, with its attributes at the
    model's sizes), parameters or buffers."""
    owner_path, _, name = local.rpartition(".")
    owner = fetch(kernel, owner_path) if owner_path else kernel
    if isinstance(value, nn.Module) or name in owner._modules:
        return owner._modules, name
    return (owner._parameters if name in owner._parameters else owner._buffers), name


def new_kernel(kernel_class: Any, init: Any) -> nn.Module:
    """A region's kernel built with `init` (the region task's `get_init_inputs()`: its modules' sizes), or with
    nothing for a kernel written for a task file that took nothing (memory may hold one from before)."""
    try:
        return kernel_class(*init)
    except TypeError:
        if not init:
            raise
        return kernel_class()


def build_kernel(kernel_class: Any, bindings: dict[str, str], root: nn.Module, init: Any = ()) -> nn.Module:
    """A region's kernel module whose parameters and buffers are the model's own from the start.

    `init`: what the region task's `get_init_inputs()` returns (its modules' sizes). A kernel written for a
    task file of before (whose `Model()` took nothing; memory may hold one) is built without them.

    Built as it is, a kernel makes and initialises its own copy of every weight of its region at the size
    the region was cut at (a whole model's weights again: 3 GB for level3/1_MLP, and what the judge's
    memory cap kills at a smaller size). Built on the meta device instead, with each module and tensor that
    `bindings` names (kernel-local name -> the model's attribute path) then replaced by the model's, it
    holds nothing of its own, and its modules' attributes (a convolution's groups) are the model's at the
    model's size. A kernel that keeps any other tensor (one it makes in its constructor) is built as it is
    (its modules and tensors are then bound before each call, RegionPlan.kernel_step)."""
    with torch.device("meta"):
        kernel = new_kernel(kernel_class, init)
    for local, path in bindings.items():
        value: Any = root
        for part in path.split("."):  # a constant the trace lifts onto the model is not there yet
            value = getattr(value, part, None)
        if isinstance(value, (torch.Tensor, nn.Module)):
            table, name = kernel_slot(kernel, local, value)
            table[name] = value
    for module in kernel.modules():
        held = [*module._parameters.values(), *module._buffers.values(), *vars(module).values()]
        if any(isinstance(t, torch.Tensor) and t.is_meta for t in held):
            return new_kernel(kernel_class, init)
    return kernel


class RegionPlan:
    """A traced graph cut into regions; `run` executes it, calling a kernel module for each region that
    has one (its parameters and buffers bound to the model's own before each call) and the graph's
    torch operations for the rest."""

    def __init__(
        self, graph: fx.Graph, regions: list[dict[str, Any]], replay: tuple[Any, dict[str, Any]] | None = None
    ) -> None:
        self.graph = graph
        # (the indices of the regions whose launches may be replayed, the namespace their launchers are in):
        # see LaunchReplay
        self.replay = replay
        self.replay_namespaces: dict[int, dict[str, Any]] = (
            dict.fromkeys(replay[0], replay[1]) if replay else {}
        )
        """Region -> the namespace its kernel's launchers are in, for each region whose launches may be
        replayed: `replay`'s, or a module of the kernel's own (the torch.compile backend's: `replay_kernel`)."""
        self.replays: dict[int, LaunchReplay] = {}
        self.nodes = {n.name: n for n in graph.nodes}
        self.regions = regions
        self.kernels: dict[int, nn.Module] = {}
        self.writes: dict[str, str] = getattr(graph, "_kw_writes", {})
        self._compiled: _CompiledPlan | None = None
        self.model_replay: "ModelReplay | None" = None  # noqa: UP037 - copied without __future__
        # a region's kernel runs only where the region computes what it was cut with (a specialized
        # trace at other sizes can have other literal sizes in it)
        self.matches = [
            r.get("fingerprint") in (None, region_fingerprint(graph, r["nodes"], r.get("sizes")))
            and sizes_hold(graph, r.get("sizes") or {})
            for r in regions
        ]
        # a region some of whose nodes this trace does not have (the model was built with other arguments:
        # ShuffleNet's shortcut is an empty Sequential where its channels are equal) is no region here: its
        # nodes this trace has run as the graph's own
        placed = [all(name in self.nodes for name in r["nodes"]) for r in regions]
        in_region = {name for r, ok in zip(regions, placed, strict=True) if ok for name in r["nodes"]}
        # attribute fetches first: the tracer puts them where first used, which can be inside a region's
        # span of nodes while not one of its nodes
        self.steps: list[tuple[str, Any]] = [
            ("node", n) for n in graph.nodes if n.op == "get_attr" and n.name not in in_region
        ]
        first_of = {r["nodes"][0]: i for i, r in enumerate(regions) if r["nodes"] and placed[i]}
        ordered: list[tuple[str, Any]] = []
        for n in graph.nodes:
            if n.op == "get_attr" and n.name not in in_region:
                continue
            if n.name in first_of:
                ordered.append(("region", first_of[n.name]))
            elif n.name not in in_region:
                ordered.append(("node", n))
        self.steps += self._ready_order(ordered, {n for _, n in self.steps})

    def _ready_order(self, ordered: list[tuple[str, Any]], done: set[Any]) -> list[tuple[str, Any]]:
        """The steps in graph order, each held back until what it reads is computed: a node the split
        left outside every region (`cos[:s]` of a buffer) can stand inside a region's span of nodes, after
        the region's first node, and the region reads it."""
        ready = {n.name for n in done}
        out: list[tuple[str, Any]] = []
        waiting: list[tuple[str, Any]] = []

        def needs(step: tuple[str, Any]) -> set[str]:
            kind, item = step
            if kind == "region":
                return set(self.regions[item]["inputs"])
            return {a.name for a in item.all_input_nodes}

        def made(step: tuple[str, Any]) -> list[str]:
            kind, item = step
            return list(self.regions[item]["nodes"]) if kind == "region" else [item.name]

        for step in ordered:
            waiting.append(step)
            progress = True
            while progress:
                progress = False
                for w in list(waiting):
                    if needs(w) <= ready:
                        waiting.remove(w)
                        out.append(w)
                        ready.update(made(w))
                        progress = True
                        break
        return out + waiting  # anything never ready fails where it runs, with its missing value's name

    @staticmethod
    def run_node(
        root: nn.Module, node: fx.Node, env: dict[str, Any], args: Any = None, kwargs: Any = None
    ) -> Any:
        if args is None:
            args = fx.node.map_arg(node.args, lambda a: env[a.name])
            kwargs = fx.node.map_arg(node.kwargs, lambda a: env[a.name])
        if node.op == "get_attr":
            return fetch(root, str(node.target))
        if node.op == "call_module":
            return root.get_submodule(str(node.target))(*args, **kwargs)
        if node.op == "call_function":
            return node.target(*args, **kwargs)  # type: ignore[operator]
        if node.op == "call_method":
            return getattr(args[0], str(node.target))(*args[1:], **kwargs)
        raise RuntimeError(f"cannot run FX node {node.op} {node.target}")

    def attach(self, index: int, kernel: nn.Module) -> None:
        self.kernels[index] = kernel
        self._compiled = None
        self.model_replay = None

    def replay_kernel(self, index: int, namespace: dict[str, Any]) -> None:
        """Region `index`'s kernel calls replayed (LaunchReplay) through the launchers in `namespace`, the
        module its program was loaded as: for a program that launches only through `_kw_launch`
        (tasks/region_stitch.py `replayable`)."""
        self.replay_namespaces[index] = namespace

    def kernel_step(self, index: int) -> Any:
        """A function `(root, env) -> None` that runs region `index`'s kernel: the model's modules,
        parameters and buffers bound to it, its mode matched to the model's, its outputs put in `env`."""
        region = self.regions[index]
        kernel = self.kernels[index]
        # (the kernel's table the value goes in, its name there, where the model keeps it): the kernel's
        # own modules are found once; the model's modules and tensors are read on every call and put in the
        # kernel's tables only where they are not already there. A module bound whole brings its tensors
        # with it: their own bindings would only look up what is already in place.
        whole = {local for local in region["bindings"] if local in kernel._modules}
        bindings = [
            (*kernel_slot(kernel, local), _path_getter(path), path)
            for local, path in region["bindings"].items()
            if local.partition(".")[0] not in whole or "." not in local
        ]
        inputs, outputs = list(region["inputs"]), list(region["outputs"])
        single = outputs[0] if len(outputs) == 1 else None
        # a tensor the model keeps as a plain attribute (`self.hidden = torch.randn(...)`, not a buffer)
        # stays where it was made when the model moves; the region's task holds it as a buffer, which
        # moves with its module, and its program has dropped the forward's `.to(x.device)` (a no-op where
        # it was traced). Such a tensor is moved to the device of the region's first tensor input. Which
        # bindings those are is found on the first call, from the model itself.
        split: list[tuple[list[Any], list[Any]]] = []
        call: Any = kernel
        namespace = self.replay_namespaces.get(index)
        if namespace is not None and REPLAY:
            call = self.replays[index] = LaunchReplay(kernel, namespace)

        def step(root: Any, env: dict[str, Any]) -> None:
            if not split:
                plain = [_plain_attribute(root, b[3]) for b in bindings]
                split.append(([b[:3] for b, p in zip(bindings, plain, strict=True) if not p],
                              [b[:3] for b, p in zip(bindings, plain, strict=True) if p]))  # fmt: skip
            fixed, moved = split[0]
            for table, name, get in fixed:
                value = get(root)
                if table.get(name) is not value:
                    table[name] = value
            if moved:
                device = next((env[n].device for n in inputs if isinstance(env[n], torch.Tensor)), None)
                for table, name, get in moved:
                    value = get(root)
                    table[name] = value if device is None else value.to(device)
            if kernel.training != root.training:
                kernel.train(root.training)
            out = call(*[env[name] for name in inputs])
            if single is not None:
                env[single] = out
            else:
                for name, value in zip(outputs, out, strict=True):
                    env[name] = value

        return step

    def run(self, root: nn.Module, inputs: tuple[Any, ...]) -> Any:
        """The model's forward on `inputs`, through the steps made into functions once per plan (again
        after `attach`): see _CompiledPlan."""
        if self._compiled is None:
            self._compiled = _CompiledPlan(self)
            self.model_replay = self._model_replay()
        if self.model_replay is not None:
            return self.model_replay.call(root, inputs)
        return self._compiled(root, inputs)

    def _model_replay(self) -> "ModelReplay | None":  # noqa: UP037 - copied without __future__
        """A replay of the whole forward (ModelReplay) where every region that runs a kernel may be
        replayed (its launches go through `_kw_launch`, which the recording sees) and the forward assigns
        no attribute (a replay would not)."""
        running = [i for i in range(len(self.regions)) if self.kernel_ran(i)]
        if self.replay is None or not (REPLAY and MODEL_REPLAY) or self.writes or not running:
            return None
        if not all(i in self.replay[0] for i in running):
            return None
        return ModelReplay(self, self.replay[1])

    def kernel_ran(self, index: int) -> bool:
        """Whether region `index` runs its kernel (it has one, and the region computes what it was cut with)."""
        return self.matches[index] and index in self.kernels


def _has_node(value: Any) -> bool:
    found: list[fx.Node] = []

    def note(n: fx.Node) -> fx.Node:
        found.append(n)
        return n

    fx.node.map_arg(value, note)
    return bool(found)


def _builder(value: Any) -> Any:
    """A function `env -> value` with the graph's nodes in `value` replaced by their values in `env`
    (containers rebuilt, as fx's map_arg does), or None where `value` holds no node (it is passed as it
    is: fx keeps a node's list arguments as immutable lists, so no call can change another's)."""
    import operator

    if isinstance(value, fx.Node):
        return operator.itemgetter(value.name)
    if not _has_node(value):
        return None
    if isinstance(value, slice):
        parts = [(_builder(x), x) for x in (value.start, value.stop, value.step)]
        return lambda env: slice(*[b(env) if b else x for b, x in parts])
    if isinstance(value, dict):
        items = [(k, _builder(v), v) for k, v in value.items()]
        return lambda env: {k: b(env) if b else v for k, b, v in items}
    template = list(value)
    slots = [(i, b) for i, b in ((i, _builder(x)) for i, x in enumerate(template)) if b is not None]

    def build(env: dict[str, Any]) -> list[Any]:
        out = template.copy()
        for i, b in slots:
            out[i] = b(env)
        return out

    if isinstance(value, list):
        return build
    if hasattr(value, "_fields"):  # a named tuple
        kind = type(value)
        return lambda env: kind(*build(env))
    return lambda env: tuple(build(env))


def _plain_attribute(root: nn.Module, path: str) -> bool:
    """Whether `path` names a tensor its owner keeps as a plain attribute, not a parameter or buffer."""
    owner_path, _, name = path.rpartition(".")
    try:
        owner = fetch(root, owner_path) if owner_path else root
    except AttributeError:
        return False
    if not isinstance(owner, nn.Module) or name in owner._parameters or name in owner._buffers:
        return False
    return isinstance(owner.__dict__.get(name), torch.Tensor)


def _path_getter(path: str) -> Any:
    """A function `root -> root.a.b` for the attribute path "a.b", read on every call (a module replaced,
    a buffer moved to another device: the model's own, as its forward would read them)."""
    parts = path.split(".")
    if len(parts) == 1:
        name = parts[0]
        return lambda root: _attribute(root, name)

    def get(root: Any) -> Any:
        for part in parts:
            root = _attribute(root, part)
        return root

    return get


REPLAY = os.environ.get("KERNELWRIGHT_REPLAY", "1") != "0"
"""KERNELWRIGHT_REPLAY=0: every region's kernel runs its own forward on every call (see LaunchReplay)."""
_ALLOCATIONS = frozenset({"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided"})
_VIEWS = frozenset(
    """view view_as reshape permute unsqueeze squeeze expand expand_as as_strided transpose t __getitem__
    unflatten flatten narrow select movedim contiguous unbind split chunk detach""".split()
)
_READS = frozenset(
    """size stride dim ndimension numel nelement element_size data_ptr get_device is_contiguous storage_offset
    is_floating_point is_complex untyped_storage __len__ __get__ __hash__""".split()
)
_PLAIN = (int, float, bool, str, type(None), torch.dtype)
_RECORDING = threading.Lock()
_MODEL_RECORDING = threading.local()
"""`.on` while this thread records a whole model's call (ModelReplay)."""
_AUTOCAST_ON = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)
"""Whether autocast is on for any device (a torch without the query: always, so nothing is replayed)."""
MODEL_REPLAY = os.environ.get("KERNELWRIGHT_MODEL_REPLAY", "1") != "0"
"""KERNELWRIGHT_MODEL_REPLAY=0: a stitched model's forward is replayed region by region only (ModelReplay)."""
REPLAY_ARENA = os.environ.get("KERNELWRIGHT_REPLAY_ARENA", "1") != "0"
"""KERNELWRIGHT_REPLAY_ARENA=0: a replay allocates its buffers each call, as the recorded call did (_Arena)."""
ARENA_MAX_BYTES = 1 << 30
"""The most one recipe's arena holds between calls; a recipe whose buffers need more allocates them each call."""


_DATA_SIZED = frozenset(
    """nonzero argwhere unique unique_consecutive masked_select bincount histc repeat_interleave
    nonzero_static""".split()
)
"""Operations whose output's size depends on the values of their inputs: a recorded call's sizes would not
hold for the next call's data (as would any Python value read from a tensor: `item`, `tolist`, `bool`)."""


class _NoReplay(Exception):
    pass


_ARG_OBJECTS = (*_PLAIN, torch.device, torch.layout, torch.memory_format)


class _Watch(TorchFunctionMode):
    """What a kernel's forward does with torch while its launches are recorded, made into a recipe as it
    goes (no tensor of the call is kept: a recording must not hold an attention's scores past their last
    use). It allocates (each buffer noted by sizes), reads sizes and takes views (each must be of the
    storage it was taken from), launches (`launch`) and computes (each call a step, in order with the
    launches, to be made again: a view that copied too); a computation whose output's size depends on
    data, or that returns anything but tensors, refuses the replay. A tensor argument is a slot: (kind,
    index, sizes, strides, offset, whole), a view of an allocated buffer (kind 0), an input (1) or a tensor
    a torch call made (2), found by its storage's address (the latest tensor made there: a freed one's
    address may be reused). Inside a launch (`passthrough`) everything is Triton's own."""

    def __init__(self, inputs: tuple[Any, ...]) -> None:
        super().__init__()
        self.where: dict[int, tuple[int, int, Any]] = {}
        """storage address -> (kind, index, (sizes, strides, offset, dtype, storage bytes) of the base)"""
        self.sizes: list[Any] = []  # the buffers to allocate: (sizes, strides, dtype, device)
        self.made = 0
        self.steps: list[tuple[Any, ...]] = []
        self.refused: str | None = None
        self.passthrough = False
        self.grad = torch.is_grad_enabled()
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                if x.untyped_storage().data_ptr() in self.where:
                    self.refused = "two inputs on one storage"
                self._register(x, 1, i)

    def _register(self, t: torch.Tensor, kind: int, index: int) -> None:
        storage = t.untyped_storage()
        if storage.data_ptr() == 0:
            self.refused = "an empty tensor"
        geometry = (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, storage.nbytes())
        self.where[storage.data_ptr()] = (kind, index, geometry)

    def slot(self, t: torch.Tensor) -> Any:
        storage = t.untyped_storage()
        found = self.where.get(storage.data_ptr())
        if found is None:
            return None  # the model's own tensor, or one a cache keeps: the same object each call
        kind, index, base = found
        if t.dtype != base[3] or storage.nbytes() != base[4]:
            raise _NoReplay  # another storage at a freed one's address, or a reinterpreted one
        geometry = (tuple(t.shape), tuple(t.stride()), t.storage_offset())
        return (kind, index, *geometry, geometry == base[:3])

    def template(self, value: Any, depth: int = 0) -> Any:
        """A torch call's argument with each tensor of ours as ("slot", slot); a list or tuple (cat's)
        one level deep."""
        if isinstance(value, torch.Tensor):
            s = self.slot(value)
            return value if s is None else ("slot", s)
        if isinstance(value, (list, tuple)) and depth == 0:
            return ("seq", type(value), [self.template(v, 1) for v in value])
        if (
            isinstance(value, _ARG_OBJECTS)
            or isinstance(value, (list, tuple))
            and all(isinstance(v, _PLAIN) for v in value)
        ):
            return ("value", value)
        raise _NoReplay  # a generator, a Python object the call may keep

    def launch(
        self, original: Any, kernel: Any, grid: Any, args: tuple[Any, ...], meta: dict[str, Any]
    ) -> Any:
        """Launch through `original`, noting the launch as a step."""
        step = None
        if not self.refused:
            try:
                slots, kept = [], list(args)
                for pos, a in enumerate(args):
                    if isinstance(a, torch.Tensor):
                        s = self.slot(a)
                        if s is not None:
                            slots.append((pos, s))
                            kept[pos] = None  # the recorded call's tensor is not kept
                    elif not isinstance(a, _PLAIN):
                        raise _NoReplay  # a descriptor or other object made per call
                if not all(isinstance(v, _PLAIN) for v in meta.values()):
                    raise _NoReplay
                step = ["launch", original, kernel, grid, tuple(kept), tuple(slots), meta, None]
                self.steps.append(step)  # type: ignore[arg-type]
            except _NoReplay:
                self.refused = "a launch argument"
        self.passthrough = True
        try:
            launched = original(kernel, grid, *args, **meta)
        finally:
            self.passthrough = False
        # what _kw_launch ran directly, (device, compiled kernel, later parameters, launch), is launched so
        # again (its key, from these arguments, is the same at every replay)
        if step is not None and isinstance(launched, tuple) and len(launched) == 4 and not callable(grid):
            step[7] = (launched[0], launched[3], (*grid, 1, 1)[:3])
        return launched

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if self.passthrough or self.refused or name in _READS:
            return out
        try:
            if name in _ALLOCATIONS and isinstance(out, torch.Tensor):
                self.sizes.append((tuple(out.shape), tuple(out.stride()), out.dtype, out.device))
                self._register(out, 0, len(self.sizes) - 1)
            elif name in _VIEWS and args and isinstance(args[0], torch.Tensor) and _views_of(out, args[0]):
                pass  # a view: a launch's argument taken from it is a slot of the storage
            elif name.rstrip("_") in _DATA_SIZED or not _tensors_only(out):
                self.refused = name or repr(func)
            else:
                step_args = [self.template(a) for a in args]
                step_kwargs = {k: self.template(v) for k, v in (kwargs or {}).items()}
                # which of its outputs are new tensors (not an argument's storage, as an in-place call's):
                # (position or None, index among those made)
                own = {t.untyped_storage().data_ptr() for t in _tensors_in((args, kwargs or {}))}
                made = []
                for pos, o in [(None, out)] if isinstance(out, torch.Tensor) else list(enumerate(out)):
                    if o.untyped_storage().data_ptr() not in own:
                        self._register(o, 2, self.made)
                        made.append((pos, self.made))
                        self.made += 1
                self.steps.append(("torch", func, step_args, step_kwargs, made))
        except _NoReplay:
            self.refused = f"{name} with an argument it may keep"
        return out

    def recipe(self, out: Any) -> Any:
        """(the buffers to allocate, the steps, the outputs as slots, the outputs' container: None for one
        tensor, else its type, how many tensors the torch calls make, per step the buffers to allocate
        before it, per step the buffers and made tensors to let go after it, the arena or None), or None.
        A buffer is allocated before the first step that reads or writes it and let go after the last (an
        output never): a whole model's replay holds what the recorded call held, not every intermediate at
        once. Where an arena is planned (_Arena), the buffers that are not outputs are its views instead."""
        if self.refused or not any(step[0] == "launch" for step in self.steps):
            return None
        if not _tensors_only(out):
            return None
        container = None if isinstance(out, torch.Tensor) else type(out)
        try:
            slots = [self.slot(o) or ("same", o) for o in ([out] if container is None else out)]
        except _NoReplay:
            return None
        steps = [tuple(step) for step in self.steps]
        kept = {s[:2] for s in slots if s[0] != "same"}
        first: dict[tuple[int, int], int] = {}
        last: dict[tuple[int, int], int] = {}
        for i, step in enumerate(steps):
            used = _step_slots(step) + ([(2, index) for _, index in step[4]] if step[0] == "torch" else [])
            for where in used:
                if where[0] != 1:
                    first.setdefault(where, i)
                    last[where] = i
        allocs: list[list[int]] = [[] for _ in steps]
        frees: list[list[tuple[int, int]]] = [[] for _ in steps]
        for (kind, index), i in first.items():
            if kind == 0:
                allocs[i].append(index)
        allocs[0] += [index for kind, index in kept if kind == 0 and (0, index) not in first]
        for where, i in last.items():
            if where not in kept:
                frees[i].append(where)
        # under grad a torch step may keep its inputs for backward: no buffer of the call is kept past it
        arena = _Arena.planned(self.sizes, first, last, kept) if REPLAY_ARENA and not self.grad else None
        return (self.sizes, steps, slots, container, self.made, [tuple(a) for a in allocs],
                [tuple(f) for f in frees], arena)  # fmt: skip


def _step_slots(step: tuple[Any, ...]) -> list[tuple[int, int]]:
    """(kind, index) of each tensor a recorded step reads or writes (see _Watch.slot)."""
    if step[0] == "launch":
        return [s[:2] for _, s in step[5]]
    found: list[tuple[int, int]] = []

    def note(v: Any) -> None:
        if isinstance(v, tuple) and v[0] == "slot":
            found.append(v[1][:2])
        elif isinstance(v, tuple) and v[0] == "seq":
            for x in v[2]:
                note(x)

    for v in [*step[2], *step[3].values()]:
        note(v)
    return found


def _tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    return []


def _views_of(out: Any, source: torch.Tensor) -> bool:
    """Whether every tensor `out` holds is on `source`'s storage (a reshape or contiguous may copy: then it
    is a computation)."""
    base = source.untyped_storage().data_ptr()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return all(isinstance(o, torch.Tensor) and o.untyped_storage().data_ptr() == base for o in outs)


def _tensors_only(out: Any) -> bool:
    if isinstance(out, torch.Tensor):
        return True
    return isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out)


class LaunchReplay:
    """A region kernel's calls, replayed: once a call with a key (its inputs' sizes, strides, dtypes,
    devices and alignment; every module's mode; every parameter's and buffer's address and version) has
    run (filling the caches a first call fills: packed weights, compiled kernels), the next call with that
    key runs the kernel's forward while recording what it does: the buffers it allocates, each launch
    through the program's `_kw_launch` (every launcher in `namespace` whose name ends so) and each torch
    computation between them (a concatenation, a pooling the program kept in torch, a copy). From then on
    a call with that key allocates the same buffers and makes the same launches and torch calls in the same
    order, each tensor argument the same view of the same buffer, input or earlier call's output, and
    returns the same views: what the forward computes in Python per call (sizes, strides, block sizes,
    grids: most of a stitched ResNet18's host time per convolution region under cProfile on an H100 host)
    is not computed again. A forward that launches nothing, reads a Python value from a tensor (`item`),
    makes a tensor whose size depends on data (`nonzero`), passes an argument that is not a tensor or a
    plain value (a TMA descriptor holds a buffer's address), or gives two inputs one storage is never
    replayed for that key; nor is a call under autocast. Only for programs that launch every kernel
    through `_kw_launch` (tasks/region_stitch.py `replayable`)."""

    refuse_hooks = False
    """Whether a forward hook on a module under the owner (not the owner's own) makes the call run its
    forward (ModelReplay: the modules kept in torch are called inside the replayed forward)."""

    def __init__(self, kernel: nn.Module | None, namespace: dict[str, Any]) -> None:
        self.kernel = kernel
        self.namespace = namespace
        self.seen: dict[Any, Any] = {}
        """key -> calls so far (an int), the recipe (a tuple), or False (never replayed)."""
        self.new_keys = 0
        """Calls in a row whose key was new; past 64 (`off`) the forward runs without a key: a model trained
        between calls, or one whose buffers a torch operation updates (a version each call)."""
        self.off = False

    def key(self, inputs: tuple[Any, ...], owner: Any = None) -> Any:
        """The call's key: its inputs' geometry, grad mode, and every module under `owner` (the kernel)
        with its mode and its tensors' addresses and versions."""
        if _AUTOCAST_ON():  # a recorded torch call would make another dtype under autocast: the forward
            raise _NoReplay
        parts: list[Any] = [torch.is_grad_enabled()]
        for x in inputs:
            if isinstance(x, torch.Tensor):
                parts += [x.shape, x.stride(), x.dtype, x.device, x.storage_offset(), x.data_ptr() % 16]
            else:
                parts.append(("value", x))
        # the modules as bound now: the model's own, which a user may have replaced since the last call
        # (walked through their tables: Module.modules() names every one, which cost more than the rest)
        root = self.kernel if owner is None else owner
        stack: list[Any] = [root]
        walked: set[int] = set()
        while stack:
            m = stack.pop()
            if m is None or id(m) in walked:
                continue
            walked.add(id(m))
            if self.refuse_hooks and m is not root and (m._forward_hooks or m._forward_pre_hooks):
                raise _NoReplay  # a hook's Python would not run again: the forward itself
            parts += [id(m), m.training]
            for table in (m._parameters, m._buffers):
                for t in table.values():
                    parts += [None, None] if t is None else [t.data_ptr(), t._version]
            stack += m._modules.values()
        return tuple(parts)

    def __call__(self, *inputs: Any) -> Any:
        return self.call(self.kernel, inputs)

    def forward(self, owner: Any, inputs: tuple[Any, ...]) -> Any:
        """What is replayed: the kernel's forward."""
        return owner(*inputs)

    def call(self, owner: Any, inputs: tuple[Any, ...]) -> Any:
        if self.off or getattr(_MODEL_RECORDING, "on", False):  # (a whole model's call is recorded: its
            return self.forward(owner, inputs)  # launches are seen only where this forward makes them)
        try:
            key = self.key(inputs, owner)
            state = self.seen.get(key)
        except Exception:  # an input that is not hashable, a fake tensor (no address): the forward itself
            return self.forward(owner, inputs)
        if state is None:  # a first call: it fills the caches
            self.new_keys += 1
            if self.new_keys > 64:  # keys that never repeat (weights trained between calls): stop keying
                self.off = True
                self.seen.clear()
                return self.forward(owner, inputs)
            if len(self.seen) >= 64:  # keys that keep changing: start over
                self.seen.clear()
            self.seen[key] = 1
            return self.forward(owner, inputs)
        self.new_keys = 0
        if isinstance(state, tuple):
            return _replay(state, inputs)
        if state is False:
            return self.forward(owner, inputs)
        with _RECORDING:
            out, recipe = self._record(owner, inputs)
        if recipe is not None and sum(isinstance(v, tuple) for v in self.seen.values()) >= 8:
            # a recipe keeps the tensors its launches read (a packed copy of a weight since changed): at
            # most eight
            self.seen.clear()
        self.seen[key] = recipe if recipe is not None else False
        return out

    def _record(self, owner: Any, inputs: tuple[Any, ...]) -> tuple[Any, Any]:
        watch = _Watch(inputs)
        names = [n for n, f in self.namespace.items() if n.endswith("_kw_launch") and callable(f)]
        originals = {n: self.namespace[n] for n in names}
        thread = threading.get_ident()

        def recording(original: Any) -> Any:
            def launch(kernel: Any, grid: Any, *args: Any, **meta: Any) -> Any:
                if watch.passthrough or threading.get_ident() != thread:
                    return original(kernel, grid, *args, **meta)
                return watch.launch(original, kernel, grid, args, meta)

            return launch

        for n in names:
            self.namespace[n] = recording(originals[n])
        try:
            with watch:
                out = self.forward(owner, inputs)
        finally:
            self.namespace.update(originals)
        return out, watch.recipe(out)


class ModelReplay(LaunchReplay):
    """A whole stitched model's forward replayed as one recipe (see LaunchReplay): every region's
    launches and every torch call of the forward, the regions kept in torch included, in order. The
    key walks the whole model. What it saves over replaying region by region: the regions' keys, the
    binding of the model's tensors to each kernel, the plan's steps. While the model's call is recorded
    the regions' own replays stand aside (their launches are seen only when made through `_kw_launch`).
    For a plan whose every kernel region is replayable and whose forward assigns no attribute (see
    RegionPlan._model_replay); where the recording refuses, the model runs region by region as before.
    KERNELWRIGHT_MODEL_REPLAY=0: region by region only. The key also holds each tensor the forward reads
    from a plain attribute (`self.h0 = torch.zeros(...)`, not a buffer), which a user may replace between
    calls: region by region such a tensor is bound to the kernel's tables before the region's key. A
    forward hook or pre-hook on any module under the model (a user's, capturing activations; global ones
    too) makes the call run region by region: a replay would not call it."""

    refuse_hooks = True

    def __init__(self, plan: RegionPlan, namespace: dict[str, Any]) -> None:
        super().__init__(None, namespace)
        self.plan = plan
        self.plain: list[Any] | None = None
        """Getters of the plain tensor attributes the forward reads (found at the first call)."""

    def key(self, inputs: tuple[Any, ...], owner: Any = None) -> Any:
        if nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks:
            raise _NoReplay
        if self.plain is None:
            paths = {str(n.target) for n in self.plan.graph.nodes if n.op == "get_attr"}
            paths.update(p for r in self.plan.regions for p in r.get("bindings", {}).values())
            self.plain = [_path_getter(p) for p in sorted(paths) if _plain_attribute(owner, p)]
        parts = [super().key(inputs, owner)]
        for get in self.plain:
            t = get(owner)
            parts += [id(t), t.data_ptr(), t._version] if isinstance(t, torch.Tensor) else [id(t)]
        return tuple(parts)

    def forward(self, owner: Any, inputs: tuple[Any, ...]) -> Any:
        compiled = self.plan._compiled
        assert compiled is not None
        return compiled(owner, inputs)

    def _record(self, owner: Any, inputs: tuple[Any, ...]) -> tuple[Any, Any]:
        _MODEL_RECORDING.on = True
        try:
            return super()._record(owner, inputs)
        finally:
            _MODEL_RECORDING.on = False


class _Arena:
    """A recipe's buffers that are not its outputs, laid out once in one block by their lifetimes (two share
    bytes only where the last step using one comes before the first step using the other; each at a
    512-byte boundary, as the caching allocator aligns) and kept between calls: a replay then makes none
    of those allocations and frees, and passes views made once (a stitched MobileNetV1's forward made 149
    allocations, its largest host cost under cProfile on an H100 host). Its bytes are those of the
    recorded call's peak, held while the recipe is. One replay at a time uses it, on the stream that first
    used it: a replay on another thread meanwhile, or on another stream (whose kernels would overlap this
    one's), allocates as the recorded call did. An output is never in it (the caller keeps it); a call
    recorded under grad has none (backward may keep what a step read); one needing more than
    ARENA_MAX_BYTES neither."""

    def __init__(self, places: dict[int, tuple[int, int]], total: int, device: Any) -> None:
        self.places = places
        """buffer index -> (byte offset, bytes)"""
        self.total = total
        self.device = device
        self.made: tuple[Any, Any] | None = None
        """(the steps with the arena's views in place of its buffers, the allocations left), once made"""
        self.stream: Any = None
        self.lock = threading.Lock()

    @staticmethod
    def planned(
        sizes: list[Any], first: dict[Any, int], last: dict[Any, int], kept: set[Any]
    ) -> "_Arena | None":  # noqa: UP037 - copied without __future__
        """The arena of a recipe's buffers (`first` and `last`: the steps that first and last use each
        slot), or None where fewer than two buffers would be in it, or they need more than ARENA_MAX_BYTES."""
        spans = []
        for (kind, index), start in first.items():
            if kind != 0 or (kind, index) in kept:
                continue
            size, stride, dtype, _ = sizes[index]
            if 0 in size:
                continue
            extent = 1 + sum((d - 1) * st for d, st in zip(size, stride, strict=True))
            spans.append((extent * dtype.itemsize, start, last[(kind, index)], index))
        devices = {sizes[span[3]][3] for span in spans}
        if len(spans) < 2 or len(devices) != 1:
            return None
        placed: list[tuple[int, int, int, int]] = []  # (offset, end, first step, last step)
        places = {}
        for nbytes, start, stop, index in sorted(spans, key=lambda span: (-span[0], span[1])):
            padded = -(-nbytes // 512) * 512
            offset = 0
            for low, high, _, _ in sorted(p for p in placed if p[2] <= stop and start <= p[3]):
                if offset + padded <= low:
                    break
                offset = max(offset, high)
            placed.append((offset, offset + padded, start, stop))
            places[index] = (offset, nbytes)
        total = max(p[1] for p in placed)
        return _Arena(places, total, devices.pop()) if total <= ARENA_MAX_BYTES else None

    def _stream(self) -> Any:
        if self.device.type != "cuda":
            return None
        return torch._C._cuda_getCurrentRawStream(self.device.index)

    def take(self, recipe: Any) -> tuple[Any, Any] | None:
        """(steps, allocations) to replay with the arena, or None (then release nothing)."""
        if not self.lock.acquire(blocking=False):  # another thread replays this recipe now
            return None
        stream = self._stream()
        if self.made is None:
            self.made = self._make(recipe)
            self.stream = stream
        elif stream != self.stream:
            self.lock.release()
            return None
        return self.made

    def _make(self, recipe: Any) -> tuple[Any, Any]:
        sizes, steps, _, _, _, allocs_at, _, _ = recipe
        block = torch.empty(self.total, dtype=torch.uint8, device=self.device)
        views = {}
        for index, (offset, nbytes) in self.places.items():
            size, stride, dtype, _ = sizes[index]
            views[index] = block[offset : offset + nbytes].view(dtype).as_strided(size, stride)

        def slot(s: Any) -> Any:
            if s[0] != 0 or s[1] not in views:
                return s
            view = views[s[1]]
            return ("same", view if s[5] else view.as_strided(s[2], s[3], s[4] + view.storage_offset()))

        def template(v: Any) -> Any:
            if isinstance(v, tuple) and v[0] == "slot":
                return ("slot", slot(v[1]))
            if isinstance(v, tuple) and v[0] == "seq":
                return ("seq", v[1], [template(x) for x in v[2]])
            return v

        made: list[Any] = []
        for step in steps:
            if step[0] == "torch":
                _, func, args, kwargs, out = step
                made.append(("torch", func, [template(a) for a in args], {k: template(v) for k, v in kwargs.items()},
                             out))  # fmt: skip
            else:  # a launch: its arguments in the arena are bound now, once
                _, original, kernel, grid, args, slots, meta, direct = step
                args, left = list(args), []
                for pos, s in slots:
                    s = slot(s)
                    if s[0] == "same":
                        args[pos] = s[1]
                    else:
                        left.append((pos, s))
                made.append(("launch", original, kernel, grid, tuple(args), tuple(left), meta, direct))
        allocs = [tuple(i for i in step if i not in views) for step in allocs_at]
        return made, allocs


def _replay(recipe: Any, inputs: tuple[Any, ...]) -> Any:
    sizes, steps, outs, container, n_made, allocs_at, frees_at, arena = recipe
    held = arena.take(recipe) if arena is not None else None
    if held is None:
        return _run_steps(sizes, steps, outs, container, n_made, allocs_at, frees_at, inputs)
    try:  # the steps with the arena's views in place of its buffers, and the allocations left
        return _run_steps(sizes, held[0], outs, container, n_made, held[1], frees_at, inputs)
    finally:
        arena.lock.release()


def _slot_tensor(bases: Any, s: Any) -> Any:
    """The tensor a recorded slot names in this call (`bases`: its buffers, inputs and made tensors)."""
    if s[0] == "same":
        return s[1]
    base = bases[s[0]][s[1]]
    return base if s[5] else base.as_strided(s[2], s[3], s[4])


def _step_value(bases: Any, v: Any) -> Any:
    """A recorded torch call's argument in this call (see _Watch.template)."""
    if not isinstance(v, tuple):
        return v  # a tensor of the model's own
    if v[0] == "slot":
        return _slot_tensor(bases, v[1])
    if v[0] == "seq":
        return v[1](_step_value(bases, x) for x in v[2])
    return v[1]


def _run_steps(sizes: Any, steps: Any, outs: Any, container: Any, n_made: int, allocs_at: Any, frees_at: Any,
               inputs: tuple[Any, ...]) -> Any:  # fmt: skip
    buffers: list[Any] = [None] * len(sizes)
    bases: tuple[list[Any], list[Any], list[Any]] = (buffers, list(inputs), [None] * n_made)
    # (module-level helpers given `bases`, not closures over it: a closure that calls itself is a reference
    # cycle, and the cycle kept each call's inputs and outputs alive until the garbage collector ran, a
    # 4 GiB output per call in a timing loop's fifteen calls)
    tensor, value = partial(_slot_tensor, bases), partial(_step_value, bases)
    device = None
    for step, allocs, frees in zip(steps, allocs_at, frees_at, strict=True):
        for i in allocs:
            size, stride, dtype, on = sizes[i]
            buffers[i] = torch.empty_strided(size, stride, dtype=dtype, device=on)
        if step[0] == "torch":
            _, func, args, kwargs, made = step
            result = func(*[value(a) for a in args], **{k: value(v) for k, v in kwargs.items()})
            for pos, index in made:
                bases[2][index] = result if pos is None else result[pos]
            result = None  # (held only where `bases` holds it: `frees` lets it go)
        else:
            _, original, kernel, grid, args, slots, meta, direct = step
            if slots:
                args = list(args)
                for pos, s in slots:
                    args[pos] = tensor(s)
            if direct is not None and device is None:
                device = torch.cuda.current_device()
            if direct is not None and direct[0] == device:
                direct[1](direct[2], args)
            else:
                original(kernel, grid, *args, **meta)
            args = None  # (its views would keep freed buffers alive)
        for kind, i in frees:
            bases[kind][i] = None
    return tensor(outs[0]) if container is None else container(tensor(s) for s in outs)


class _CompiledPlan:
    """A plan's steps made, once, into a list of small functions `(root, env) -> None`: each node's
    arguments are built from a template with its nodes' values slotted in, its module read by a fixed
    attribute path, its kernel (a region's) called with its inputs. The forward then runs them in order.
    Interpreting the graph node by node (fx's map_arg over each node's arguments, the module looked up
    by its dotted path) cost 3-8 us per node on top of the operation itself; with no python source made
    or executed (a candidate may not call exec or compile), this is the cheapest way to run the steps."""

    def __init__(self, plan: RegionPlan) -> None:
        self.placeholders: list[tuple[str, Any]] = []
        self.steps: list[Any] = []
        self.output: fx.Node | None = None
        from_kernels: set[str] = set()
        for kind, item in plan.steps:
            if kind == "region":
                if plan.kernel_ran(item):
                    self.steps.append(plan.kernel_step(item))
                    from_kernels.update(plan.regions[item]["outputs"])
                else:  # as the interpreter ran a region without its kernel: each node as the graph has it
                    self.steps += [
                        self._node_step(plan.nodes[name], set()) for name in plan.regions[item]["nodes"]
                    ]
            elif item.op == "placeholder":
                self.placeholders.append((item.name, item.args[0] if item.args else None))
            elif item.op == "output":
                self.output = item
                break  # a step never ready stands after the output: it never ran
            else:
                self.steps.append(self._node_step(item, from_kernels))
        self.result = _builder(self.output.args[0]) if self.output is not None else None
        self.writes = [(_path_getter(path.rpartition(".")[0]) if "." in path else None, path.rpartition(".")[2], name)
                       for path, name in plan.writes.items()]  # fmt: skip

    def __call__(self, root: nn.Module, inputs: tuple[Any, ...]) -> Any:
        env: dict[str, Any] = {}
        it = iter(inputs)
        for name, default in self.placeholders:
            env[name] = next(it, default)
        for step in self.steps:
            step(root, env)
        if self.output is None:
            return None
        for owner, attr, name in self.writes:  # attributes the forward assigned, as it did
            setattr(owner(root) if owner else root, attr, env[name])
        return self.result(env) if self.result else self.output.args[0]

    @staticmethod
    def _node_step(node: fx.Node, from_kernels: set[str]) -> Any:
        name = node.name
        args = _builder(node.args)
        const_args = tuple(node.args)
        kwargs = _builder(node.kwargs)
        const_kwargs = dict(node.kwargs)
        if node.op == "get_attr":
            get = _path_getter(str(node.target))

            def step(root: Any, env: dict[str, Any]) -> None:
                env[name] = get(root)

            return step
        if node.op == "call_function":
            target: Any = node.target

            def apply(root: Any, env: dict[str, Any]) -> None:
                env[name] = target(
                    *(args(env) if args else const_args), **(kwargs(env) if kwargs else const_kwargs)
                )

            return apply
        if node.op == "call_module":
            module = _path_getter(str(node.target))

            def call(root: Any, env: dict[str, Any]) -> None:
                env[name] = module(root)(
                    *(args(env) if args else const_args), **(kwargs(env) if kwargs else const_kwargs)
                )

            return call
        if node.op != "call_method":
            raise RuntimeError(f"cannot run FX node {node.op} {node.target}")
        method = str(node.target)
        if (method == "view" and len(node.args) > 1 and not node.kwargs
                and getattr(node.args[0], "name", None) in from_kernels
                and not isinstance(node.args[1], torch.dtype)):  # fmt: skip
            # a kernel's output need not have the strides torch's operations gave it: a view of it
            # (a view the split left between regions) is taken where its strides allow, else copied
            method = "reshape"

        def call_method(root: Any, env: dict[str, Any]) -> None:
            a = args(env) if args else const_args
            env[name] = getattr(a[0], method)(*a[1:], **(kwargs(env) if kwargs else const_kwargs))

        return call_method


def input_key(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((tuple(x.shape), str(x.dtype), x.device.type) if isinstance(x, torch.Tensor) else repr(x)
                 for x in inputs)  # fmt: skip


def plan_for(
    model: nn.Module,
    reference: type[nn.Module],
    spec: dict[str, Any],
    regions: list[dict[str, Any]],
    kernels: dict[int, nn.Module],
    inputs: tuple[Any, ...],
    cache: dict[Any, RegionPlan],
    wrap: tuple[Any, ...] = (),
    replay: tuple[Any, dict[str, Any]] | None = None,
) -> RegionPlan:
    """The stitched model's plan for these inputs: traced as the reference class (so node names are the
    ones the plan was cut with) once per number of inputs, and once per input sizes and mode (training or
    not) where the split was specialized on its inputs' sizes. `replay`: (the regions whose launches may be
    replayed, the namespace of their launchers), see LaunchReplay."""
    # the mode too: a specialized trace holds `self.training` as a constant (attention's `training=`)
    key = (*input_key(inputs), ("training", model.training)) if spec.get("specialized") else None
    plan = cache.get(key)
    if plan is None:
        cls = model.__class__
        model.__class__ = reference
        # the kernels, out of the tracer's sight: they hold the model's own tensors (build_kernel), and fx
        # names a plain tensor attribute (`self.hidden`) by the last module it finds it in
        hidden = {k: model._modules.pop(k) for k in list(model._modules) if k.startswith("_kw_kernels_")}
        try:
            # as the split traced it: the same defaults made constants, the same modules recorded whole
            example = list(inputs) if spec.get("specialized") else None
            graph = trace(model, set(spec["leaves"]), spec.get("constant_args"), example, wrap)
        finally:
            model.__class__ = cls
            model._modules.update(hidden)
        plan = RegionPlan(graph, regions, replay)
        for index, kernel in kernels.items():
            plan.attach(index, kernel)
        cache[key] = plan
    return plan


def fake_run_node(root: nn.Module, node: fx.Node, args: Any, kwargs: Any) -> Any:
    """A node's value on fake tensors (inside their fake mode). A recurrence's outputs are made from its
    sizes: its fake kernel decomposes it into a graph per time step (a GRU of 512 steps took 9 s)."""
    args, kwargs = fx.node.map_aggregate((args, kwargs), _fake)
    if node.op == "call_module":
        module = root.get_submodule(str(node.target))
        if isinstance(module, nn.RNNBase) and args and isinstance(args[0], torch.Tensor):
            return _recurrence_outputs(module, args[0])
        # its parameters and buffers as fake twins for this call (its own are left as they are)
        state = {k: _fake(v) for k, v in [*module.named_parameters(), *module.named_buffers()]}
        return torch.func.functional_call(module, state, tuple(args), dict(kwargs))
    return _fake(RegionPlan.run_node(root, node, {}, args, kwargs))


def _recurrence_outputs(rnn: nn.RNNBase, x: torch.Tensor) -> Any:
    batched = x.dim() == 3
    seq_dim = 1 if rnn.batch_first and batched else 0
    steps = x.shape[seq_dim]
    batch = x.shape[1 - seq_dim] if batched else None
    directions = 2 if rnn.bidirectional else 1
    out_size = rnn.proj_size or rnn.hidden_size
    lead = (batch, steps) if rnn.batch_first and batched else ((steps, batch) if batched else (steps,))
    out = x.new_empty((*lead, directions * out_size))
    state = (rnn.num_layers * directions, batch) if batched else (rnn.num_layers * directions,)
    h = x.new_empty((*state, out_size))
    if isinstance(rnn, nn.LSTM):
        return out, (h, x.new_empty((*state, rnn.hidden_size)))
    return out, h
