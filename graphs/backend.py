"""`torch.compile(model, backend="kernelwright")`: swap in the kernels memory holds for regions it knows.

No search happens at compile time. Dynamo hands the backend a graph of functional calls whose parameters
and buffers are inputs; the backend first puts the module calls back (a `torch.conv2d` whose weight is
`self.blocks[0].conv.weight` becomes a call of an `nn.Conv2d` holding that very tensor; likewise
`F.batch_norm`, `F.linear`, `F.adaptive_avg_pool2d`), so that the split (tasks/regions.py) cuts the same
regions with the same signatures as `optimize-model` did on the module. In eval mode Dynamo does not hand
over a batch norm's step counter (nothing reads it): the module gets one of its own, so an eval-mode batch
norm is put back too, and the region's kernel gets the model's running statistics, weight and bias bound
before each call (its eval path folds them as it was judged to). Each region whose signature memory holds a
correct kernel for on this target runs that kernel (built in this process: the user asked to run it); a
program that launches only through its `_kw_launch` (the offline writer's) has its calls recorded once per
kind of call and replayed after (tasks/region_runtime.py LaunchReplay, as in a stitched model), so the
host does not compute its sizes, grids and launches again on every call.

The rest of the graph goes to Inductor: each stretch of it between two swapped regions is compiled by
`compile_fx` on its first call (with that call's tensors), and when no region is recognised the graph goes
to Inductor whole. Where Inductor is unavailable (no C++ compiler for the CPU, no Triton for a GPU) or
cannot compile a stretch, that stretch runs eagerly, and a warning says so once per reason.
On a GPU the swap is checked against Inductor on the whole graph: the first call with each kind of input
runs both (a few warm calls each, then alternating timed ones) and keeps the faster, so compiling with this
backend is not slower than `torch.compile` where memory's kernels lose to Inductor's fusion (`last_choices`
says what each call's inputs kept and the times). A graph that updates the model's state or its inputs (a
batch norm in training) is not timed: its swapped kernels are kept. `KERNELWRIGHT_BACKEND_CHOICE` sets it:
`auto` (the default: timed on a GPU, swapped on the CPU, where the kernels run under Triton's interpreter),
`time` (timed on any device) or `swap` (memory's kernels, never timed).
Importing this module registers the backend name (pyproject.toml's `torch_dynamo_backends` entry point makes
`backend="kernelwright"` work without the import).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from kernelwright.tasks.region_runtime import RegionPlan, new_kernel

_PATH = re.compile(r"\._(?:modules|parameters|buffers)\['([^']+)'\]")

last_error: list[str] = []
"""Why the most recent compilation recognised nothing, when it failed to read the graph."""
last_swaps: list[dict[str, Any]] = []
"""What the most recent compilation swapped in: one entry per region (index, signature, operators, the
kernel, and its LaunchReplay where its program launches only through `_kw_launch`, else None)."""
last_residuals: list[dict[str, str]] = []
"""How the most recent compilation's torch parts ran: per part, "inductor" or "eager" and why (a stretch
between swapped regions is compiled on its first call)."""
last_choices: list[dict[str, Any]] = []
"""What the most recent compilation's graph kept, per kind of input it was called with: memory's kernels or
Inductor on the whole graph, with both medians in ms (or why nothing was timed)."""

CHOICE_ENV = "KERNELWRIGHT_BACKEND_CHOICE"
CHOICES = ("auto", "time", "swap")


def _state_path(node: fx.Node) -> str | None:
    """`blocks.0.bn.weight` for a placeholder Dynamo lifted from the module's state, else None."""
    arg = node.meta.get("grapharg")
    source = getattr(arg, "source", None)
    name = getattr(source, "name", "") if source is not None else ""
    if callable(name):  # a method in some torch versions, a property in others
        name = name()
    parts = _PATH.findall(str(name))
    return ".".join(parts) if parts and ("_parameters[" in name or "_buffers[" in name) else None


def _set(root: nn.Module, path: str, value: Any) -> None:
    *owners, leaf = path.split(".")
    obj = root
    for part in owners:
        if not hasattr(obj, part):
            obj.add_module(part, nn.Module())
        obj = getattr(obj, part)
    if isinstance(value, nn.Module):
        obj.add_module(leaf, value)
    elif isinstance(value, nn.Parameter):
        obj.register_parameter(leaf, value)
    else:
        obj.register_buffer(leaf, value)


def _has(root: nn.Module, path: str) -> bool:
    obj: Any = root
    for part in path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _owner(path: str | None) -> str | None:
    return path.rpartition(".")[0] if path else None


def _module_for(node: fx.Node, paths: dict[str, str], tensors: dict[str, torch.Tensor]) -> tuple[str, nn.Module, list[str]] | None:  # fmt: skip
    """(owner path, a module doing what this functional call does, the state names it takes over)."""
    args: list[Any] = list(node.args)

    def path_of(a: Any) -> str | None:
        return paths.get(a.name) if isinstance(a, fx.Node) else None

    if (
        node.target in (torch.conv1d, torch.conv2d, torch.conv3d, F.conv1d, F.conv2d, F.conv3d)
        and len(args) >= 2
    ):
        wp = path_of(args[1])
        bp = path_of(args[2]) if len(args) > 2 else None
        if wp is None or (len(args) > 2 and args[2] is not None and bp is None):
            return None
        w = tensors[wp]
        groups = int(args[6]) if len(args) > 6 else 1
        conv: Any = {3: nn.Conv1d, 4: nn.Conv2d, 5: nn.Conv3d}[w.dim()]
        stride, padding, dilation = (args[i] if len(args) > i else 1 for i in (3, 4, 5))
        if isinstance(padding, str):
            return None
        m = conv(w.shape[1] * groups, w.shape[0], tuple(w.shape[2:]), stride=stride, padding=padding,
                dilation=dilation, groups=groups, bias=bp is not None, device="meta")  # fmt: skip
        return _owner(wp) or "", m, [p for p in (wp, bp) if p]
    if node.target is F.batch_norm and len(args) >= 8:
        rm, rv, wn, bn = (path_of(a) for a in args[1:5])
        if rm is None or rv is None or wn is None or bn is None or _owner(rm) != _owner(wn):
            return None
        norm: Any = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}.get(
            len(node.args[0].meta.get("example_value", torch.empty(0)).shape) if isinstance(node.args[0], fx.Node) else 0  # type: ignore[union-attr]
        )  # fmt: skip
        if norm is None:
            return None
        m = norm(tensors[wn].shape[0], eps=float(args[7]), momentum=args[6], device="meta")
        m.train(bool(args[5]))
        return _owner(wn) or "", m, [rm, rv, wn, bn, f"{_owner(wn)}.num_batches_tracked"]
    if node.target is F.linear:
        wp = path_of(args[1]) if len(args) > 1 else None
        bp = path_of(args[2]) if len(args) > 2 else None
        if wp is None:
            return None
        w = tensors[wp]
        return (
            _owner(wp) or "",
            nn.Linear(w.shape[1], w.shape[0], bias=bp is not None, device="meta"),
            [p for p in (wp, bp) if p],
        )
    return None


def module_form(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> tuple[nn.Module, list[int]]:
    """A module whose traced graph has module calls where `gm` has functional ones on the model's state,
    and the positions of `gm`'s inputs that are the model's inputs (the rest are its state)."""
    shell = nn.Module()
    graph = fx.Graph()
    env: dict[str, fx.Node] = {}
    paths: dict[str, str] = {}
    tensors: dict[str, torch.Tensor] = {}
    real: list[int] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, (node, value) in enumerate(zip(placeholders, example_inputs, strict=False)):
        path = _state_path(node)
        if path is not None and isinstance(value, torch.Tensor):
            paths[node.name], tensors[path] = path, value
            _set(shell, path, value)
        else:
            real.append(i)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if node.name in paths:
                env[node.name] = graph.get_attr(paths[node.name])
            else:
                env[node.name] = graph.placeholder(node.name)
            continue
        # batch norm's step counter: nn.BatchNorm counts its own steps
        if node.op == "call_method" and node.target == "add_" and isinstance(node.args[0], fx.Node) and str(
            paths.get(node.args[0].name, "")
        ).endswith("num_batches_tracked"):  # fmt: skip
            continue
        made = _module_for(node, paths, tensors) if node.op == "call_function" else None
        if made is not None:
            owner, module, taken = made
            for name in taken:
                local = name.rpartition(".")[2]
                if name in tensors:
                    t = tensors[name]
                    if local in module._parameters:
                        module._parameters[local] = t if isinstance(t, nn.Parameter) else nn.Parameter(t)
                    else:
                        module._buffers[local] = t
                elif local == "num_batches_tracked" and not module.training:
                    # eval mode reads no step counter, so Dynamo does not lift it: a counter of the module's
                    # own (never read) lets the batch norm be put back with the model's statistics
                    stats = tensors[taken[0]]
                    module._buffers[local] = torch.zeros((), dtype=torch.long, device=stats.device)
            if any(t.device.type == "meta" for t in module.state_dict().values()):
                made = None
            else:
                target = f"{owner}.__kw_{type(module).__name__.lower()}" if owner else f"__kw_{len(env)}"
                _set(shell, target, module)
                env[node.name] = graph.call_module(target, (env[node.args[0].name],))  # type: ignore[union-attr]
                continue
        if node.op == "get_attr" and not _has(shell, str(node.target)):
            _set(shell, str(node.target), getattr(gm, str(node.target)))  # Dynamo's own constants
        env[node.name] = graph.node_copy(node, lambda a: env[a.name])
    out = fx.GraphModule(shell, graph)
    if any(not m.training for m in out.modules()):
        out.eval()  # compiled in eval mode (Dynamo compiles again when the mode changes)
    return out, real


_KERNEL_DIR: list[Path] = []


def _kernel_class(code: str, signature: str) -> type[nn.Module]:
    """The kernel file's ModelNew, imported from a file of its own (Triton reads a kernel's source from
    its file) in a folder this process made."""
    if not _KERNEL_DIR:
        _KERNEL_DIR.append(Path(tempfile.mkdtemp(prefix="kernelwright-backend-")))
    digest = hashlib.sha256(code.encode()).hexdigest()[:12]
    name = f"kernelwright_region_{signature}_{digest}"
    if name in sys.modules:  # regions that share a signature share one module
        return sys.modules[name].__dict__["ModelNew"]  # type: ignore[no-any-return]
    path = _KERNEL_DIR[0] / f"region_{signature}_{digest}.py"
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # triton and dataclasses look modules up by name
    spec.loader.exec_module(module)  # the user's own memory's kernel: running it is what they asked for
    cls = module.__dict__["ModelNew"]
    assert isinstance(cls, type)
    return cls


_warned: set[str] = set()


def _say_once(why: str) -> None:
    """A warning the first time a reason makes the backend run torch operations eagerly."""
    if why not in _warned:
        _warned.add(why)
        message = f"kernelwright backend: {why}: the graph's torch operations outside the regions memory has kernels for run eagerly"
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def inductor_unavailable(device: str) -> str | None:
    """Why Inductor cannot compile for `device` here (None: it can): it writes C++ for the CPU and Triton
    for a GPU."""
    if device == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler

            get_cpp_compiler()
        except Exception as exc:  # what it raises for a missing compiler differs between torch versions
            return f"no C++ compiler for Inductor's CPU code ({str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})"
        return None
    from torch.utils._triton import has_triton

    return None if has_triton() else "Triton is not installed, which Inductor needs for GPU code"


def inductor(gm: fx.GraphModule, inputs: list[Any], what: str) -> Callable[..., Any]:
    """`gm` compiled by Inductor for these inputs, or `gm` itself (eager) where Inductor is unavailable or
    cannot compile it; `last_residuals` records which."""
    device = next((t.device.type for t in inputs if isinstance(t, torch.Tensor)), "cpu")
    why = inductor_unavailable(device)
    if why is None:
        try:
            from torch._inductor.compile_fx import compile_fx

            compiled: Callable[..., Any] = compile_fx(gm, inputs)  # type: ignore[assignment]
        except Exception as exc:
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            why = f"Inductor could not compile it ({type(exc).__name__}: {first})"
        else:
            last_residuals.append({"part": what, "ran": "inductor"})
            return compiled
    _say_once(why)
    last_residuals.append({"part": what, "ran": "eager", "why": why})
    return gm


MAX_COMPILED = 8
"""Inductor compilations kept per stretch of the graph (one per kind of input it was called with)."""


def input_kind(args: Sequence[Any]) -> tuple[Any, ...]:
    """What a compiled graph specialises on: each tensor's sizes, strides, dtype, device and grad flag."""
    return tuple(
        (tuple(a.shape), a.stride(), a.dtype, a.device, a.requires_grad)
        if isinstance(a, torch.Tensor)
        else repr(a)
        for a in args
    )


class _Stretch:
    """Consecutive torch operations of the graph between swapped regions: one graph of their own (the
    model's state read as attributes, as in the model), compiled by Inductor on its first call."""

    def __init__(self, root: nn.Module, nodes: list[fx.Node], name: str) -> None:
        inside = {n.name for n in nodes}
        self.name = name
        self.inputs: list[str] = []
        for n in nodes:
            for a in n.all_input_nodes:
                if a.name not in inside and a.op != "get_attr" and a.name not in self.inputs:
                    self.inputs.append(a.name)
        self.outputs = [n.name for n in nodes if any(u.name not in inside for u in n.users)]
        graph = fx.Graph()
        env: dict[str, fx.Node] = {name: graph.placeholder(name) for name in self.inputs}
        for n in nodes:
            for a in n.all_input_nodes:
                if a.op == "get_attr" and a.name not in env:
                    env[a.name] = graph.get_attr(str(a.target))
            env[n.name] = graph.node_copy(n, lambda a: env[a.name])
        graph.output(tuple(env[o] for o in self.outputs))
        self.gm = fx.GraphModule(root, graph)
        self.compute = any(n.op in ("call_function", "call_method", "call_module") for n in nodes)
        self.compiled: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def __call__(self, *args: Any) -> Any:
        if not self.compute:
            return self.gm(*args)
        # Inductor specialises on sizes and strides, and Dynamo may call a graph it made dynamic with any:
        # one compilation per kind of input, up to a bound, then eagerly
        key = input_kind(args)
        fn = self.compiled.get(key)
        if fn is None:
            if len(self.compiled) >= MAX_COMPILED:
                _say_once(f"more than {MAX_COMPILED} input shapes for one part of the graph")
                return self.gm(*args)
            fn = self.compiled[key] = inductor(self.gm, list(args), self.name)
        return fn(*args)


class StitchedGraph:
    """The graph run with memory's kernels for the swapped regions and Inductor for everything between."""

    def __init__(self, root: nn.Module, plan: RegionPlan) -> None:
        self.root, self.plan = root, plan
        nodes = list(plan.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        self.attrs = [n for n in nodes if n.op == "get_attr"]
        self.output = next(n for n in nodes if n.op == "output")
        self.steps: list[tuple[str, Any]] = []
        stretch: list[fx.Node] = []

        def close() -> None:
            if stretch:
                name = f"the graph's torch operations {stretch[0].name} .. {stretch[-1].name}"
                self.steps.append(("torch", _Stretch(root, list(stretch), name)))
                stretch.clear()

        for kind, item in plan.steps:
            if kind == "region" and plan.kernel_ran(item):
                close()
                self.steps.append(("kernel", plan.kernel_step(item)))
            elif kind == "region":
                stretch.extend(plan.nodes[name] for name in plan.regions[item]["nodes"])
            elif item.op not in ("placeholder", "get_attr", "output"):
                stretch.append(item)
        close()

    def __call__(self, inputs: tuple[Any, ...]) -> Any:
        env: dict[str, Any] = {}
        it = iter(inputs)
        for p in self.placeholders:
            env[p.name] = next(it, p.args[0] if p.args else None)
        for a in self.attrs:
            env[a.name] = RegionPlan.run_node(self.root, a, env)
        for kind, item in self.steps:
            if kind == "kernel":
                item(self.root, env)
            else:
                env.update(zip(item.outputs, item(*[env[name] for name in item.inputs]), strict=True))
        return fx.node.map_arg(self.output.args[0], lambda a: env[a.name])


def kernelwright_backend(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    from kernelwright.graphs.model import region_kernels, target_name
    from kernelwright.hardware.candidate import interpreter_fixes
    from kernelwright.nodes import resources
    from kernelwright.nodes.run_context import Context
    from kernelwright.tasks.region_runtime import trace
    from kernelwright.tasks.region_stitch import replayable
    from kernelwright.tasks.regions import SplitError, split_model

    last_swaps.clear()
    last_error.clear()
    last_residuals.clear()
    last_choices.clear()
    ctx = Context()
    try:
        shell, real = module_form(gm, example_inputs)
        inputs = [example_inputs[i] for i in real]
        split = split_model(shell, inputs)
        location = (
            resources.memory_location(ctx.memory, None) if ctx.memory != resources.MEMORY_FRESH else None
        )
        memory = None if location == resources.MEMORY_OFF else resources.open_shared_memory(location)
        device = next((t.device.type for t in inputs if isinstance(t, torch.Tensor)), "cpu")
        import dataclasses

        target = target_name(dataclasses.replace(ctx, device="cpu" if device == "cpu" else "cuda"))
        plan = RegionPlan(trace(shell, split.leaves), [r.plan() for r in split.regions])
        # on a GPU a kernel slower than the region's torch operations (or never timed) is not swapped in
        held = region_kernels(memory, target, faster=device != "cpu")
        # Under TRITON_INTERPRET=1 the kernels run in this process, where the judge's fork server's
        # interpreter fixes are not in place: without them a bf16 tl.dot multiplies bit patterns.
        interpreter_fixes.apply()
        for region in split.regions:
            code = held.get(region.signature) if region.source else None
            if code is not None:
                kernel_class = _kernel_class(code, region.signature)
                kernel = new_kernel(kernel_class, region.init_args)
                plan.attach(region.index, kernel)
                if replayable(code):  # its launches recorded once per kind of call, then replayed
                    plan.replay_kernel(region.index, sys.modules[kernel_class.__module__].__dict__)
                last_swaps.append(
                    {
                        "region": region.index,
                        "signature": region.signature,
                        "ops": region.ops,
                        "kernel": kernel,
                    }
                )
    except (SplitError, Exception) as exc:  # a graph not understood is Inductor's, never the model's error
        last_swaps.clear()
        last_error[:] = [f"{type(exc).__name__}: {exc}"]
        plan = None
    if plan is None or not plan.kernels:
        return inductor(gm, list(example_inputs), "the whole graph (no region recognised)")
    stitched = StitchedGraph(shell, plan)
    for swap in last_swaps:
        swap["replay"] = plan.replays.get(swap["region"])

    def run(*args: Any) -> Any:
        return stitched(tuple(args[i] for i in real))

    if backend_choice(device) == "swap":
        return run
    whole = inductor(gm, list(example_inputs), "the whole graph (timed against memory's kernels)")
    return Faster(run, whole, shown=real, static=static_sizes(gm))


def static_sizes(gm: fx.GraphModule) -> bool:
    """Whether Dynamo traced `gm` with static sizes (no symbolic size among its inputs; False where it did
    not say)."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        if value is None or isinstance(value, torch.SymInt):
            return False
        if isinstance(value, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in value.shape):
            return False
    return True


def backend_choice(device: str) -> str:
    """`time` or `swap` for a graph on `device`, from $KERNELWRIGHT_BACKEND_CHOICE (module docstring)."""
    choice = os.environ.get(CHOICE_ENV, "").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{CHOICE_ENV}={choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "auto":
        return "swap" if device == "cpu" else "time"
    return choice


TIMING_S = 0.5
"""About how long the timed calls of one kind of input take (at least 3 and at most 20 calls each side)."""


def median_ms(runs: dict[str, Callable[[], Any]], device: torch.device) -> dict[str, float]:
    """Each run's median time in ms: two warm calls each, then timed calls alternating between the runs
    (CUDA events on a GPU, the wall clock elsewhere)."""
    cuda = device.type == "cuda"

    def once(fn: Callable[[], Any]) -> float:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    for fn in runs.values():
        fn()
    warm = {name: once(fn) for name, fn in runs.items()}
    reps = max(3, min(20, int(TIMING_S * 1e3 / max(sum(warm.values()), 1e-3))))
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(reps):
        for name, fn in runs.items():
            times[name].append(once(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def _versions(tensors: list[torch.Tensor]) -> list[int]:
    """Each tensor's count of in-place changes (an inference tensor keeps none: 0)."""
    return [0 if t.is_inference() else t._version for t in tensors]


class Faster:
    """The graph with memory's kernels or the graph compiled whole by Inductor, whichever ran faster on the
    first call with this kind of input. The first call itself runs memory's kernels; if it changed any
    tensor it was given (the model's buffers, an input), the graph has effects that timing calls would
    repeat, so nothing is timed and memory's kernels are kept. Timing calls leave the random number
    generators as the first call left them. A graph of static sizes (Dynamo's guards admit one kind of
    input) runs what was kept with nothing looked up per call (an H100 ran a decoder block with Inductor
    kept behind the per-call lookup in 0.660 ms, torch.compile alone in 0.570)."""

    def __init__(
        self,
        kernels: Callable[..., Any],
        whole: Callable[..., Any],
        shown: Sequence[int] | None = None,
        static: bool = False,
    ) -> None:
        self.kernels, self.whole = kernels, whole
        self.shown = shown
        """Positions of the model's own inputs among the graph's (the rest: its state): the key and
        `last_choices` read these (Dynamo's guards keep the state's kinds)."""
        self.static = static
        self.only: Callable[..., Any] | None = None
        """What a static graph kept."""
        self.kept: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def __call__(self, *args: Any) -> Any:
        if self.only is not None:
            return self.only(*args)
        shown = [args[i] for i in self.shown] if self.shown is not None else args
        key = input_kind(shown)
        fn = self.kept.get(key)
        if fn is not None:
            return fn(*args)
        out = self._choose(key, args, shown)
        if self.static:
            self.only = self.kept.get(key)
        return out

    def _choose(self, key: tuple[Any, ...], args: tuple[Any, ...], shown: Sequence[Any]) -> Any:
        """The first call with this kind of input (`shown`: the model's own inputs among `args`): memory's
        kernels' answer, after timing both sides."""
        if len(self.kept) >= MAX_COMPILED:
            return self.kernels(*args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        versions = _versions(tensors)
        out = self.kernels(*args)
        shapes = " ".join(
            "x".join(map(str, t.shape)) or "scalar" for t in shown if isinstance(t, torch.Tensor)
        )
        if _versions(tensors) != versions:
            self.kept[key] = self.kernels
            why = "the graph updates tensors it is given (e.g. a batch norm in training): not timed"
            last_choices.append({"inputs": shapes, "kept": "memory's kernels", "why": why})
            return out
        device = next((t.device for t in tensors), torch.device("cpu"))
        cpu_rng = torch.get_rng_state()
        cuda_rng = (
            torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized()
            else None
        )
        try:
            ms = median_ms(
                {"memory's kernels": lambda: self.kernels(*args), "inductor": lambda: self.whole(*args)},
                device,
            )
        finally:
            torch.set_rng_state(cpu_rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
        kept = min(ms, key=lambda name: ms[name])
        self.kept[key] = self.kernels if kept == "memory's kernels" else self.whole
        last_choices.append({"inputs": shapes, "kept": kept, "ms": {k: round(v, 4) for k, v in ms.items()}})
        return out


def register() -> None:
    from torch._dynamo import list_backends, register_backend

    if "kernelwright" not in list_backends(exclude_tags=()):
        register_backend(kernelwright_backend, name="kernelwright")


register()
