"""The stitched model: one candidate file for a whole model's task, built from its regions' kernels.

The file holds, in order: the model task's own code with its `Model` renamed `_Reference` (ModelNew
subclasses it, so it builds the same modules from the same init inputs and holds the same state_dict
keys the judge loads), each region's best kernel file with its top-level names prefixed (so two regions'
`ModelNew` or `_kernel` never collide) and a Triton kernel that several regions define alike defined once (Triton
compiles each definition on its own, and a model's regions of different shapes share most of their kernels:
ResNet101's 165 definitions are 13 kernels), the region runtime (tasks/region_runtime.py, verbatim), and the
plan: which traced nodes form which region, and which regions run a kernel. A region without a kernel runs
its torch operations as the reference does.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import re
import threading
from collections import OrderedDict
from typing import Any

from kernelwright.tasks import region_runtime
from kernelwright.tasks.pyast import parse_python


class StitchError(ValueError):
    """A kernel or task file that cannot be stitched (one line: why)."""


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            node.id = self.names[node.id]
        return node

    def _def(self, node: Any) -> Any:
        if node.name in self.names:
            node.name = self.names[node.name]
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_ClassDef = visit_AsyncFunctionDef = _def


def _without_future(tree: ast.Module) -> ast.Module:
    tree.body = [s for s in tree.body if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]
    return tree


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
    return names


def _parsed_kernel(code: str) -> ast.Module:
    try:
        return parse_python(code)
    except SyntaxError as exc:
        raise StitchError(f"a region kernel does not parse: {exc}") from exc


def prefixed_kernel(
    code: str, prefix: str, sharing: KernelSharing | None = None, tree: ast.Module | None = None
) -> tuple[str, str]:
    """The kernel file's code with its own top-level names prefixed, and its ModelNew's new name. With
    `sharing`, a Triton kernel an earlier file given to it defined alike is not defined again: its uses
    name the earlier one. `tree`: the code already parsed (it is changed here)."""
    tree = _without_future(tree if tree is not None else _parsed_kernel(code))
    names = {n: f"{prefix}{n}" for n in _top_level_names(tree) if not n.startswith("__")}
    if "ModelNew" not in names:
        raise StitchError("a region kernel defines no ModelNew")
    if "\r" in code:  # line numbers as the parser counts them: split at "\n" only where no "\r" is
        tree = _Rename(names).visit(tree)
        return ast.unparse(tree), names["ModelNew"]
    lines = code.split("\n")
    shared = sharing.take(tree, lines, prefix) if sharing is not None else {}
    parts = [
        _renamed_statement(i, stmt, lines, names.keys())
        for i, stmt in enumerate(tree.body)
        if not (_is_triton_kernel(stmt) and stmt.name in shared)  # type: ignore[attr-defined]
    ]
    text = "".join(parts)
    if not shared:
        return text.replace(_MARK, prefix), names["ModelNew"]
    named = _MARKED.sub(lambda m: shared.get(m.group(1), prefix) + m.group(1), text)
    return named, names["ModelNew"]


_LAUNCHERS = ("_kw_launch", "_kw_direct", "_kw_no_hook")
"""The launcher's functions: `_kw_launch`, and the direct launch it makes of a kernel it compiled before."""


def replayable(code: str | ast.Module) -> bool:
    """Whether a kernel file launches every kernel through its `_kw_launch` (as the offline writer's
    programs do): `kernel[grid](...)`, `.run(...)` and `.warmup(...)` appear only inside it (and the
    `_kw_direct` it calls, called nowhere else). Only such a region's launches are recorded and replayed
    (region_runtime.LaunchReplay): a launch made any other way would not be seen, and a replay would leave
    it out. `code` may be given parsed."""
    try:
        tree = code if isinstance(code, ast.Module) else parse_python(code)
    except SyntaxError:
        return False
    if not any(isinstance(n, ast.FunctionDef) and n.name == "_kw_launch" for n in tree.body):
        return False

    def launches(node: ast.AST) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Call) and (
                isinstance(n.func, ast.Subscript)
                or isinstance(n.func, ast.Attribute)
                and n.func.attr in ("run", "warmup")
                or isinstance(n.func, ast.Name)
                and n.func.id == "_kw_direct"
            ):
                return True
        return False

    return not any(
        launches(n) for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in _LAUNCHERS)
    )


_TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")


def _is_triton_kernel(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.FunctionDef) and any(
        ast.unparse(d.func if isinstance(d, ast.Call) else d) in _TRITON_DECORATORS
        for d in stmt.decorator_list
    )


def _statement_lines(stmt: ast.stmt, lines: list[str]) -> tuple[int, str]:
    """A statement's first line (its first decorator's) and its whole lines from there."""
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return first, "\n".join(lines[first - 1 : stmt.end_lineno])


class KernelSharing:
    """Which Triton kernels the region files stitched so far define, by what they are: a kernel a later file
    defines alike is defined once. Alike means the same lines, and every name they read from their file's top
    level alike too, recursively (a helper kernel it calls, a constant it reads: one that differs keeps two
    definitions); the same name, so a use is renamed by its prefix only. Only @triton.jit / autotune /
    heuristics functions are shared: they hold no state; a file's launchers and classes stay its own."""

    def __init__(self) -> None:
        self.kept: dict[str, str] = {}
        """A kernel's key -> the prefix of the file that defines it."""

    def take(self, tree: ast.Module, lines: list[str], prefix: str) -> dict[str, str]:
        """{kernel name: the prefix it is defined under} for this file's kernels an earlier file defined
        alike; records this file's other kernels under its own `prefix`."""
        top: dict[str, tuple[ast.stmt, set[str]]] = {}  # a name -> the statement binding it, and its names
        for stmt in tree.body:
            own = _top_level_names(ast.Module(body=[stmt], type_ignores=[]))
            top.update((name, (stmt, own)) for name in own)
        keys: dict[str, str] = {}

        def key(name: str, busy: frozenset[str]) -> str:
            if name in keys:
                return keys[name]
            if name in busy:  # plain Python defined in a cycle: never alike
                return f"<cycle {prefix}{name}>"
            stmt, own = top[name]
            _, text = _statement_lines(stmt, lines)
            refs = sorted((set(_IDENTIFIER.findall(text)) & top.keys()) - own)
            deps = "".join(f"\n{r}={key(r, busy | {name})}" for r in refs)
            keys[name] = hashlib.sha256(f"{name}\n{text}{deps}".encode()).hexdigest()
            return keys[name]

        shared: dict[str, str] = {}
        for stmt in tree.body:
            if _is_triton_kernel(stmt):
                name = stmt.name  # type: ignore[attr-defined]
                first = self.kept.setdefault(key(name, frozenset()), prefix)
                if first != prefix:
                    shared[name] = first
        return shared


# A kernel file's statements, renamed and unparsed, by their text: the writer's programs share most of their
# helpers (the launch runtime, stride walks, small maths), and each region's program was renamed and
# unparsed whole, about half of stitching a DenseNet's. The names are prefixed with _MARK and the prefix put
# in its place afterwards: unparsed code holds no NUL character but in those names (Python source holds
# none, and string constants are written escaped) (tests/unit/test_region_stitch_statements.py).
_MARK = "\x00"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_STATEMENTS: OrderedDict[tuple[Any, ...], str] = OrderedDict()
_STATEMENTS_SIZE = 4096
_STATEMENTS_LOCK = threading.Lock()
_MARKED = re.compile(_MARK + r"([A-Za-z_][A-Za-z_0-9]*)")


def _renamed_statement(index: int, stmt: ast.stmt, lines: list[str], top: Any) -> str:
    """`ast.unparse` of a module's statement `index` with its top-level names `top` prefixed by _MARK, as it
    reads inside the whole module's (the first statement: a module docstring, no newline before it; later
    ones after a newline, a blank line before a definition). Keyed by the statement's whole lines (from its
    first decorator's), where it starts and ends on them, and the top-level names among its words: they
    decide its tree and its renaming, wherever in a file the lines are."""
    first, text = _statement_lines(stmt, lines)
    renamed = frozenset(n for n in set(_IDENTIFIER.findall(text)) if n in top)
    key = (index == 0, text, stmt.lineno - first, stmt.col_offset, stmt.end_col_offset, renamed)
    with _STATEMENTS_LOCK:
        hit = _STATEMENTS.get(key)
        if hit is not None:
            _STATEMENTS.move_to_end(key)
            return hit
    stmt = _Rename({n: _MARK + n for n in renamed}).visit(stmt)
    if index == 0:
        out = ast.unparse(ast.Module(body=[stmt], type_ignores=[]))
    else:
        unparser = ast._Unparser()  # type: ignore[attr-defined]
        unparser._source = ["\n"]  # past the module's start: the newlines a later statement gets there
        unparser.traverse(stmt)
        out = "".join(unparser._source[1:])
    with _STATEMENTS_LOCK:
        _STATEMENTS[key] = out
        while len(_STATEMENTS) > _STATEMENTS_SIZE:
            _STATEMENTS.popitem(last=False)
    return out


def reference_as_base(task_source: str) -> str:
    """The task's code with its Model renamed _Reference."""
    tree = _without_future(parse_python(task_source))
    if "Model" not in _top_level_names(tree):
        raise StitchError("the model's task file defines no Model")
    return ast.unparse(_Rename({"Model": "_Reference"}).visit(tree))


def _runtime_source() -> str:
    tree = _without_future(parse_python(inspect.getsource(region_runtime)))
    return ast.unparse(tree)


_MODEL_NEW = '''
class ModelNew(_Reference):
    """The model with its regions' kernels swapped in (plan: _REGIONS; kernels: _KERNELS)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # registered as submodules, each an attribute of the model itself: their tensors (a cached packed
        # weight) are the model's own, found where the judge looks for them, and move with it; their
        # parameters and buffers are bound to the model's before each call
        kernels = {}
        for index, kernel_class in _KERNELS.items():
            region = _REGIONS[index]
            kernels[index] = build_kernel(kernel_class, region["bindings"], self, region.get("init", ()))
            setattr(self, f"_kw_kernels_{index}", kernels[index])
        self.__dict__["_kw_kernels"] = kernels
        self.__dict__["_kw_plans"] = {}
        if not _TRACE["specialized"]:  # traced once, here, as the reference class: node names as cut
            plan_for(self, _Reference, _TRACE, _REGIONS, kernels, (), self.__dict__["_kw_plans"], _WRAP,
                     (_REPLAY, globals()))
        # ... but not in its state_dict: that stays the reference's, key for key
        self._register_state_dict_hook(_without_kernels)
        self.register_load_state_dict_post_hook(_kernels_not_missing)

    def forward(self, *inputs):
        state = self.__dict__
        plan = plan_for(self, _Reference, _TRACE, _REGIONS, state["_kw_kernels"], inputs, state["_kw_plans"], _WRAP,
                        (_REPLAY, globals()))
        return plan.run(self, inputs)


def _without_kernels(module, state_dict, prefix, local_metadata):
    for key in [k for k in state_dict if k.startswith(prefix + "_kw_kernels_")]:
        del state_dict[key]


def _kernels_not_missing(module, incompatible_keys):
    missing = incompatible_keys.missing_keys
    missing[:] = [k for k in missing if "_kw_kernels_" not in k]
'''


def stitched_source(
    task_source: str,
    leaves: set[str],
    plans: list[dict[str, Any]],
    kernels: dict[int, tuple[str, str]],
    title: str = "model",
    spec: dict[str, Any] | None = None,
) -> str:
    """A candidate file for the model's task. `plans` are the regions' plans (Region.plan()),
    `kernels` maps a region's index to (its signature, its kernel file's code); regions that share a
    signature share one copy of the code. `spec` is how the split traced the model (ModelSplit.spec:
    leaves, number of inputs, specialized on their sizes or not)."""
    spec = dict(spec or {"leaves": sorted(leaves), "inputs": None, "specialized": False})
    parts = [
        f'"""{title}: the stitched model (kernelwright, tasks/region_stitch.py).\n\n'
        f"{len(kernels)} of {len(plans)} regions run a kernel; the rest run the reference's torch "
        'operations."""',
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl",
        "# ---- the model's own code (Model renamed _Reference) ----",
        reference_as_base(task_source),
    ]
    class_of: dict[str, str] = {}
    replays: set[str] = set()  # the signatures whose program is replayable
    sharing = KernelSharing()
    for _index, (signature, code) in sorted(kernels.items()):
        if signature in class_of:
            continue
        # parsed once (~10 ms a long program); replayable reads it before the renaming
        tree = _parsed_kernel(code)
        if replayable(tree):
            replays.add(signature)
        body, cls = prefixed_kernel(code, f"_r{signature[:10]}_", sharing, tree)
        class_of[signature] = cls
        parts += [f"# ---- kernel of region signature {signature} ----", body]
    parts += ["# ---- region runtime (tasks/region_runtime.py) ----", _runtime_source()]
    table = ", ".join(f"{i}: {class_of[sig]}" for i, (sig, _) in sorted(kernels.items()))
    parts += [
        "".join(f"import {name}\n" for name in spec.get("wrap", []))
        + f"_WRAP = ({''.join(name + ', ' for name in spec.get('wrap', []))})\n_TRACE = {spec!r}",
        f"_REGIONS = {json.dumps(plans)}",
        f"_KERNELS = {{{table}}}",
        # the regions whose launches the runtime may record and replay (region_runtime.LaunchReplay)
        f"_REPLAY = frozenset({{{', '.join(str(i) for i, (sig, _) in sorted(kernels.items()) if sig in replays)}}})",
        _MODEL_NEW,
    ]
    return "\n\n".join(parts) + "\n"
