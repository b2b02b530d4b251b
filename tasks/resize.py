"""Other sizes of a task: the same program with its module-level size constants changed.

KernelBench tasks keep their sizes in module-level constants (`batch_size = 4096`, `dim = 393216`) that
`get_inputs()` and `get_init_inputs()` read. Changing those constants gives the same computation at
another size, with the model's constructor arguments consistent with its inputs. The judge uses this
to verify every candidate on a second input shape even when a task defines no `get_small_inputs()`,
and to find a size the CPU interpreter can run when the task is too large for it.

A changed size is kept only if the task still builds and runs at it on the meta device (shapes only,
nothing allocated); constants whose change breaks the task (a divisibility, a kernel larger than its
input) are left alone.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import Any

import torch

from kernelwright.tasks.analysis import meta_recurrences_by_one_step
from kernelwright.tasks.module import exec_task_module, task_inputs, task_model
from kernelwright.tasks.pyast import parse_python


@dataclass(frozen=True)
class SizeConstant:
    name: str
    value: int
    start: tuple[int, int]
    """(line, column) where the value's text begins; `end` where it ends (1-based lines)."""
    end: tuple[int, int]
    also: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = ()
    """Further (start, end) places the same constant is written: equal literals among get_inputs' sizes."""

    def spans(self) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        return [(self.start, self.end), *self.also]


def _int_value(node: ast.expr) -> int | None:
    """The value of an int literal or of arithmetic on int literals (`1024 * 2`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp):
        a, b = _int_value(node.left), _int_value(node.right)
        if a is None or b is None:
            return None
        ops: dict[type, Callable[[int, int], int]] = {
            ast.Add: lambda x, y: x + y,
            ast.Sub: lambda x, y: x - y,
            ast.Mult: lambda x, y: x * y,
            ast.FloorDiv: lambda x, y: x // y if y else 0,
            ast.Pow: lambda x, y: x**y if 0 <= y <= 64 else 0,
        }
        fn = ops.get(type(node.op))
        return fn(a, b) if fn is not None else None
    return None


def _constant(name: str, node: ast.expr) -> SizeConstant | None:
    """`node` as the size constant `name`, where it is an int (or int arithmetic) of 2 or more."""
    v = _int_value(node)
    if v is None or v < 2 or node.end_lineno is None:
        return None
    return SizeConstant(name, v, (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset or 0))


def _list_elements(value: ast.expr) -> list[ast.expr] | None:
    """The elements of a list literal, alone or repeated (`[1024] * 16`: the count is the model's depth, not
    a size, and stays), else None."""
    if isinstance(value, ast.List):
        return value.elts
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        for lst, count in ((value.left, value.right), (value.right, value.left)):
            if isinstance(lst, ast.List) and _int_value(count) is not None:
                return lst.elts
    return None


_FACTORIES = frozenset({"rand", "randn", "zeros", "ones", "empty"})


def _factory_sizes(call: ast.Call) -> list[ast.expr]:
    """The size arguments of a tensor factory call (`torch.rand(b, 3, 224, 224)`, `torch.zeros((n, 3))`,
    `torch.full((n, 3), v)`, `torch.randint(lo, hi, (n, 3))`), else []."""
    fn = call.func
    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
    if name in _FACTORIES:
        sizes = list(call.args)
    elif name == "full" and call.args:
        sizes = [call.args[0]]
    elif name == "randint":
        sizes = [call.args[2]] if len(call.args) >= 3 else [k.value for k in call.keywords if k.arg == "size"]
    else:
        return []
    if len(sizes) == 1 and isinstance(sizes[0], (ast.Tuple, ast.List)):
        return list(sizes[0].elts)
    return sizes


def _input_literals(tree: ast.Module) -> list[SizeConstant]:
    """Int literals >= 2 among the sizes of the tensors `get_inputs` makes (`torch.rand(batch_size, 3, 224,
    224)`: 3 and 224), one constant per value, named by where it first stands: equal literals change
    together (224 x 224 stays square; a region cut from a model, whose 25 concatenated inputs are
    `torch.randn([10, 32, 14, 14])` each, has 4 constants, not 100 that each break the concatenation
    alone). They size only the inputs; a change the model cannot take (3 input channels) is refused where
    it is tried, as any constant's."""
    by_value: dict[int, list[SizeConstant]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            for call in ast.walk(node):
                if not isinstance(call, ast.Call):
                    continue
                for size in _factory_sizes(call):
                    c = _constant(f"{_LITERAL_PREFIX}{size.lineno}:{size.col_offset}", size)
                    if c is not None and isinstance(size, ast.Constant):
                        by_value.setdefault(c.value, []).append(c)
    found = []
    for same in by_value.values():
        same.sort(key=lambda c: c.start)
        first = same[0]
        found.append(replace(first, also=tuple((c.start, c.end) for c in same[1:])))
    return sorted(found, key=lambda c: c.start)


def _read_by_the_model(tree: ast.Module) -> set[str]:
    """Module-level names the task's classes read directly (`torch.randn((batch_size, hidden_size))` in
    `__init__`, level3/33): names loaded in a class's methods that are not their parameters or locals."""
    out: set[str] = set()
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in ast.walk(cls):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            a = fn.args
            local = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
            local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            out |= {
                n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            } - local
    return out


def size_constants(source: str, *, literals: bool = True) -> list[SizeConstant]:
    """Module-level `NAME = <int>` (or int arithmetic) assignments with values >= 2, in source order;
    each int element >= 2 of a module-level list of sizes (`layer_sizes = [400, 800]`, named
    `layer_sizes[0]`, `layer_sizes[1]`; `hidden = [1024] * 16` is one constant, `hidden[0]`); then, in a task
    without get_small_inputs, the int literals among the sizes of the tensors get_inputs makes
    (`_input_literals`; not with `literals=False`)."""
    found = _size_constants(source)
    return [c for c in found if literals or not c.name.startswith(_LITERAL_PREFIX)]


_LITERAL_PREFIX = "get_inputs@"


@lru_cache(maxsize=64)
def _size_constants(source: str) -> tuple[SizeConstant, ...]:
    """`size_constants`, cached: `vary` and `shrink` rewrite one source hundreds of times, and each
    rewrite reads its constants."""
    found: list[SizeConstant | None] = []
    tree = parse_python(source)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Tuple)
            and len(node.targets[0].elts) == len(node.value.elts)
        ):  # `depth, height, width = 16, 32, 32`: one constant per name
            found += [_constant(t.id, v) for t, v in zip(node.targets[0].elts, node.value.elts, strict=True)
                      if isinstance(t, ast.Name)]  # fmt: skip
            continue
        if isinstance(node, ast.Assign):  # `height = width = 128` is one constant, named by its first name
            target, value = node.targets[0], node.value
            if not all(isinstance(t, ast.Name) for t in node.targets):
                continue
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        elements = _list_elements(value)
        if elements is not None:
            found += [_constant(f"{target.id}[{i}]", element) for i, element in enumerate(elements)]
        else:
            found.append(_constant(target.id, value))
    # A constant the model's own code reads (not through get_init_inputs) stays: a candidate's file has its
    # own copy of it, which a changed task would not change, so the two would be built differently.
    fixed = _read_by_the_model(tree)
    kept = [c for c in found if c is not None and variable_of(c.name) not in fixed]
    # A task with small inputs of its own is judged at them and its full inputs sliced: its literals stay.
    if any(isinstance(n, ast.FunctionDef) and n.name == "get_small_inputs" for n in tree.body):
        return tuple(kept)
    return (*kept, *_input_literals(tree))


def variable_of(constant_name: str) -> str:
    """The module variable a size constant is in (`layer_sizes` for `layer_sizes[1]`)."""
    return constant_name.partition("[")[0]


def with_sizes(source: str, values: dict[str, int]) -> str:
    """`source` with the named constants' values replaced (other text, comments included, unchanged)."""
    lines = source.splitlines(keepends=True)
    spans = [(span, values[c.name]) for c in _size_constants(source)
             if c.name in values and values[c.name] != c.value for span in c.spans()]  # fmt: skip
    # Replace from the end so earlier positions stay valid.
    for ((l0, c0), (l1, c1)), value in sorted(spans, reverse=True):
        head, tail = lines[l0 - 1][:c0], lines[l1 - 1][c1:]
        lines[l0 - 1 : l1] = [f"{head}{value}{tail}"]
    return "".join(lines)


def _meta_forward(module: types.ModuleType, small: bool) -> tuple[list[Any], list[Any], list[Any]] | None:
    """(input tensors, output tensors, parameters and buffers) of one forward on the meta device at the
    module's sizes (nothing allocated), or None when the task cannot run there."""
    try:
        with torch.device("meta"):
            inputs = task_inputs(module, small=small, seed=None, device="meta")  # no numbers: no seeding
            model = task_model(module, small=small, seed=None, device="meta")
            with torch.no_grad(), meta_recurrences_by_one_step():
                out = model(*inputs)
    except Exception:
        return None

    def tensors(values: list[Any]) -> list[Any]:
        return [t for t in values if isinstance(t, torch.Tensor)]

    return tensors(list(inputs)), tensors(_flat(out)), list(model.state_dict().values())


def meta_run(module: types.ModuleType) -> tuple[list[list[int]], int] | None:
    """(input shapes, elements of inputs + outputs + parameters and buffers) at the module's sizes."""
    got = _meta_forward(module, small=False)
    if got is None:
        return None
    inputs, outputs, state = got
    return [list(t.shape) for t in inputs], sum(t.numel() for t in inputs + outputs + state)


def _flat(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [x for v in value for x in _flat(v)]
    return [value]


@dataclass
class Resized:
    """A size of a task found by `shrink`."""

    source: str
    sizes: dict[str, int]
    """The constants that changed, with their new values."""
    input_shapes: list[list[int]]

    @property
    def description(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items())


def shrink(source: str, name: str, max_elements: int, *, odd: bool = True) -> Resized | None:
    """The task at a size whose inputs, outputs and parameters hold at most `max_elements` elements in
    all, or None.

    Halves the largest constant that still shrinks those tensors and keeps the task valid (checked on the
    meta device), until the inputs fit; then, with `odd`, tries odd values for the changed constants
    (odd sizes find masking bugs that powers of two hide), keeping each only where the task stays valid.
    """
    constants = {c.name: c.value for c in size_constants(source)}
    if not constants:
        return None

    def run(values: dict[str, int]) -> tuple[list[list[int]], int] | None:
        try:
            module = exec_task_module(with_sizes(source, values), name)
        except Exception:
            return None
        return meta_run(module)

    values = dict(constants)
    got = run(values)
    if got is None:
        return None
    shapes, size = got
    fixed: set[str] = set()
    for _ in range(200):
        if size <= max_elements:
            break
        movable = [k for k in values if k not in fixed and values[k] >= 4]
        if not movable:
            return None
        k = max(movable, key=lambda n: values[n])
        trial = {**values, k: values[k] // 2}
        tried = run(trial)
        if tried is None or tried[1] >= size:
            fixed.add(k)  # breaks the task, or sizes none of its tensors
            continue
        values, (shapes, size) = trial, tried
    else:
        return None
    if size > max_elements:
        return None
    if odd:
        for k in [k for k in values if values[k] != constants[k] and values[k] % 2 == 0 and values[k] > 2]:
            trial = {**values, k: values[k] - 1}
            tried = run(trial)
            if tried is not None and tried[1] <= max_elements:
                values, (shapes, size) = trial, tried
    changed = {k: v for k, v in values.items() if v != constants[k]}
    return Resized(with_sizes(source, values), changed, shapes) if changed else None


_VARIATIONS: dict[str, Callable[[int], int]] = {
    "half": lambda v: v // 2,
    "two_thirds": lambda v: (2 * v) // 3,
    "plus_one": lambda v: v + 1,
    "double": lambda v: 2 * v,
}


def vary(source: str, name: str, order: tuple[str, ...] = ("half", "two_thirds", "plus_one", "double"),
         max_elements: int | None = None, literals: bool = True) -> Resized | None:  # fmt: skip
    """The task with as many of its size constants changed as stay valid (each checked on the meta
    device), or None when none can change.

    A writer traces this beside the task itself: a number in the two traces that differs comes from the
    sizes (a constructor argument, a dim the trace fixed), not from the computation, so it must be read
    at run time. Constants are tried in source order, each at the values of `order` (`_VARIATIONS`) in
    turn until one keeps the task valid (and, with `max_elements`, its tensors that small), so sizes that
    must agree (a divisibility) still can. `literals=False`: the named constants only, not get_inputs'
    literal sizes.
    """
    constants = {c.name: c.value for c in size_constants(source, literals=literals)}
    if not constants:
        return None

    def run(values: dict[str, int]) -> tuple[list[list[int]], int] | None:
        try:
            module = exec_task_module(with_sizes(source, values), name)
        except Exception:
            return None
        got = meta_run(module)
        if got is None or (max_elements is not None and got[1] > max_elements):
            return None
        return got

    values = dict(constants)
    got = run(values)
    if got is None:
        return None
    shapes = got[0]
    for k, v in constants.items():
        # Then a few more, for a value the others all give to another constant.
        for new in dict.fromkeys([*(_VARIATIONS[o](v) for o in order), v + 2, v + 3, 3 * v]):
            # A value another constant has (here or in the task) would let a writer take one for the other.
            taken = {x for n, x in values.items() if n != k} | {x for n, x in constants.items() if n != k}
            if new < 2 or new == v or new in taken:
                continue
            tried = run({**values, k: new})
            if tried is not None:
                values, shapes = {**values, k: new}, tried[0]
                break
    changed = {k: v for k, v in values.items() if v != constants[k]}
    return Resized(with_sizes(source, values), changed, shapes) if changed else None


_SMALL_FUNCS = ("get_small_inputs", "get_small_init_inputs")

CPU_PRIMARY_ELEMENTS = 250_000
"""On CPU, a task without small inputs is verified at a size whose inputs hold at most this many elements
(the judge's shapes: hardware/judge/inputs.py `verified_shapes`)."""

CPU_SECOND_ELEMENTS = 40_000
"""On CPU, the second (derived) shape's inputs hold at most this many elements."""


def without_small_inputs(source: str) -> str:
    """`source` without `get_small_inputs` and `get_small_init_inputs`: a task judged at its constants' sizes."""
    lines = source.splitlines(keepends=True)
    for node in sorted(parse_python(source).body, key=lambda n: n.lineno, reverse=True):
        if isinstance(node, ast.FunctionDef) and node.name in _SMALL_FUNCS and node.end_lineno is not None:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            del lines[first - 1 : node.end_lineno]
    return "".join(lines)


def other_sizes(source: str, name: str, count: int = 2, budgets: tuple[int, ...] = (60_000, 12_000),
                max_elements: int = 300_000) -> list[Resized]:  # fmt: skip
    """`count` other sizes of the task, each without its small inputs so that a judge runs it at those
    sizes, and each with input shapes neither the task's own (full or small) nor another's.

    Tried in turn: the task shrunk to each budget of elements (`shrink`: odd where it can be), then its
    constants varied (`vary`: one more, then two thirds, within `max_elements`), for a task already that
    small."""
    base = without_small_inputs(source)
    module = exec_task_module(source, name)
    seen = [first_input_shapes(module, small=False), first_input_shapes(module, small=True)]
    out: list[Resized] = []
    tries: list[Callable[[], Resized | None]] = [partial(shrink, base, name, b) for b in budgets]
    variations = (("plus_one", "double"), ("two_thirds", "half"))
    tries += [partial(vary, base, name, o, max_elements) for o in variations]
    for attempt in tries:
        got = attempt()
        if got is not None and got.input_shapes not in seen:
            seen.append(got.input_shapes)
            out.append(got)
            if len(out) == count:
                break
    return out


def first_input_shapes(module: types.ModuleType, *, small: bool) -> list[list[int]] | None:
    """Input shapes of the task's own inputs (`get_small_inputs` with small=True), made on the meta
    device so nothing is allocated; None when that fails."""
    try:
        with torch.device("meta"):
            inputs: list[Any] = task_inputs(module, small=small, seed=None, device="meta")
    except Exception:
        return None
    return [list(t.shape) for t in inputs if isinstance(t, torch.Tensor)]


@dataclass
class Footprint:
    """Bytes of one forward's tensors at a size: what the task itself occupies on its device."""

    inputs: int
    outputs: int
    parameters: int
    float64: tuple[int, int, int] | None = None
    """(inputs, outputs, parameters) in bytes once their floating-point tensors are float64 (the judge's
    float64 run of the reference); None: twice the bytes, as for fp32 tensors."""

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.parameters

    @property
    def as_float64(self) -> tuple[int, int, int]:
        """(inputs, outputs, parameters) bytes in float64: 4x a bf16 tensor's, 2x a fp32 one's."""
        return self.float64 or (2 * self.inputs, 2 * self.outputs, 2 * self.parameters)


def footprint(module: types.ModuleType, *, small: bool = False) -> Footprint | None:
    """The task's footprint from one forward on the meta device (nothing allocated); None when the task
    cannot run there."""
    got = _meta_forward(module, small)
    if got is None:
        return None
    inputs, outputs, state = got

    def nbytes(ts: list[Any]) -> int:
        return sum(t.numel() * t.element_size() for t in ts)

    def nbytes64(ts: list[Any]) -> int:
        return sum(t.numel() * (8 if t.is_floating_point() else t.element_size()) for t in ts)

    return Footprint(
        nbytes(inputs), nbytes(outputs), nbytes(state), (nbytes64(inputs), nbytes64(outputs), nbytes64(state))
    )
