"""Reading a task: run its source, build `Model` on the meta device, trace the forward, lower it to IR.

The reference source is the user's own task code, trusted like any file they ask us to optimize, so it
is executed in this process; but every tensor is made under `torch.device("meta")`, so a model that
allocates gigabytes on a GPU costs nothing here.

The forward is traced with `make_fx(..., tracing_mode="symbolic", pre_dispatch=True)`: high-level aten
ops (linear, softmax, layer_norm, cross_entropy_loss, ...) with sizes as symbols, so the generated code
can take every size from its inputs at run time. When symbolic tracing fails (code that branches on a
value), the trace is retried with fixed sizes; kernels stay shape-generic, only glue views keep the sizes
seen.

Besides the graph, the analysis keeps what a `ModelNew` needs to mirror `Model`: the forward's
signature, the constructor's source (so parameters get the same names and shapes for any constructor
arguments) and the top-level definitions the constructor uses.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import textwrap
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from kernelwright.providers.offline.frontend.batch_norm_stats import plain_batch_norms
from kernelwright.providers.offline.frontend.call_arguments import (
    KEPT_AS_TORCH,
    bind_named_arguments,
    bind_pad_widths,
    bind_schema,
    module_calls,
)
from kernelwright.providers.offline.frontend.cat_width import Widths, one_symbol_widths, restore_sums
from kernelwright.providers.offline.frontend.dense_clone import contiguous_layouts
from kernelwright.providers.offline.frontend.ir import Graph
from kernelwright.providers.offline.frontend.lowering import Lowerer, LoweringError, OtherTrace
from kernelwright.providers.offline.frontend.size_equalities import plain_size_equalities
from kernelwright.providers.offline.operators import ATEN_BINARY, ATEN_UNARY
from kernelwright.tasks import exec_task_module
from kernelwright.tasks.analysis import MODEL_LOCK
from kernelwright.tasks.pyast import parse_python

_TASK_FUNCS = {"get_inputs", "get_init_inputs", "get_small_inputs", "get_small_init_inputs"}


class AnalysisError(ValueError):
    """The task cannot be analysed; the message is one line."""


@dataclass
class ModelSource:
    """What the generated module copies from the task so ModelNew mirrors Model."""

    imports: list[str] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    init_def: str = ""
    forward_args: str = "self, x"
    arg_names: list[str] = field(default_factory=list)


@dataclass
class AnalyzedTask:
    name: str
    source_hash: str
    graph: Graph
    model: ModelSource
    symbolic: bool
    notes: list[str] = field(default_factory=list)


# ---- the constructor and signature, copied from source ---------------------------------------------


class _SuperFix(ast.NodeTransformer):
    """`super(Model, self).__init__()` -> `super().__init__()`: ModelNew is not a Model."""

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
            node.args = []
        return node


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def model_source(source: str) -> ModelSource:
    """The constructor, forward signature and needed top-level definitions of `class Model`."""
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        raise AnalysisError(f"the task does not parse: {exc.msg} (line {exc.lineno})") from None
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise AnalysisError("the task defines no class Model")
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    fwd = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if fwd is None:
        raise AnalysisError("class Model has no forward method")
    out = ModelSource()
    out.forward_args = ast.unparse(fwd.args)
    out.arg_names = [a.arg for a in fwd.args.posonlyargs + fwd.args.args][1:] + [
        a.arg for a in fwd.args.kwonlyargs
    ]
    if fwd.args.vararg or fwd.args.kwarg:
        raise AnalysisError("Model.forward takes *args/**kwargs; name its inputs")
    if init is not None:
        init = _SuperFix().visit(parse_python(ast.unparse(init)).body[0])
        init.decorator_list = []
        out.init_def = ast.unparse(init)
        needed = _names_used(init)
    else:
        out.init_def = "def __init__(self):\n    super().__init__()"
        needed = set()
    # Module-level definitions the constructor needs (helper modules, constants), transitively.
    defs: dict[str, ast.stmt] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.ClassDef | ast.FunctionDef)
            and stmt.name != "Model"
            and stmt.name not in _TASK_FUNCS
        ):
            defs[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    defs[t.id] = stmt
    chosen: list[ast.stmt] = []
    todo = sorted(needed)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        stmt = defs[name]
        if stmt not in chosen:
            chosen.append(stmt)
            todo.extend(sorted(_names_used(stmt)))
    order = {id(s): i for i, s in enumerate(tree.body)}
    out.helpers = [ast.unparse(s) for s in sorted(chosen, key=lambda s: order[id(s)])]
    out.imports = [ast.unparse(s) for s in tree.body if isinstance(s, ast.Import | ast.ImportFrom)]
    return out


# ---- tracing ---------------------------------------------------------------------------------------


def _build(module: Any, small: bool = False) -> tuple[torch.nn.Module, list[Any]]:
    with torch.device("meta"):
        torch.manual_seed(0)
        try:
            init = list(module.get_small_init_inputs() if small else module.get_init_inputs())
            model = module.Model(*init)
            inputs = list(module.get_small_inputs() if small else module.get_inputs())
        except Exception as exc:
            raise AnalysisError(
                f"building Model on the meta device failed: {type(exc).__name__}: {exc}"
            ) from exc
    inputs = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in inputs]
    model = model.to("meta")
    return model, inputs


def _trace(
    model: torch.nn.Module, inputs: list[Any], mode: Literal["symbolic", "fake"], one_width: bool = True
) -> tuple[torch.fx.GraphModule, list[str]]:
    from torch.func import functional_call
    from torch.fx.experimental.proxy_tensor import make_fx

    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    values = [p for _, p in model.named_parameters()] + [b for _, b in model.named_buffers()]

    def fwd(plist: list[torch.Tensor], *args: Any) -> Any:
        out = functional_call(model, dict(zip(names, plist, strict=True)), args)
        return out

    import torch._dynamo.config as dynamo_config
    import torch.fx.experimental._config as fx_config

    # Without duck shaping, two sizes that happen to be equal (a square matrix) keep separate symbols.
    # Fake tensors' dispatch cache is kept per ShapeEnv, so a trace (a ShapeEnv of its own) rarely hits
    # it, and filling it costs symbolic work of its own for every op: a region's symbolic trace takes
    # about a quarter less time without it (DenseNet's concatenations, Swin's views), the same graph.
    # A wide concatenation, a contiguous tensor's copy and a training-mode BatchNorm of a plain input
    # skip sympy work (cat_width.py, dense_clone.py, batch_norm_stats.py), and so does learning that two
    # size symbols are equal (size_equalities.py).
    with (
        torch.no_grad(),
        torch.device("meta"),
        fx_config.patch(use_duck_shape=False),  # type: ignore[attr-defined]
        dynamo_config.patch(fake_tensor_cache_enabled=False),
        _tensor_meta_without_memory_format(),
        one_symbol_widths() if one_width else contextlib.nullcontext(Widths()) as widths,
        contiguous_layouts(),
        plain_batch_norms(),
        plain_size_equalities(),
    ):
        gm = make_fx(fwd, tracing_mode=mode, pre_dispatch=True)(values, *inputs)
    # A concatenation's width was one symbol while tracing (frontend/cat_width.py); the shapes read
    # as its sum again, or, where they cannot, the forward is traced without it.
    if not restore_sums(widths):
        return _trace(model, inputs, mode, one_width=False)
    gm.meta["kw_width_symbols"] = set(widths.sums)
    return gm, names


@contextlib.contextmanager
def _tensor_meta_without_memory_format() -> Iterator[None]:
    """make_fx's best-effort `tensor_meta` without its memory-format search: three contiguity queries
    over every node's symbolic strides (a third of a DenseNet region's trace), and the writer reads
    only a node's shape and dtype from it. The queries guard nothing (`..._or_false`), so the ShapeEnv
    and the graph are the same. Callers hold MODEL_LOCK (the patch is process-wide)."""
    from torch.fx.experimental import proxy_tensor

    extract = proxy_tensor._extract_tensor_metadata
    proxy_tensor._extract_tensor_metadata = functools.partial(extract, include_contiguity=False)  # type: ignore[assignment]
    try:
        yield
    finally:
        proxy_tensor._extract_tensor_metadata = extract  # type: ignore[assignment]


def _var_to_val(gm: torch.fx.GraphModule) -> dict:
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        shape_env = None
        if isinstance(val, torch.Tensor):
            fm = getattr(val, "fake_mode", None)
            shape_env = getattr(fm, "shape_env", None)
        elif isinstance(val, torch.SymInt):
            shape_env = val.node.shape_env
        if shape_env is not None:
            values = dict(getattr(shape_env, "backed_var_to_val", None) or shape_env.var_to_val)
            for sym in gm.meta.get("kw_width_symbols", ()):
                values.pop(sym, None)  # the trace's stand-in for a concatenation's width: no size of its own
            return values
    return {}


def _output_kind(model: torch.nn.Module, inputs: list[Any]) -> str:
    with torch.no_grad(), torch.device("meta"):
        out = model(*inputs)
    if isinstance(out, torch.Tensor):
        return "single"
    if isinstance(out, tuple) and all(isinstance(t, torch.Tensor) for t in out):
        return "tuple"
    if isinstance(out, list) and all(isinstance(t, torch.Tensor) for t in out):
        return "list"
    raise AnalysisError(
        f"Model.forward returns {type(out).__name__}; expected a tensor or a tuple/list of tensors"
    )


# ---- constructor arguments that the trace turns into constants --------------------------------------

# Arguments whose value changes the structure of the lowering: never read from the module at run time.
_STRUCTURAL = {"dim", "dims", "keepdim", "normalized_shape", "ord", "p", "reduction", "ignore_index",
               "approximate", "dtype", "layout", "device", "start", "end", "step", "index", "size", "shape",
               "sizes", "correction", "unbiased", "half_to_float", "train", "training", "cudnn_enable",
               "pin_memory", "memory_format", "non_blocking", "copy", "label_smoothing", "swap", "log_target"}  # fmt: skip


def _attributes(model: torch.nn.Module) -> dict[str, Any]:
    """Numbers kept on the model and its submodules, by Python path ("group_norm.num_groups")."""
    out: dict[str, Any] = {}
    for prefix, mod in model.named_modules():
        for k, v in vars(mod).items():
            if k.startswith("_") or k == "training":
                continue
            path = f"{prefix}.{k}" if prefix else k
            if isinstance(v, int | float) and not isinstance(v, bool):
                out[path] = v
            elif isinstance(v, tuple | list) and all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in v
            ):
                for i, x in enumerate(v):
                    out[f"{path}[{i}]"] = x
    return out


def _match_attribute(
    full: float, small: float, fa: dict[str, Any], sa: dict[str, Any], arg: str = ""
) -> str | None:
    """Python (on `self`) that gives `full` on the full model and `small` on the small one, else None.

    Among several matches, an attribute named like the op's argument wins (`conv.groups` for `groups`).
    """
    forms = [("{}", lambda v: v), ("(1.0 / {})", lambda v: 1.0 / v if v else None), ("(-{})", lambda v: -v),
             ("({} ** -0.5)", lambda v: v**-0.5 if v and v > 0 else None)]  # fmt: skip
    for text, fn in forms:
        hits = [p for p in fa if p in sa and _close(fn(fa[p]), full) and _close(fn(sa[p]), small)]
        if hits:

            def rank(p: str) -> tuple[int, int, int]:
                leaf = p.split(".")[-1].split("[")[0]
                named = bool(arg) and (leaf == arg or leaf.rstrip("s") == arg.rstrip("s"))
                return (not named, p.count("."), len(p))

            best = min(hits, key=rank)
            return text.format("self." + best)
    return None


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(b)))


def _op_is_opaque(target: Any) -> bool:
    from kernelwright.providers.offline.plugins import lowering_handlers

    name = target.overloadpacket.__name__.rstrip("_")
    if name in KEPT_AS_TORCH:
        return True
    return name not in lowering_handlers() and name not in ATEN_UNARY and name not in ATEN_BINARY


def bind_hyperparameters(gm_full: Any, gm_small: Any, m_full: torch.nn.Module, m_small: torch.nn.Module,
                         var_to_val: dict, other_values: dict | None = None) -> tuple[dict, list[str]]:  # fmt: skip
    """Replace, in `gm_full`, constants that differ between the two traces with runtime module reads.

    Returns (symbol -> Python source on `self`, notes); `other_values` receives each symbol's value in
    the second trace. A differing constant with no attribute behind it
    stays a constant, and a note says the program may only be right for the traced constructor arguments.
    """
    import sympy

    from kernelwright.providers.offline.frontend.ir import SymScalar

    a_nodes = [n for n in gm_full.graph.nodes if n.op == "call_function"]
    b_nodes = [n for n in gm_small.graph.nodes if n.op == "call_function"]
    notes: list[str] = []
    if [n.target for n in a_nodes] != [n.target for n in b_nodes]:
        notes.append("the forward's ops change with the constructor arguments; constants kept as traced")
        return {}, notes
    fa, sa = _attributes(m_full), _attributes(m_small)
    sources: dict[Any, str] = {}
    by_text: dict[str, Any] = {}

    def symbol_for(text: str, full: float, small: float) -> Any:
        if text not in by_text:
            sym = sympy.Symbol(f"h{len(by_text)}")
            by_text[text] = sym
            sources[sym] = text
            var_to_val[sym] = sympy.sympify(full)
            if other_values is not None:
                other_values[sym] = sympy.sympify(small)
        return by_text[text]

    def swap(x: Any, y: Any, name: str, opaque: bool) -> Any:
        if isinstance(x, list | tuple) and isinstance(y, list | tuple) and len(x) == len(y):
            return type(x)(swap(u, w, name, opaque) for u, w in zip(x, y, strict=True))
        if (
            isinstance(x, bool)
            or isinstance(y, bool)
            or not isinstance(x, int | float)
            or not isinstance(y, int | float)
        ):
            return x
        if x == y or name in _STRUCTURAL:
            return x
        if isinstance(x, int) and not opaque and name not in ("group", "num_groups", "groups"):
            return x
        text = _match_attribute(x, y, fa, sa, name)
        if text is None:
            notes.append(f"a constant ({x}) depends on the constructor arguments and was kept as traced")
            return x
        return SymScalar(symbol_for(text, x, y), isinstance(x, float))

    for na, nb in zip(a_nodes, b_nodes, strict=True):
        target = na.target
        if not isinstance(target, torch._ops.OpOverload):
            continue
        opaque = _op_is_opaque(target)
        schema = target._schema.arguments
        # Compare schema-bound arguments: the trace omits arguments left at their default.
        fa_args, fb_args = bind_schema(schema, na), bind_schema(schema, nb)
        args = list(na.args)
        kwargs = dict(na.kwargs)
        for i, arg in enumerate(schema):
            if arg.name not in fa_args or arg.name not in fb_args:
                continue
            new = swap(fa_args[arg.name], fb_args[arg.name], arg.name, opaque)
            if new is fa_args[arg.name]:
                continue
            if arg.kwarg_only or i >= len(args) and arg.name in na.kwargs:
                kwargs[arg.name] = new
                continue
            while len(args) < i:
                args.append(fa_args[schema[len(args)].name])
            if i < len(args):
                args[i] = new
            else:
                args.append(new)
        na.args = tuple(args)
        na.kwargs = kwargs
    return sources, notes


def _varied_module(source: str, name: str) -> Any:
    """The task's module with its named size constants varied (tasks/resize.py `vary`), or None.

    Not get_inputs' literal sizes: the symbolic trace already reads an input's dims from the input, and a
    region cut from a whole model has every size as a literal (varying those took DenseNet121's first
    programs from 8 to 17 s and SwinMLP's from 10 to 53 s: a refused region's varied trace alone took 20 s in
    sympy)."""
    from kernelwright.tasks.resize import vary

    try:
        varied = vary(source, f"kw_offline_{name}_varied", literals=False)
        return exec_task_module(varied.source, f"kw_offline_{name}_varied") if varied is not None else None
    except Exception:  # the task's own code may raise anything at other sizes: no second trace then
        return None


def _shapes_by_node(gm: Any, gm_other: Any) -> dict[str, tuple[int, ...]]:
    """Output shape of each op node in `gm_other` (at its traced values), by the name of the node at the
    same place in `gm`; empty when the two traces do not have the same ops."""
    a_nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    b_nodes = [n for n in gm_other.graph.nodes if n.op == "call_function"]
    if [n.target for n in a_nodes] != [n.target for n in b_nodes]:
        return {}
    values = _var_to_val(gm_other)
    out: dict[str, tuple[int, ...]] = {}
    for na, nb in zip(a_nodes, b_nodes, strict=True):
        val = nb.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        try:
            out[na.name] = tuple(int(_hint(d, values)) for d in val.shape)
        except (TypeError, ValueError):
            continue
    return out


def _placeholder_shapes(gm: Any) -> list[tuple[int, ...] | None]:
    """Each placeholder's shape at the trace's values (None for a non-tensor), in order."""
    values = _var_to_val(gm)
    out: list[tuple[int, ...] | None] = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        val = n.meta.get("val")
        try:
            out.append(
                tuple(int(_hint(d, values)) for d in val.shape) if isinstance(val, torch.Tensor) else None
            )
        except (TypeError, ValueError):
            out.append(None)
    return out


def _hint(d: Any, values: dict) -> Any:
    if isinstance(d, torch.SymInt):
        import sympy

        return sympy.sympify(d.node.expr).xreplace(values)
    return d


def analyze_source(source: str, name: str = "task") -> AnalyzedTask:
    """Trace and lower a task's source; raises AnalysisError with a one-line reason."""
    msrc = model_source(source)
    try:
        module = exec_task_module(source, f"kw_offline_{name}")
    except Exception as exc:
        raise AnalysisError(str(exc).splitlines()[0]) from exc
    model, inputs = _build(module)
    sig = inspect.signature(module.Model.forward)
    n_args = len(sig.parameters) - 1
    if len(inputs) != n_args and not any(
        p.default is not inspect.Parameter.empty for p in sig.parameters.values()
    ):
        raise AnalysisError(f"get_inputs() gives {len(inputs)} values but forward takes {n_args}")
    kind = _output_kind(model, inputs)
    notes: list[str] = []
    last: Exception | None = None
    modes: tuple[Literal["symbolic", "fake"], ...] = ("symbolic", "fake")
    small = callable(getattr(module, "get_small_init_inputs", None)) and callable(
        getattr(module, "get_small_inputs", None)
    )
    # A second trace at other sizes: the task's small inputs, else its size constants varied. A number
    # that differs between the two traces comes from the sizes and must be read at run time.
    other = module if small else _varied_module(source, name)
    for mode in modes:
        try:
            gm, pnames = _trace(model, inputs, mode)
        except AnalysisError:
            raise
        except Exception as exc:  # tracing failures come in many types; fixed sizes may still trace
            last = exc
            continue
        gm_small = m_small = None
        if other is not None:
            # The harness also builds the model from other constructor arguments (the small ones, a second
            # shape's): constants that come from them must be read from the module at run time.
            try:
                m_small, in_small = _build(other, small=small)
                gm_small, _ = _trace(m_small, in_small, mode)
            except AnalysisError:
                if small:
                    raise
                gm_small = m_small = None
            except Exception as exc:
                if small:
                    last = exc
                    continue
                gm_small = m_small = None  # varied sizes the task cannot trace at: no second trace
        phs = [("param", n) for n in pnames] + [
            ("input", msrc.arg_names[i] if i < len(msrc.arg_names) else f"arg{i}") for i in range(len(inputs))
        ]
        var_to_val = _var_to_val(gm)
        modules = module_calls(gm, pnames, model)  # before the traces' numbers are bound to attributes
        sources: dict = {}
        modules |= dict.fromkeys(bind_named_arguments(gm, model, var_to_val, sources), "")
        modules |= dict.fromkeys(bind_pad_widths(gm, pnames, model, var_to_val, sources), "")
        other = OtherTrace()
        if gm_small is not None and m_small is not None:
            other = OtherTrace(_shapes_by_node(gm, gm_small), _placeholder_shapes(gm_small))
            at_other = _attributes(m_small)  # a view's size may be one of them (frontend/attribute_sizes.py)
            other.attributes = {p: (v, at_other[p]) for p, v in _attributes(model).items() if p in at_other}
            bound, hnotes = bind_hyperparameters(gm, gm_small, model, m_small, var_to_val, other.values)
            sources.update(bound)
            notes.extend(n for n in dict.fromkeys(hnotes) if n not in notes)
        try:
            lowerer = Lowerer(gm, var_to_val, other, modules)
            graph = lowerer.run(phs)
            notes.extend(n for n in dict.fromkeys(lowerer.notes) if n not in notes)
        except LoweringError as exc:
            raise AnalysisError(str(exc)) from exc
        graph.attr_sources.update(sources)
        graph.output_kind = kind
        if mode != "symbolic":
            notes.append("traced with fixed sizes: views keep the sizes seen while tracing")
        return AnalyzedTask(name, _hash(source), graph, msrc, mode == "symbolic", notes)
    msg = f"{type(last).__name__}: {str(last).splitlines()[0] if str(last) else ''}"
    raise AnalysisError(f"tracing Model.forward failed: {msg}")


def release_shape_envs() -> None:
    """Empty the caches of ShapeEnv's methods once a task's traces are done: torch memoizes some (e.g.
    `get_implications`) in class-level caches keyed by the ShapeEnv itself, holding every trace's ShapeEnv for the
    life of the process (DenseNet201's 103, the heap a third larger for every full collection to walk). No later
    trace can ask for a finished one's entries, so none is lost. Callers hold MODEL_LOCK, as every trace does
    (tests/unit/test_analysis_shape_envs.py)."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    for value in vars(ShapeEnv).values():
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()


def _hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


_CACHE: OrderedDict[str, AnalyzedTask | AnalysisError] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 16


def analyze_cached(source: str, name: str = "task") -> AnalyzedTask:
    """`analyze_source` with a small in-process cache: a search asks about the same task many times."""
    key = _hash(textwrap.dedent(source))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
    if hit is None:
        try:
            with MODEL_LOCK:  # tracing patches process-wide torch state: no other model may run meanwhile
                try:
                    hit = analyze_source(source, name)
                finally:
                    release_shape_envs()
        except AnalysisError as exc:
            hit = exc
        except Exception as exc:  # user code can raise anything while it is built or run on meta
            first = str(exc).splitlines()[0] if str(exc) else ""
            hit = AnalysisError(f"analysing the task raised {type(exc).__name__}: {first}"[:300])
        with _CACHE_LOCK:
            _CACHE[key] = hit
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    if isinstance(hit, AnalysisError):
        raise hit
    return hit
