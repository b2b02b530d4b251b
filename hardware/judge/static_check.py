"""Checks on a candidate's source text, before anything runs: read with `ast`, never executed.

Rejected (`static_check`, or `syntax_error` when it does not parse):
- no `ModelNew` class (or one without a forward);
- no Triton kernel (`@triton.jit`, possibly under `@triton.autotune` / `@triton.heuristics`), or no
  launch of one (`kernel[grid](...)` or `kernel.run(...)`) anywhere outside kernel bodies;
- any use of the reference `Model`, or a way to reach the reference or the harness: importing the task
  module, the project's packages, `importlib`, `gc`, `inspect`, `ctypes` or `__main__`; `__import__`,
  `exec`, `eval`, `compile`; frame and module-table access (`sys._getframe`, `f_back`, `sys.modules`),
  a function's closure or code;
- names that read torch's dispatch or function modes, the interpreter's frames or threads (the evidence
  recorder is a dispatch mode on every checked call and on no timed one), as attributes, imports or
  strings, and CUDA graphs (a replay launches kernels no one records); hardware.candidate.tripwires
  catches the same at run time, names computed there included;
- a try/except that can hide a fallback: a kernel launch inside the try body (directly or through a
  function of the module that launches one), or an except branch that computes with torch;
- writes to torch's or triton's state (`torch.backends...allow_tf32 = True`, `setattr(torch, ...)`,
  `torch.set_float32_matmul_precision`, ...), which would change the precision the reference is held to
  or switch off the harness's output poisoning; and side CUDA streams, whose work event timing on the
  current stream would not see.

Reported, not rejected: torch ops that remain in the candidate (`torch.matmul`, `F.conv2d`, `x.sum()`,
`a @ b`, calls of `nn` modules kept as attributes), as `torch_ops_remaining`. Allocation, views and
layout (`empty`, `empty_like`, `view`, `reshape`, `contiguous`, `stride`, casts) are not counted.

These checks are cheap early rejections, never proof: source text can hide what it does (getattr,
aliases, operators). The judge decides from what forward actually ran (hardware.judge.evidence): a forward
whose output no Triton kernel wrote fails as a torch fallback however its source looks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Literal

from pydantic import BaseModel, Field

from kernelwright.hardware.candidate.tripwires import GRAPHS_WHY, INTROSPECTION
from kernelwright.tasks.pyast import parse_python

_KERNEL_DECORATORS = ("jit", "autotune", "heuristics")
_FORBIDDEN_MODULES = {
    "importlib": "imports importlib (could reach the reference or the harness)",
    "gc": "imports gc (could reach the reference's tensors)",
    "inspect": "imports inspect (could reach the harness's frames)",
    "ctypes": "imports ctypes",
    "__main__": "imports __main__",
    "tasks": "imports the task package",
    "hardware": "imports the evaluation harness",
    "graphs": "imports the agent",
    "nodes": "imports the agent",
    "memory": "imports the agent's memory",
    "providers": "imports the agent's providers",
}
_FORBIDDEN_BUILTINS = {"__import__", "exec", "eval", "compile"}
_FORBIDDEN_ATTRS = {
    "_getframe": "reads interpreter frames",
    "f_back": "reads interpreter frames",
    "f_globals": "reads interpreter frames",
    "f_locals": "reads interpreter frames",
    "__globals__": "reads a function's globals",
    "__subclasses__": "walks class hierarchies",
    "__import__": "imports modules at run time",
    "__closure__": "reads a function's closure",
    "cell_contents": "reads a function's closure",
    "__wrapped__": "reads a wrapped function",
    "__code__": "reads or replaces a function's code",
}
_INTROSPECTION = frozenset(
    name for names in INTROSPECTION.values() for name in names if name not in ("_getframe",)
) | {"_python_dispatch", "_set_dispatch_mode", "_unset_dispatch_mode", "_push_on_torch_dispatch_stack",
     "_push_on_torch_function_stack", "_dispatch_tls_set_dispatch_key_included",
     "_dispatch_tls_set_dispatch_key_excluded"}  # fmt: skip
"""Names that read the dispatch and function mode state, frames or threads: the evidence recorder is a dispatch
mode on the calls the judge checks and on none it times (hardware.candidate.tripwires catches them at run
time, names computed there included)."""
_GRAPH_ATTRS = {
    "CUDAGraph",
    "_CUDAGraph",
    "make_graphed_callables",
    "graph_pool_handle",
    "_graph_pool_handle",
}
_GRAPH_CALLS = {"torch.cuda.graph", "torch.cuda.graphs.graph"}
_GRAPH_COMPILE_MODES = {"reduce-overhead", "max-autotune"}
"""torch.compile modes that capture CUDA graphs."""
_STATE_SETTERS = {
    "torch.set_float32_matmul_precision",
    "torch.use_deterministic_algorithms",
    "torch.set_default_dtype",
    "torch.set_default_device",
    "torch.set_flush_denormal",
    "torch.backends.cudnn.flags",
}
_SIDE_STREAMS = {
    "torch.cuda.Stream",
    "torch.cuda.stream",
    "torch.cuda.set_stream",
    "torch.cuda.ExternalStream",
}
# torch.* calls that allocate, describe, create views or set up parameters: not computation.
_TORCH_NOT_COMPUTE = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "arange",
    "tensor",
    "as_tensor",
    "as_strided",
    "from_numpy",
    "randn",
    "rand",
    "randint",
    "randn_like",
    "rand_like",
    "randint_like",
    "normal",
    "manual_seed",
    "device",
    "dtype",
    "Size",
    "finfo",
    "iinfo",
    "is_tensor",
    "is_floating_point",
    "is_complex",
    "numel",
    "get_default_dtype",
    "no_grad",
    "inference_mode",
    "enable_grad",
    "set_grad_enabled",
    "promote_types",
    "result_type",
    "broadcast_shapes",
    "view_as_real",
    "view_as_complex",
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "permute",
    "t",
    "narrow",
    "chunk",
    "split",
    "unbind",
    "broadcast_to",
    "Tensor",
    "Generator",
    "get_device",
    "empty_permuted",
}
_TORCH_NOT_COMPUTE_PREFIXES = ("cuda.", "backends.", "nn.init.", "nn.Parameter", "utils.", "library.",
                               "autograd.", "_dynamo.", "jit.", "testing.", "version")  # fmt: skip
_NN_CONTAINERS = {
    "Parameter", "ParameterList", "ParameterDict", "Module", "ModuleList", "ModuleDict", "Identity",
    "Buffer",
}  # fmt: skip
TENSOR_COMPUTE_METHODS = frozenset(
    """abs abs_ add add_ addmm addmm_ addcmul addcdiv addmv all any amax amin argmax argmin argsort baddbmm
    bmm ceil clamp clamp_ clamp_min clamp_max clip clip_ cos cosh cross cumsum cumprod cummax cummin diff
    div div_ dot eq erf exp exp_ expm1 floor fmod gather ge gt index_add index_select kthvalue le lerp log
    log_ log1p log2 log_softmax logsumexp lt masked_fill masked_fill_ matmul max maximum mean median min
    minimum mm mul mul_ mv nan_to_num ne neg norm outer pow pow_ prod reciprocal relu relu_ remainder round
    rsqrt scatter scatter_add scatter_reduce sigmoid sigmoid_ sign sin sinh softmax sort sqrt sqrt_ square
    std sub sub_ sum tan tanh tanh_ topk tril triu trunc var where logical_and logical_or logical_not
    bitwise_and bitwise_or conv2d""".split()
)


class StaticReport(BaseModel):
    """What the static check found in a candidate's source."""

    ok: bool
    error_kind: Literal["syntax_error", "static_check"] | None = None
    error: str | None = None
    kernels: list[str] = Field(default_factory=list)
    """Names of the Triton kernels (@triton.jit functions) the source defines."""
    launched: list[str] = Field(default_factory=list)
    """Names of the kernels launched somewhere (kernel[grid](...) or kernel.run(...))."""
    torch_ops_remaining: list[str] = Field(default_factory=list)
    """Torch computations left in the candidate, as "torch.matmul (line 12)"."""


class _Module:
    """The source's tree with import aliases resolved, so `F.relu` reads as torch.nn.functional.relu."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.aliases: dict[str, str] = {}
        self.imported: list[tuple[str, int]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imported.append((a.name, node.lineno))
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom):
                base = "." * node.level + (node.module or "")
                self.imported.append((base, node.lineno))
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name

    def resolve(self, expr: ast.expr) -> str | None:
        """Dotted name of a Name/Attribute chain rooted at an imported name, else None."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if isinstance(expr, ast.Name) and expr.id in self.aliases:
            return ".".join([self.aliases[expr.id], *reversed(parts)])
        return None


def _decorator_target(dec: ast.expr) -> ast.expr:
    return dec.func if isinstance(dec, ast.Call) else dec


def _is_kernel_decorator(mod: _Module, dec: ast.expr) -> bool:
    name = mod.resolve(_decorator_target(dec))
    return bool(name and name.startswith("triton") and name.rsplit(".", 1)[-1] in _KERNEL_DECORATORS)


def _find_kernels(mod: _Module) -> tuple[set[str], list[ast.AST]]:
    """Kernel names and the kernel function bodies (which are Triton code, not torch code)."""
    names: set[str] = set()
    bodies: list[ast.AST] = []
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if any(_is_kernel_decorator(mod, d) for d in node.decorator_list):
                names.add(node.name)
                bodies.append(node)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            # kernel = triton.jit(fn) / triton.autotune(...)(triton.jit(fn))
            call: ast.expr = node.value
            while isinstance(call, ast.Call):
                if _is_kernel_decorator(mod, call.func):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
                    break
                call = call.func
    return names, bodies


def _names_in(expr: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def _launch_helpers(tree: ast.Module) -> set[str]:
    """Module functions that launch the kernel given as their first parameter (`def launch(kernel, grid,
    ...)` whose body calls `kernel[grid](...)`): a call `launch(k, grid, ...)` launches k."""
    helpers = set()
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.args.args:
            first = fn.args.args[0].arg
            if any(
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Subscript)
                and first in _names_in(n.func.value)
                for n in ast.walk(fn)
            ):
                helpers.add(fn.name)
    return helpers


def _launch_of(node: ast.AST, kernels: set[str], helpers: AbstractSet[str] = frozenset()) -> str | None:
    """The kernel a call launches: `k[grid](...)`, `wrap(k)[grid](...)`, `k.run(...)` or `launch(k, ...)`
    through a launch helper (_launch_helpers)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Subscript):
        hit = _names_in(func.value) & kernels
        return min(hit) if hit else None
    if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name):
        return func.value.id if func.value.id in kernels else None
    if isinstance(func, ast.Name) and func.id in helpers and node.args and isinstance(node.args[0], ast.Name):
        return node.args[0].id if node.args[0].id in kernels else None
    return None


def _walk_outside(node: ast.AST, skip: set[int]) -> Iterator[ast.AST]:
    """ast.walk that does not descend into the nodes whose id() is in `skip` (kernel bodies)."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if id(cur) in skip:
            continue
        yield cur
        stack.extend(ast.iter_child_nodes(cur))


def _functions(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level functions and methods by bare name (methods are called as self.name)."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.setdefault(item.name, item)
    return out


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
        return f.attr
    return None


def _launching_functions(tree: ast.Module, kernels: set[str], helpers: AbstractSet[str]) -> set[str]:
    """Functions of the module that launch a kernel, directly (or through a launch helper) or through each
    other (fixed point)."""
    funcs = _functions(tree)
    calls: dict[str, set[str]] = {}
    launching: set[str] = set()
    for name, fn in funcs.items():
        calls[name] = set()
        for node in ast.walk(fn):
            if _launch_of(node, kernels, helpers):
                launching.add(name)
            elif isinstance(node, ast.Call) and (callee := _called_name(node)) in funcs:
                calls[name].add(callee)
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in launching and callees & launching:
                launching.add(name)
                changed = True
    return launching


class _TorchOps:
    """Finds torch computations in the candidate outside kernel bodies."""

    def __init__(self, mod: _Module, skip: set[int]) -> None:
        self.mod = mod
        self.skip = skip
        self.nn_attrs = self._nn_module_attrs()

    def _nn_module_attrs(self) -> dict[str, str]:
        """self.<attr> = nn.Something(...) in any method: calling self.<attr>(x) runs that torch module."""
        out: dict[str, str] = {}
        for node in ast.walk(self.mod.tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                name = self.mod.resolve(node.value.func)
                if not name or not name.startswith("torch.nn.") or name.rsplit(".", 1)[-1] in _NN_CONTAINERS:
                    continue
                if name.startswith(("torch.nn.init.", "torch.nn.functional.", "torch.nn.Parameter")):
                    continue
                for t in node.targets:
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id == "self"
                    ):
                        out[t.attr] = name
        return out

    def op_of(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return "@ (matmul)"
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        name = self.mod.resolve(func)
        if name is not None:
            if name.startswith("torch.nn.functional."):
                return "F." + name.removeprefix("torch.nn.functional.")
            if name.startswith("torch."):
                rest = name.removeprefix("torch.")
                if rest in _TORCH_NOT_COMPUTE or rest.startswith(_TORCH_NOT_COMPUTE_PREFIXES):
                    return None
                if rest.startswith("nn."):
                    return None  # constructing an nn module; its calls are counted via nn_attrs
                return name
            return None  # tl.*, math.*, triton.* and other modules: not torch computation
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if isinstance(receiver, ast.Name) and receiver.id == "self":
                if func.attr in self.nn_attrs:
                    return f"{self.nn_attrs[func.attr]} (self.{func.attr})"
                return None
            if func.attr in TENSOR_COMPUTE_METHODS:
                return f".{func.attr}()"
        return None

    def find(self, root: ast.AST) -> list[tuple[str, int]]:
        """(op, line) in source order."""
        found = []
        for node in _walk_outside(root, self.skip):
            op = self.op_of(node)
            if op:
                found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), op))
        return [(op, line) for line, _, op in sorted(found)]


def _problems(mod: _Module, task_name: str | None, skip: set[int]) -> Iterator[str]:
    forbidden = dict(_FORBIDDEN_MODULES)
    if task_name:
        forbidden[task_name] = "imports the task module"
    for target in mod.aliases.values():  # from torch._C import _len_torch_dispatch_stack
        hit = [p for p in target.split(".") if p in _INTROSPECTION or p in _GRAPH_ATTRS]
        if hit:
            yield _named(hit[0], next((ln for n, ln in mod.imported if target.startswith(n)), 0))
    for name, line in mod.imported:
        top = name.lstrip(".").split(".")[0]
        if name.startswith("."):
            yield f"line {line}: relative import {name!r} (a candidate is a standalone module)"
        elif top in forbidden:
            yield f"line {line}: {forbidden[top]}"
    for node in _walk_outside(mod.tree, skip):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name) and node.id == "Model":
            yield f"line {line}: uses the reference `Model`; ModelNew must compute the result itself"
        elif isinstance(node, ast.Call):
            fname = node.func.id if isinstance(node.func, ast.Name) else None
            full = mod.resolve(node.func)
            if fname in _FORBIDDEN_BUILTINS and fname not in mod.aliases:
                yield f"line {line}: calls {fname}()"
            elif (
                fname in ("setattr", "delattr")
                and node.args
                and (mod.resolve(node.args[0]) or "").split(".")[0] in ("torch", "triton")
            ):
                yield f"line {line}: {fname}() on {mod.resolve(node.args[0])}, changing torch/triton global state"
            elif full in _STATE_SETTERS:
                yield f"line {line}: calls {full}(), changing global torch state the reference is checked under"
            elif full in _SIDE_STREAMS:
                yield f"line {line}: uses a side CUDA stream ({full}); timing on the current stream would miss its work"
            elif full in _GRAPH_CALLS:
                yield f"line {line}: uses CUDA graphs ({full}): {GRAPHS_WHY}"
            elif full == "torch.compile" and any(
                k.arg == "mode"
                and isinstance(k.value, ast.Constant)
                and k.value.value in _GRAPH_COMPILE_MODES
                for k in node.keywords
            ):
                yield f"line {line}: torch.compile in a mode that captures CUDA graphs: {GRAPHS_WHY}"
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (node.value in _INTROSPECTION or node.value in _GRAPH_ATTRS)
        ):  # getattr(torch._C, "_len_torch_dispatch_stack")
            yield _named(node.value, line)
        elif isinstance(node, ast.Attribute):
            if node.attr in _INTROSPECTION or node.attr in _GRAPH_ATTRS:
                yield _named(node.attr, line)
            elif node.attr in _FORBIDDEN_ATTRS:
                yield f"line {line}: {_FORBIDDEN_ATTRS[node.attr]} (.{node.attr})"
            elif node.attr == "modules" and mod.resolve(node.value) == "sys":
                yield f"line {line}: reads sys.modules"
        targets: Iterable[ast.expr] = ()
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            full = mod.resolve(t) if isinstance(t, ast.Attribute) else None
            if full and full.split(".")[0] in ("torch", "triton"):
                yield f"line {line}: assigns {full}, changing torch/triton global state"


def _named(name: str, line: int) -> str:
    if name in _GRAPH_ATTRS:
        return f"line {line}: uses CUDA graphs ({name}): {GRAPHS_WHY}"
    return (
        f"line {line}: reads the harness's dispatch or function modes, frames or threads ({name}), which "
        "tell the calls the judge checks from the ones it times"
    )


def _check_try(
    mod: _Module, kernels: set[str], helpers: AbstractSet[str], ops: _TorchOps, skip: set[int]
) -> Iterator[str]:
    launching = _launching_functions(mod.tree, kernels, helpers)
    for node in _walk_outside(mod.tree, skip):
        if not isinstance(node, ast.Try | ast.TryStar) or not node.handlers:
            continue
        body = ast.Module(body=node.body, type_ignores=[])
        for sub in ast.walk(body):
            kernel = _launch_of(sub, kernels, helpers)
            via = _called_name(sub) if isinstance(sub, ast.Call) else None
            if kernel or (via and via in launching):
                what = f"launch of {kernel}" if kernel else f"call of {via}() which launches a kernel"
                yield (
                    f"line {node.lineno}: try/except around a {what}; a failing kernel must fail, "
                    "not fall back"
                )
                break
        for handler in node.handlers:
            found = ops.find(ast.Module(body=handler.body, type_ignores=[]))
            if found:
                op, line = found[0]
                yield f"line {line}: except branch computes with torch ({op}): a fallback hides a failing kernel"


def _model_new(tree: ast.Module, mod: _Module) -> str | None:
    """None when ModelNew is defined (with a forward), else the problem."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            has_forward = any(
                isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name in ("forward", "__call__")
                for item in node.body
            )
            bases = [mod.resolve(b) or "" for b in node.bases]
            if not has_forward and all(b == "torch.nn.Module" for b in bases):
                return "ModelNew defines no forward()"
            return None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "ModelNew" for t in node.targets
        ):
            return None
    return "no ModelNew class defined at module level"


def static_check(source: str, task_name: str | None = None) -> StaticReport:
    """Check a candidate's source; `task_name` (the task module's name) is forbidden as an import."""
    try:
        tree = parse_python(source)  # one lock for every parse in the process (tasks/pyast.py)
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        text = (exc.text or "").strip()
        return StaticReport(
            ok=False, error_kind="syntax_error", error=f"{where}{exc.msg}" + (f": {text}" if text else "")
        )
    mod = _Module(tree)
    kernels, bodies = _find_kernels(mod)
    skip = {id(b) for b in bodies}
    helpers = _launch_helpers(tree)
    launched = sorted({k for node in _walk_outside(tree, skip) if (k := _launch_of(node, kernels, helpers))})
    ops = _TorchOps(mod, skip)
    remaining = list(dict.fromkeys(f"{op} (line {line})" for op, line in ops.find(tree)))

    problems: list[str] = []
    if (missing := _model_new(tree, mod)) is not None:
        problems.append(missing)
    if not kernels:
        problems.append("no Triton kernel: define one with @triton.jit and launch it from forward")
    elif not launched:
        problems.append(
            f"Triton kernel(s) {', '.join(sorted(kernels))} defined but never launched (kernel[grid](...))"
        )
    problems.extend(_problems(mod, task_name, skip))
    problems.extend(_check_try(mod, kernels, helpers, ops, skip))
    report = StaticReport(
        ok=not problems, kernels=sorted(kernels), launched=launched, torch_ops_remaining=remaining
    )
    if problems:
        report.error_kind = "static_check"
        report.error = "; ".join(dict.fromkeys(problems))
    return report
