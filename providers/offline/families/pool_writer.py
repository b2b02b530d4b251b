"""Standalone max/avg pooling (1-D, 2-D, 3-D) as a whole-task writer for the offline writer
(plugins.TASK_WRITERS names `pool_task_writer` as the "pool" family).

A task is taken when its forward is exactly one pooling module applied to its input:

    self.pool = nn.MaxPool2d(...)        # or MaxPool1d/3d, AvgPool1d/2d/3d, in Model.__init__
    def forward(self, x): return self.pool(x)      # or `y = self.pool(x)`, `return y`

and the traced task has that one op (no indices). Everything else passes (None), so a pooling that is
part of a convolution's epilogue stays with the conv writer.

The program keeps the task's constructor (ModelNew builds the same pooling module and reads its
hyper-parameters at run time: kernel size, stride, padding, dilation, ceil_mode, count_include_pad,
divisor_override), so one program serves any input size and any constructor arguments. 1-D and 2-D pooling
run as 3-D pooling with size-1 leading dims. Max pooling propagates NaN as PyTorch does; average pooling
accumulates in fp32 (fp64 for fp64 inputs) and divides as PyTorch does (padding counted or not, windows
clipped by ceil_mode, divisor_override).

Designs (both walk the window with compile-time loops, one load per window element):
- `rows` (the default): a [BLOCK_H, BLOCK] tile of one (batch..., od) output plane per program, BLOCK_H
  output rows of BLOCK outputs each, programs running along a row first. The plane's indices and its
  64-bit base offsets are scalars; inside a plane offsets are 32-bit, so no lane divides and 64-bit
  offsets cost nothing per lane even past 2^31 elements. BLOCK is capped at the row's width (next power
  of two, at least 32), BLOCK_H at the plane's height, the warps at one per 64 outputs (two per thread), so small planes
  do not idle lanes. A plane of 2^31 elements or more, or more than 2^31 - 1 programs, falls back to
  `flat`.
- `flat`: BLOCK outputs of the flattened output per program; every lane divides its index into
  (batch, od, oh, ow), in 64-bit only when a tensor has 2^31 elements or more.

Configs: BLOCK (outputs per program, per row for `rows`), BLOCK_H (`rows`: output rows per program) and
num_warps. The choice is the whole-task policy's (choice/whole_task.py), over the space `_space` hands it:
a large step takes the first preset (design, config) that is neither written in the run nor forbidden,
designs not written yet first (the design and config of a correct experience case of this family go
first, the nearest case first, if it pooled over as many dims); a small step moves one knob of the
parent's design one step (seeded); a repair after a resource error halves BLOCK. Programs that launch
alike at the task's size (`launched`) count as one.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kernelwright.providers.offline.choice.context import PromptCase, WriterContext
from kernelwright.providers.offline.choice.policy import neighbours
from kernelwright.providers.offline.choice.whole_task import FamilySpace, choose_program
from kernelwright.providers.offline.runtime import program_text
from kernelwright.tasks.pyast import parse_python

if TYPE_CHECKING:
    from kernelwright.providers.offline.writer import WriterAnswer

FAMILY = "pool"
DESIGNS: tuple[str, ...] = ("rows", "flat")

SPACES: dict[str, dict[str, tuple[int, ...]]] = {
    "rows": {"BLOCK": (64, 128, 256, 512, 1024, 2048), "BLOCK_H": (1, 2, 4, 8), "num_warps": (1, 2, 4, 8)},
    "flat": {"BLOCK": (64, 128, 256, 512, 1024, 2048), "num_warps": (2, 4, 8)},
}
DEFAULT_DESIGN = "rows"
DEFAULT_CONFIG: dict[str, int] = {"BLOCK": 512, "BLOCK_H": 1, "num_warps": 8}
# Large steps after the first, in order: the other design, then other balances of outputs per program and
# warps.
PRESETS: tuple[tuple[str, dict[str, int]], ...] = (
    (DEFAULT_DESIGN, DEFAULT_CONFIG),
    ("flat", {"BLOCK": 512, "num_warps": 8}),
    ("rows", {"BLOCK": 1024, "BLOCK_H": 1, "num_warps": 4}),
    ("rows", {"BLOCK": 2048, "BLOCK_H": 1, "num_warps": 8}),
    ("flat", {"BLOCK": 512, "num_warps": 4}),
)

_POOL_CLASSES = {f"{kind}Pool{nd}d": (kind == "Max", nd) for kind in ("Max", "Avg") for nd in (1, 2, 3)}
_POOL_OPS = {f"aten.{kind}_pool{nd}d.default" for kind in ("max", "avg") for nd in (1, 2, 3)}


class PoolTask:
    """What the writer needs of a pooling task: the module attribute, max or avg, 1-3 dims, and (once
    traced) the output's spatial sizes at the task's size."""

    def __init__(self, attr: str, is_max: bool, nd: int, out_spatial: tuple[int, ...] | None = None) -> None:
        self.attr, self.is_max, self.nd, self.out_spatial = attr, is_max, nd, out_spatial

    def describe(self) -> str:
        return f"{'max' if self.is_max else 'avg'} pooling over {self.nd} dim(s), module self.{self.attr}"


def _pool_class(call: ast.expr) -> tuple[bool, int] | None:
    """(is_max, nd) when `call` is nn.MaxPool2d(...), torch.nn.AvgPool1d(...) or the bare class name."""
    if not isinstance(call, ast.Call):
        return None
    fn = call.func
    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
    return _POOL_CLASSES.get(name or "")


def find_pool_task(source: str) -> PoolTask | None:
    """The pooling module a task's forward returns applied to its input, or None for any other task."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return None
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        return None
    methods = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
    init, forward = methods.get("__init__"), methods.get("forward")
    if init is None or forward is None:
        return None
    pools: dict[str, tuple[bool, int]] = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            kind = _pool_class(node.value)
            if (
                kind is not None
                and isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                pools[target.attr] = kind
    args = forward.args
    if len(args.args) != 2 or args.vararg or args.kwarg or args.kwonlyargs:
        return None
    body = [s for s in forward.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) == 1 and isinstance(body[0], ast.Return):
        call = body[0].value
    elif (  # `t0 = self.m0(x0)`, `return t0`: the form of a region cut from a whole model (tasks/regions.py)
        len(body) == 2
        and isinstance(body[0], ast.Assign)
        and len(body[0].targets) == 1
        and isinstance(body[0].targets[0], ast.Name)
        and isinstance(body[1], ast.Return)
        and isinstance(body[1].value, ast.Name)
        and body[1].value.id == body[0].targets[0].id
    ):
        call = body[0].value
    else:
        return None
    if not (
        isinstance(call, ast.Call)
        and len(call.args) == 1
        and not call.keywords
        and isinstance(call.args[0], ast.Name)
        and call.args[0].id == args.args[1].arg
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "self"
        and call.func.attr in pools
    ):
        return None
    is_max, nd = pools[call.func.attr]
    return PoolTask(call.func.attr, is_max, nd)


@lru_cache(maxsize=64)
def _analysis(digest: str, source: str, name: str) -> PoolTask | None:
    """The task when its source has the pooling form and its trace is that one op (so no indices)."""
    found = find_pool_task(source)
    if found is None:
        return None
    from kernelwright.providers.offline.choice.schedule import schedule
    from kernelwright.providers.offline.frontend.analysis import AnalysisError, analyze_cached

    try:
        graph = analyze_cached(source, name).graph
        sched = schedule(graph)
    except (AnalysisError, ValueError):
        return None
    ops = {k.anchor.op for k in sched.kernels if k.anchor is not None}
    expected = f"aten.{'max' if found.is_max else 'avg'}_pool{found.nd}d.default"
    if ops != {expected} or expected not in _POOL_OPS or len(graph.outputs) != 1:
        return None
    found.out_spatial = graph.hints(graph.outputs[0].shape)[-found.nd :]
    return found


def launched(task: PoolTask, design: str, config: dict[str, int]) -> tuple[Any, ...]:
    """What a (design, config) launches at the task's traced size: configs that launch alike run the same
    kernel, so a search step between them measures nothing new."""
    if design != "rows" or task.out_spatial is None:
        return (design, *sorted(config.items()))
    from kernelwright.providers.offline.runtime.pool import rows_tile

    oh, ow = ([1, 1, *task.out_spatial])[-2:]
    return (design, *rows_tile(oh, ow, config["BLOCK"], config["BLOCK_H"], config["num_warps"]))


# ---- the program ------------------------------------------------------------------------------------

# The kernels and the host side are program text in runtime/pool.py (linted and type-checked there).
_AVERAGE = program_text("pool", "average")
_FLAT_KERNEL = program_text("pool", "flat_kernel")
_ROWS_KERNEL = program_text("pool", "rows_kernel")
_HOST = program_text("pool", "host")


def emit_pool_program(source: str, task: PoolTask, design: str, config: dict[str, int]) -> str:
    """The candidate module: the task's constructor as ModelNew, the kernels, and their launcher."""
    from kernelwright.providers.offline.emit.emit import HELPERS, Code
    from kernelwright.providers.offline.emit.emit_module import ProgramMeta
    from kernelwright.providers.offline.families.conv.conv_reference import ReferenceParts
    from kernelwright.providers.offline.runtime.pool import rows_tile

    if design not in DESIGNS or _as_config(design, config) != config:
        raise ValueError(f"not a pooling design and config: {design!r} {config}; the spaces are {SPACES}")
    reference = ReferenceParts(source)
    header = ProgramMeta(FAMILY, design, dict(config)).line()
    what = "each output row split into blocks of" if design == "rows" else "blocks of the flattened output,"
    doc = Code()
    doc(f'"""Generated by kernelwright\'s pooling writer: {task.describe()}, one Triton kernel ({design}:')
    doc(f'{what} BLOCK={config["BLOCK"]} outputs per program) that reads each window from the input."""')
    block_h = f", block_h={config['BLOCK_H']}" if "BLOCK_H" in config else ""
    forward = Code()
    forward()
    forward()
    forward("def _kw_forward(self, x):")
    with forward.indent():
        forward(
            f"return _kw_pool(x, self.{task.attr}, {task.nd}, {task.is_max}, {design!r}, "
            f"{config['BLOCK']}, {config['num_warps']}{block_h})"
        )
    parts = [
        header,
        doc.text(),
        "import torch",
        "import torch.nn as nn",
        "import triton",
        "import triton.language as tl",
    ]
    parts += reference.imports
    parts += reference.helpers
    # the flat kernel is carried by both designs: `rows` falls back to it for a grid the GPU cannot launch
    parts += [
        _AVERAGE,
        *([_ROWS_KERNEL] if design == "rows" else []),
        _FLAT_KERNEL,
        "\n" + inspect.getsource(rows_tile),
        HELPERS["_kw_launch"],
        _HOST,
        forward.text(),
        reference.model_new(["x"]),
    ]
    program = Code()
    for part in parts:
        program.block(part)
    return program.program()


# ---- choosing a design and config ---------------------------------------------------------------------

# What benchmarks/design_sweep.py measures for a pooling task: the presets, then more balances of `rows`.
SWEEP: tuple[tuple[str, dict[str, int]], ...] = (
    *PRESETS,
    ("rows", {"BLOCK": 128, "BLOCK_H": 4, "num_warps": 4}),
    ("rows", {"BLOCK": 512, "BLOCK_H": 2, "num_warps": 4}),
    ("rows", {"BLOCK": 64, "BLOCK_H": 2, "num_warps": 1}),
)

Pick = tuple[str, dict[str, int]]


def _as_config(design: str, pairs: dict[str, Any]) -> dict[str, int] | None:
    """The design's config read from a header's pairs (a knob the header leaves out at its default)."""
    space = SPACES.get(design)
    if space is None:
        return None
    try:
        config = {k: int(float(str(pairs.get(k, DEFAULT_CONFIG.get(k, ""))))) for k in space}
    except ValueError:
        return None
    return config if all(config[k] in space[k] for k in space) else None


def _as_pick(meta: Any) -> Pick | None:
    """A header's (design, config) when it is a pooling program this writer can write again."""
    if meta is None or meta.family != FAMILY:
        return None
    config = _as_config(meta.design, meta.config)
    return (meta.design, config) if config is not None else None


def _same_rank(ctx: WriterContext, case: PromptCase) -> bool:
    """Whether a case pooled an input of as many dims as this task's (so over as many dims), as far as both
    signatures say. A config does not carry over between them: on an H200 a 1-D pool's best (256 outputs a
    program, 0.7% ahead of 512 on published/26) started published/27's 2-D pool at 3.21 ms where its own
    default (512) ran 2.57 (benchmarks/RESULTS.md, twenty-second session)."""
    mine, theirs = ctx.signature, case.signature
    if mine is None or theirs is None or not mine.input_shapes or not theirs.input_shapes:
        return True
    return len(mine.input_shapes[0]) == len(theirs.input_shapes[0])


def _space(ctx: WriterContext, task: PoolTask) -> FamilySpace[dict[str, int]]:
    """What the pooling writer can write for `task`, handed to the whole-task policy. Programs compare by
    what they launch at the task's size (`launched`): a step never writes a config that launches as one
    already written, the parent included, while another is left."""

    def repairs(
        design: str, base: dict[str, int], kind: str | None, resources: bool
    ) -> list[tuple[dict[str, int], str]]:
        if kind in ("resources", "compile_error", "timeout") and base["BLOCK"] > 128:
            return [({**base, "BLOCK": base["BLOCK"] // 2}, "half the outputs per program")]
        return []

    return FamilySpace(
        family=FAMILY,
        designs=list(DESIGNS),
        configs=lambda d: [
            dict(zip(SPACES[d], values, strict=True)) for values in itertools.product(*SPACES[d].values())
        ],
        pairs=dict,
        read=_as_pick,
        key=lambda design, config: launched(task, design, config),
        neighbours=lambda design, base, rng: neighbours(SPACES[design], base, rng),
        repairs=repairs,
        starts=[(d, dict(c)) for d, c in PRESETS],
        case_fits=lambda case: _same_rank(ctx, case),
    )


def pool_task_writer(source: str, name: str, ctx: WriterContext) -> WriterAnswer | None:
    """The offline writer's TaskWriter for standalone pooling: a WriterAnswer, or None to pass the task on."""
    from kernelwright.providers.offline.emit.emit_module import ProgramMeta
    from kernelwright.providers.offline.writer import WriterAnswer

    task = _analysis(hashlib.sha256(source.encode()).hexdigest(), source, name)
    if task is None:
        return None
    choice = choose_program(ctx, _space(ctx, task))
    if choice is None:
        return WriterAnswer(None, "Every design and config of the pooling writer is forbidden by a rule.")
    design, config, why = choice
    code = emit_pool_program(source, task, design, config)
    explanation = f"Standalone {task.describe()} written in Triton ({design}, {why})."
    return WriterAnswer(code, explanation, ProgramMeta(FAMILY, design, dict(config)))
