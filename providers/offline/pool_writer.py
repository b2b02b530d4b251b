"""Standalone max/avg pooling (1-D, 2-D, 3-D) as a whole-task writer for the offline writer.

    from kernelwright.providers.offline import register_task_writer
    from kernelwright.providers.offline.pool_writer import pool_task_writer
    register_task_writer("pool", pool_task_writer)

A task is taken when its forward is exactly one pooling module applied to its input:

    self.pool = nn.MaxPool2d(...)        # or MaxPool1d/3d, AvgPool1d/2d/3d, in Model.__init__
    def forward(self, x): return self.pool(x)

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
num_warps. A large step takes the first preset (design, config) that is neither written in the run nor
forbidden (the design and config of a correct experience case of this family go first, the nearest case
first: policy.ranked_cases, if it pooled over as many dims); a small step moves one knob of the parent's
design one step (seeded); a repair after a resource error halves BLOCK.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
from functools import lru_cache
from typing import Any

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
        tree = ast.parse(source)
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
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
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
    from kernelwright.providers.offline.analysis import AnalysisError, analyze_cached
    from kernelwright.providers.offline.schedule import schedule

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


def _kw_rows_tile(oh: int, ow: int, block: int, block_h: int, num_warps: int) -> tuple[int, int, int]:
    """What a `rows` program launches for an OH x OW output plane: BLOCK no wider than the row (a power of
    two, at least 32), BLOCK_H no taller than the plane, at most one warp per 64 outputs (two per thread).
    The program's launcher calls this; the writer calls it to tell configs that launch alike apart."""
    block = min(block, max(32, 1 << (ow - 1).bit_length()))
    block_h = min(block_h, 1 << (oh - 1).bit_length())
    return block, block_h, max(1, min(num_warps, block * block_h // 64))


def launched(task: PoolTask, design: str, config: dict[str, int]) -> tuple[Any, ...]:
    """What a (design, config) launches at the task's traced size: configs that launch alike run the same
    kernel, so a search step between them measures nothing new."""
    if design != "rows" or task.out_spatial is None:
        return (design, *sorted(config.items()))
    oh, ow = ([1, 1, *task.out_spatial])[-2:]
    return (design, *_kw_rows_tile(oh, ow, config["BLOCK"], config["BLOCK_H"], config["num_warps"]))


# ---- the program ------------------------------------------------------------------------------------

_AVERAGE = '''
@triton.jit
def _kw_pool_average(
    acc, d0, h0, w0, D, H, W, DIVISOR,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
):
    """Window sums to averages as PyTorch divides them: by divisor_override, else by the window clipped to
    the padded input, then (without count_include_pad) to the input itself. The windows' first indices d0,
    h0, w0 broadcast against acc (both kernels call this)."""
    if HAS_DIVISOR:
        out = acc / DIVISOR
    else:
        d1 = tl.minimum(d0 + KD, D + PD)
        h1 = tl.minimum(h0 + KH, H + PH)
        w1 = tl.minimum(w0 + KW, W + PW)
        if COUNT_PAD:
            dn, hn, wn = d1 - d0, h1 - h0, w1 - w0
        else:
            dn = tl.minimum(d1, D) - tl.maximum(d0, 0)
            hn = tl.minimum(h1, H) - tl.maximum(h0, 0)
            wn = tl.minimum(w1, W) - tl.maximum(w0, 0)
        count = dn.to(tl.int32) * hn.to(tl.int32) * wn.to(tl.int32)
        out = acc / count.to(acc.dtype)
    return out
'''

_FLAT_KERNEL = '''
@triton.jit
def _kw_pool_kernel(
    x_ptr, y_ptr, total,
    D, H, W, OD, OH, OW, DIVISOR,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    IS_MAX: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
    WIDE: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr,
):
    """BLOCK outputs of a (batch, OD, OH, OW) pooling per program; the window walked at compile time."""
    if WIDE:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = offs < total
    ow = offs % OW
    rest = offs // OW
    oh = rest % OH
    rest = rest // OH
    od = rest % OD
    n = rest // OD
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    base = n * D * H * W
    acc_type = tl.float64 if F64 else tl.float32
    if IS_MAX:
        acc = tl.full([BLOCK], float("-inf"), acc_type)
    else:
        acc = tl.zeros([BLOCK], acc_type)
    for kd in tl.static_range(KD):
        di = d0 + kd * DD
        d_ok = (di >= 0) & (di < D)
        for kh in tl.static_range(KH):
            hi = h0 + kh * DH
            dh_ok = d_ok & (hi >= 0) & (hi < H)
            row = (di * H + hi) * W
            for kw in tl.static_range(KW):
                wi = w0 + kw * DW
                ok = live & dh_ok & (wi >= 0) & (wi < W)
                if IS_MAX:
                    v = tl.load(x_ptr + base + row + wi, mask=ok, other=float("-inf")).to(acc_type)
                    # NaN wins, as in PyTorch: (v > acc) is false for NaN, (v != v) is not
                    acc = tl.where((v > acc) | (v != v), v, acc)
                else:
                    v = tl.load(x_ptr + base + row + wi, mask=ok, other=0.0).to(acc_type)
                    acc += v
    if not IS_MAX:
        acc = _kw_pool_average(acc, d0, h0, w0, D, H, W, DIVISOR, KD, KH, KW, PD, PH, PW, COUNT_PAD, HAS_DIVISOR)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=live)
'''

_ROWS_KERNEL = '''
@triton.jit
def _kw_pool_rows_kernel(
    x_ptr, y_ptr,
    D, H, W, OD, OH, OW, DIVISOR, OH_BLOCKS, W_BLOCKS,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    IS_MAX: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIVISOR: tl.constexpr,
    F64: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK: tl.constexpr,
):
    """A [BLOCK_H, BLOCK] tile of one (batch, od) output plane per program: BLOCK_H output rows, BLOCK
    outputs of each. The plane's indices and its 64-bit base offsets are scalars; offsets inside one input
    or output plane are 32-bit (the launcher checks they fit). Programs run along a row first."""
    pid = tl.program_id(0).to(tl.int64)
    col = (pid % W_BLOCKS).to(tl.int32)
    rest = pid // W_BLOCKS
    oh = (rest % OH_BLOCKS).to(tl.int32) * BLOCK_H + tl.arange(0, BLOCK_H)
    rest = rest // OH_BLOCKS
    od = rest % OD
    n = rest // OD
    ow = col * BLOCK + tl.arange(0, BLOCK)
    live = (oh < OH)[:, None] & (ow < OW)[None, :]
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    acc_type = tl.float64 if F64 else tl.float32
    if IS_MAX:
        acc = tl.full([BLOCK_H, BLOCK], float("-inf"), acc_type)
    else:
        acc = tl.zeros([BLOCK_H, BLOCK], acc_type)
    for kd in tl.static_range(KD):
        di = d0 + kd * DD
        d_ok = (di >= 0) & (di < D)
        src = x_ptr + (n * D + di) * H * W  # the input plane, a scalar 64-bit offset
        for kh in tl.static_range(KH):
            hi = h0 + kh * DH
            row_ok = live & (d_ok & (hi >= 0) & (hi < H))[:, None]
            row = src + (hi * W)[:, None]
            for kw in tl.static_range(KW):
                wi = w0 + kw * DW
                ok = row_ok & ((wi >= 0) & (wi < W))[None, :]
                if IS_MAX:
                    v = tl.load(row + wi[None, :], mask=ok, other=float("-inf")).to(acc_type)
                    acc = tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)  # NaN wins, as in PyTorch
                else:
                    acc += tl.load(row + wi[None, :], mask=ok, other=0.0).to(acc_type)
    if not IS_MAX:
        acc = _kw_pool_average(
            acc, d0, h0[:, None], w0[None, :], D, H, W, DIVISOR, KD, KH, KW, PD, PH, PW, COUNT_PAD, HAS_DIVISOR
        )
    out = y_ptr + (n * OD + od) * OH * OW + (oh * OW)[:, None] + ow[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=live)
'''

_HOST = '''
def _kw_tuple(value, nd):
    if isinstance(value, int):
        return [value] * nd
    value = [int(v) for v in value]
    return value * nd if len(value) == 1 else value


def _kw_out_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling output size for one dim."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _kw_pool(x, pool, nd, is_max, design, block, num_warps, block_h=1):
    if getattr(pool, "return_indices", False):
        raise NotImplementedError("max pooling that returns indices")
    kernel = _kw_tuple(pool.kernel_size, nd)
    stride = _kw_tuple(pool.stride if pool.stride is not None else pool.kernel_size, nd)
    padding = _kw_tuple(pool.padding, nd)
    dilation = _kw_tuple(getattr(pool, "dilation", 1), nd)
    ceil_mode = bool(pool.ceil_mode)
    if x.dim() not in (nd + 1, nd + 2):
        raise ValueError(f"expected a {nd + 1}-D or {nd + 2}-D input, got {tuple(x.shape)}")
    lead = x.shape[: x.dim() - nd]
    spatial = list(x.shape[x.dim() - nd:])
    out_spatial = [
        _kw_out_size(spatial[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode) for i in range(nd)
    ]
    pad = 3 - nd  # 1-D and 2-D pooling as 3-D pooling with size-1 dims in front
    size3, out3 = [1] * pad + spatial, [1] * pad + out_spatial
    k3, s3 = [1] * pad + kernel, [1] * pad + stride
    p3, d3 = [0] * pad + padding, [1] * pad + dilation
    x = x.contiguous()
    y = torch.empty((*lead, *out_spatial), device=x.device, dtype=x.dtype)
    total = y.numel()
    if total == 0:
        return y
    divisor = getattr(pool, "divisor_override", None)
    count_pad = bool(getattr(pool, "count_include_pad", True))
    consts = dict(IS_MAX=is_max, COUNT_PAD=count_pad, HAS_DIVISOR=bool(divisor), F64=x.dtype == torch.float64)
    if design == "rows":
        od_, oh_, ow_ = out3
        tile_w, tile_h, warps = _kw_rows_tile(oh_, ow_, block, block_h, num_warps)
        w_blocks, oh_blocks = -(-ow_ // tile_w), -(-oh_ // tile_h)
        programs = total // (oh_ * ow_) * oh_blocks * w_blocks
        # 32-bit offsets inside one input or output plane, one grid axis
        if max(size3[1] * size3[2], oh_ * ow_) < 2**31 and programs <= 2**31 - 1:
            _kw_launch(
                _kw_pool_rows_kernel, (programs,),
                x, y, *size3, *out3, int(divisor or 1), oh_blocks, w_blocks, *k3, *s3, *p3, *d3,
                BLOCK_H=tile_h, BLOCK=tile_w, num_warps=warps, **consts,
            )
            return y
    grid = (-(-total // block),)  # ceil division in ints: triton.cdiv is a jit function
    _kw_launch(
        _kw_pool_kernel, grid, x, y, total, *size3, *out3, int(divisor or 1), *k3, *s3, *p3, *d3,
        WIDE=max(x.numel(), total) >= 2**31 - 1, BLOCK=block, num_warps=num_warps, **consts,
    )
    return y
'''


def emit_pool_program(source: str, task: PoolTask, design: str, config: dict[str, int]) -> str:
    """The candidate module: the task's constructor as ModelNew, the kernels, and their launcher."""
    from kernelwright.providers.offline.conv_codegen import _ReferenceParts
    from kernelwright.providers.offline.emit import HELPERS
    from kernelwright.providers.offline.emit_module import ProgramMeta

    if design not in DESIGNS or _as_config(design, config) != config:
        raise ValueError(f"not a pooling design and config: {design!r} {config}; the spaces are {SPACES}")
    reference = _ReferenceParts(source)
    header = ProgramMeta(FAMILY, design, dict(config)).line()
    what = "each output row split into blocks of" if design == "rows" else "blocks of the flattened output,"
    doc = (
        f'"""Generated by kernelwright\'s pooling writer: {task.describe()}, one Triton kernel ({design}:\n'
        f'{what} BLOCK={config["BLOCK"]} outputs per program) that reads each window from the input."""\n'
    )
    block_h = f", block_h={config['BLOCK_H']}" if "BLOCK_H" in config else ""
    forward = (
        "\n\ndef _kw_forward(self, x):\n"
        f"    return _kw_pool(x, self.{task.attr}, {task.nd}, {task.is_max}, {design!r}, "
        f"{config['BLOCK']}, {config['num_warps']}{block_h})\n"
    )
    parts = [
        header,
        doc,
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
        "\n" + inspect.getsource(_kw_rows_tile),
        HELPERS["_kw_launch"],
        _HOST,
        forward,
        reference.model_new(["x"]),
    ]
    return "\n".join(parts)


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


def _same_rank(ctx: Any, case: Any) -> bool:
    """Whether a case pooled an input of as many dims as this task's (so over as many dims), as far as both
    signatures say. A config does not carry over between them: on an H200 a 1-D pool's best (256 outputs a
    program, 0.7% ahead of 512 on published/26) started published/27's 2-D pool at 3.21 ms where its own
    default (512) ran 2.57 (benchmarks/RESULTS.md, twenty-second session)."""
    mine, theirs = ctx.signature, case.signature
    if mine is None or theirs is None or not mine.input_shapes or not theirs.input_shapes:
        return True
    return len(mine.input_shapes[0]) == len(theirs.input_shapes[0])


def _choose(ctx: Any, task: PoolTask) -> tuple[str, dict[str, int], str] | None:
    """A (design, config, why) for this step. Programs compare by what they launch at the task's size
    (`launched`): a step never writes a config that launches as one already written, the parent included,
    while another is left."""
    from kernelwright.providers.offline.policy import (
        design_forbidden,
        error_kind,
        forbidden,
        neighbours,
        ranked_cases,
    )

    def ok(design: str, config: dict[str, int]) -> bool:
        return not design_forbidden(ctx, FAMILY, design) and not forbidden(ctx, FAMILY, design, config)

    def key(design: str, config: dict[str, int]) -> tuple[Any, ...]:
        return launched(task, design, config)

    parent = _as_pick(ctx.parent)
    written = {key(*p) for m in [*ctx.tried, *ctx.listed, ctx.parent] if (p := _as_pick(m)) is not None}
    if parent is not None and ctx.kind == "repair":
        design, base = parent
        if error_kind(ctx.feedback) in ("resources", "compile_error", "timeout") and base["BLOCK"] > 128:
            smaller = {**base, "BLOCK": base["BLOCK"] // 2}
            if ok(design, smaller):
                return design, smaller, "repair: half the outputs per program"
    if parent is not None and ctx.kind == "small_step":
        design, base = parent
        options = [c for c in neighbours(SPACES[design], base, ctx.rng) if ok(design, c)]
        fresh = [c for c in options if key(design, c) not in written]
        if fresh or options:
            pick = (fresh or options)[0]
            changed = ", ".join(f"{k}={pick[k]}" for k in pick if pick[k] != base[k])
            return design, pick, f"small step: {changed}"
    good = ranked_cases(ctx, [c for c in ctx.cases
                              if c.good and c.same_hardware and _as_pick(c.meta) and _same_rank(ctx, c)])  # fmt: skip
    for design, config in [p for c in good if (p := _as_pick(c.meta)) is not None]:
        if key(design, config) not in written and ok(design, config):
            return design, config, "the design and config of a correct pooling case"
    for design, config in PRESETS:
        if key(design, config) not in written and ok(design, config):
            return design, dict(config), "large step: the next preset"
    every = [
        (d, dict(zip(SPACES[d], values, strict=True)))
        for d in DESIGNS
        for values in itertools.product(*SPACES[d].values())
    ]
    rest = [(d, c) for d, c in every if key(d, c) not in written and ok(d, c)]
    if rest:
        return (*rest[ctx.rng.randrange(len(rest))], "large step: a config not written yet")
    allowed = [(d, c) for d, c in every if ok(d, c)]
    return (*allowed[0], "every config was written: the first allowed one") if allowed else None


def pool_task_writer(source: str, name: str, ctx: Any) -> Any:
    """The offline writer's TaskWriter for standalone pooling: a WriterAnswer, or None to pass the task on."""
    from kernelwright.providers.offline.emit_module import ProgramMeta
    from kernelwright.providers.offline.writer import WriterAnswer

    task = _analysis(hashlib.sha256(source.encode()).hexdigest(), source, name)
    if task is None:
        return None
    choice = _choose(ctx, task)
    if choice is None:
        return WriterAnswer(None, "Every design and config of the pooling writer is forbidden by a rule.")
    design, config, why = choice
    code = emit_pool_program(source, task, design, config)
    explanation = f"Standalone {task.describe()} written in Triton ({design}, {why})."
    return WriterAnswer(code, explanation, ProgramMeta(FAMILY, design, dict(config)))
