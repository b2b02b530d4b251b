"""The conv family as a whole-task writer for the offline writer's plug-in point (plugins.TASK_WRITERS
names `conv_task_writer` as the "conv" family).

`conv_task_writer(source, name, ctx)` answers tasks that analyse as one convolution plus fusable work
(providers/offline/families/conv/conv.py) and passes (None) on everything else. It reads the request from the
writer's `WriterContext` (providers/offline/choice/policy.py) and decides like the other families:
- large step: a design different from the parent's and from the representatives' (ctx.listed), the
  designs ranked by structure (conv_designs); a design+config that won on this hardware on this task or
  on a convolution of the same class (depthwise / few / many input channels per group, read from the
  case program's docstring), the nearest such task first (tasks.similarity), is tried first; designs of
  failed cases are avoided; when every design was written, a config not written yet;
- small step: a config one knob away from the parent's (conv_neighbours), chosen with the context's
  seeded RNG among those no rule forbids;
- repair: by the feedback's error kind: resource errors shrink the tiles, a mismatch under DOT=tf32x3
  falls back to DOT=ieee, other failures switch design.
Rules apply to conv designs and knobs (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages,
LAYOUT, DOT, RECOMPUTE). DOT=tf32 only when the context allows TF32.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kernelwright.providers.offline.choice.context import WriterContext, error_kind, resources_error
from kernelwright.providers.offline.choice.policy import design_forbidden, ranked_cases, rules_allow
from kernelwright.providers.offline.families.conv.conv import (
    ConvConfig,
    ConvEmitError,
    analyze_conv_task,
    conv_configs,
    conv_designs,
    conv_neighbours,
    emit_conv_program,
)
from kernelwright.providers.offline.families.conv.conv_analysis import ConvAnalysis
from kernelwright.providers.protocol import KernelHeader

if TYPE_CHECKING:
    from kernelwright.providers.offline.writer import WriterAnswer

ConfigCheck = Callable[[str, ConvConfig], bool]
FirstConfig = Callable[[str], ConvConfig | None]

FAMILY = "conv"


@lru_cache(maxsize=64)
def _analysis(digest: str, source: str, name: str) -> ConvAnalysis:
    return analyze_conv_task(source, name)


def config_from_pairs(pairs: dict[str, Any], base: ConvConfig | None = None) -> ConvConfig:
    """A ConvConfig from KEY=VALUE text pairs (a program's metadata line); unknown keys are ignored."""
    values = (base or ConvConfig()).model_dump()
    for key, raw in pairs.items():
        if key not in values:
            continue
        text = str(raw).strip()
        current = values[key]
        if isinstance(current, bool):
            values[key] = text.lower() in ("true", "1", "yes")
        elif isinstance(current, int):
            try:
                values[key] = int(float(text))
            except ValueError:
                continue
        else:
            values[key] = text
    try:
        return ConvConfig(**values)
    except ValueError:
        return base or ConvConfig()


def _config_dict(config: ConvConfig) -> dict[str, Any]:
    return config.model_dump()


def _config_key(design: str, config: ConvConfig) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(design, config pairs as text): how a program's header names it, comparable with `_key`."""
    return design, tuple(sorted((k, str(v)) for k, v in _config_dict(config).items()))


def _key(meta: Any) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(design, config pairs) of a parsed `# kernelwright:` header (case or program already written)."""
    return meta.design, tuple(sorted(meta.config.items()))


def _work_after(plan: Any) -> list[Any]:
    """The plan's ops after the convolution that compute something (not operands or constants)."""
    return [op for op in plan.ops[1:] if op.kind not in ("operand", "const")]


def takes_turn(ctx: WriterContext) -> bool:
    """Whether this step is the Triton convolution's, or the other approach's: cuDNN for the
    convolution with the work after it fused into Triton (the writer's generic path).

    Which of the two is faster depends on the task and its shapes, so the search decides by
    measurement: the first large step writes the Triton convolution; a later large step (from the root
    or from a Triton convolution) offers the cuDNN + fused-epilogue program until one of those is among
    the representative designs; a large step from a cuDNN program comes back to a Triton convolution;
    small steps and repairs stay with their parent's approach.
    """
    parent = ctx.parent
    if ctx.kind in ("small_step", "repair"):
        return parent is None or parent.family == FAMILY
    if parent is not None and parent.family != FAMILY:
        return True
    listed = ctx.listed
    other_tried = any(meta.family != FAMILY for meta in listed)
    if parent is None:
        # the root's large steps: Triton first, then cuDNN once Triton is among the representatives
        return other_tried or not any(meta.family == FAMILY for meta in listed)
    return other_tried


def conv_task_writer(source: str, name: str, ctx: WriterContext) -> WriterAnswer | None:
    """The offline writer's TaskWriter for convolutions: a WriterAnswer, or None to pass the task on."""
    from kernelwright.providers.offline.emit.emit_module import ProgramMeta
    from kernelwright.providers.offline.writer import WriterAnswer

    analysis = _analysis(hashlib.sha256(source.encode()).hexdigest(), source, name)
    plan = analysis.plan
    if plan is None:
        return None
    # A convolution with nothing after it leaves the other approach nothing to write in Triton (cuDNN
    # alone is the reference itself): every step is the Triton convolution's.
    if _work_after(plan) and not takes_turn(ctx):
        return None
    precision = "tf32" if ctx.tf32 else "strict"
    designs = [d for d in conv_designs(plan) if not design_forbidden(ctx, FAMILY, d)]
    if not designs:
        return None

    def allowed(design: str, config: ConvConfig) -> bool:
        if precision == "strict" and config.DOT == "tf32":
            return False
        return rules_allow(ctx, FAMILY, design, _config_dict(config))

    def first_config(design: str) -> ConvConfig | None:
        return next((c for c in conv_configs(design, plan, precision) if allowed(design, c)), None)

    bad = {_key(c.meta) for c in ctx.cases if c.bad and c.meta is not None and c.meta.family == FAMILY}

    def is_bad(design: str, config: ConvConfig) -> bool:
        return _config_key(design, config) in bad

    written: dict[tuple[str, ConvConfig], str] = {}

    def program(design: str, config: ConvConfig) -> str:
        """The program `config` writes (each written once per answer); ConvEmitError where it cannot be."""
        if (design, config) not in written:
            written[design, config] = emit_conv_program(
                plan, source, design=design, config=config, precision=precision
            )
        return written[design, config]

    def body(design: str, config: ConvConfig) -> str | None:
        """The program without its header line, None where the design cannot write it."""
        try:
            return program(design, config).split("\n", 1)[1]
        except ConvEmitError:
            return None

    parent = ctx.parent if ctx.parent is not None and ctx.parent.family == FAMILY else None
    choice: tuple[str, ConvConfig, str] | None = None
    if ctx.kind == "small_step" and parent is not None and parent.design in designs:
        base = config_from_pairs(parent.config)
        tried = {_key(m) for m in ctx.tried if m.family == FAMILY}
        options = [
            c
            for c in conv_neighbours(parent.design, base, precision)
            if allowed(parent.design, c) and not is_bad(parent.design, c)
        ]
        # A neighbour already written in this run: take another (all written: any, as before).
        options = [c for c in options if _config_key(parent.design, c) not in tried] or options
        # A knob this plan does not read (X_TMA where no stage tiles boxes, GROUP_M on plane tiles, ...) writes
        # the parent's program again under another header: a candidate that measures nothing new.
        same = body(parent.design, base)
        options = [c for c in options if body(parent.design, c) != same] or options
        if options:
            pick = options[ctx.rng.randrange(len(options))]
            changed = [k for k, v in pick.model_dump().items() if v != base.model_dump()[k]]
            choice = (
                parent.design,
                pick,
                f"small step: {', '.join(f'{k}={pick.model_dump()[k]}' for k in changed)}",
            )
    elif ctx.kind == "repair" and parent is not None:
        choice = _repair(ctx, parent, designs, allowed, first_config, error_kind(ctx.feedback))
    if choice is None:
        spec = plan.full_spec or plan.spec
        choice = _large_step(
            ctx,
            parent,
            designs,
            allowed,
            first_config,
            is_bad,
            name=name,
            cls=_conv_class(spec.in_per_group),
            configs=lambda d: conv_configs(d, plan, precision),
        )
    if choice is None:
        return None
    design, config, why = choice
    try:
        code = program(design, config)
    except ConvEmitError as exc:
        return WriterAnswer(None, f"The conv writer cannot write this task with {design}: {exc}")
    explanation = (
        f"Convolution written in Triton ({design}, {why}); fused after it: "
        + (
            ", ".join(
                sorted({op.attrs.get("fn") or op.attrs.get("kind") or op.kind for op in _work_after(plan)})
            )
            or "nothing"
        )
        + "."
    )
    return WriterAnswer(code, explanation, ProgramMeta(FAMILY, design, _config_dict(config)))


_DESCRIBE = re.compile(r"conv\dd(?: transposed)? (\d+)->(\d+) k=[^\n]*? g=(\d+) ")
_TASK_LINE = re.compile(r"^task:\s*(\S+)", re.M)


def _conv_class(in_per_group: int) -> str:
    """The structural class conv_designs ranks designs by: depthwise, few or many channels per group."""
    return "depthwise" if in_per_group == 1 else ("few" if in_per_group < 16 else "many")


def _case_class(body: str) -> str | None:
    """The class of the convolution an experience case's program wrote (from its docstring), or None."""
    m = _DESCRIBE.search(body)
    if m is None:
        return None
    cin, groups = int(m.group(1)), max(1, int(m.group(3)))
    return _conv_class(max(1, cin // groups))


def _similar(case: Any, name: str, cls: str) -> bool:
    """Whether a case's design can stand for this task: the same task, or a convolution of the same class.

    A design that won on a dense convolution says nothing about a depthwise one (and the reverse): the
    designs are ranked by that structure, so a case whose class is unknown does not override it.
    """
    task = _TASK_LINE.search(case.body)
    if task is not None and task.group(1) == name:
        return True
    return _case_class(case.body) == cls


def _large_step(
    ctx: WriterContext,
    parent: KernelHeader | None,
    designs: list[str],
    allowed: ConfigCheck,
    first_config: FirstConfig,
    is_bad: ConfigCheck,
    *,
    name: str = "task",
    cls: str = "many",
    configs: Callable[[str], list[ConvConfig]] | None = None,
) -> tuple[str, ConvConfig, str] | None:
    # Designs already written at this point of the search (the parent's and the representatives'): a
    # large step from the root has no parent, so without this every one of them repeats the first.
    # <tried> adds every program written in the run so far, the representatives' or not.
    listed = [m for m in [*ctx.listed, *ctx.tried] if m.family == FAMILY]
    tried = {m.design for m in listed} | ({parent.design} if parent is not None else set())
    seen = [(m.design, config_from_pairs(m.config)) for m in listed]
    if parent is not None:
        seen.append((parent.design, config_from_pairs(parent.config)))
    order = [d for d in designs if d not in tried] or designs
    # a design and config that won on a convolution of the same class on this hardware, the nearest task
    # first (policy.ranked_cases: tasks.similarity); a speed from other hardware is not advice here
    cases = ranked_cases(
        ctx,
        [
            c
            for c in ctx.cases
            if c.good and c.same_hardware and c.meta is not None and c.meta.family == FAMILY
        ],
    )
    for case in cases:
        if case.meta is None:
            continue
        design = case.meta.design
        if design not in order or not _similar(case, name, cls):
            continue
        config = config_from_pairs(case.meta.config)
        if allowed(design, config) and (design, config) not in seen:
            return design, config, f"from experience (speedup {case.speedup})"
    for design in order:
        for config in (c for c in [first_config(design)] if c is not None):
            if not is_bad(design, config) and (design, config) not in seen:
                return design, config, "large step" if parent else "first design"
    # every design was written already: the first untried config, in the designs' order
    for design in order:
        for config in configs(design) if configs is not None else []:
            if allowed(design, config) and not is_bad(design, config) and (design, config) not in seen:
                return design, config, "large step: a config not written yet"
    for design in order:
        first = first_config(design)
        if first is not None and not is_bad(design, first):
            return design, first, "large step" if parent else "first design"
    return None


def _repair(
    ctx: WriterContext,
    parent: KernelHeader,
    designs: list[str],
    allowed: ConfigCheck,
    first_config: FirstConfig,
    kind: str | None,
) -> tuple[str, ConvConfig, str] | None:
    base = config_from_pairs(parent.config)
    design = parent.design if parent.design in designs else designs[0]
    resources = resources_error(ctx.feedback)
    candidates: list[tuple[ConvConfig, str]] = []
    if resources:
        candidates.append(
            (base.model_copy(update={"num_stages": max(2, base.num_stages - 1)}), "fewer stages")
        )
        candidates.append(
            (base.model_copy(update={"BLOCK_M": max(16, base.BLOCK_M // 2)}), "smaller BLOCK_M")
        )
        candidates.append(
            (base.model_copy(update={"BLOCK_N": max(16, base.BLOCK_N // 2)}), "smaller BLOCK_N")
        )
    elif kind == "mismatch" and base.DOT == "tf32x3":
        candidates.append((base.model_copy(update={"DOT": "ieee"}), "exact fp32 products"))
    for config, why in candidates:
        if config != base and allowed(design, config):
            return design, config, f"repair ({kind or 'error'}): {why}"
    for other in designs:
        if other != parent.design:
            start = first_config(other)
            if start is not None:
                return other, start, f"repair ({kind or 'error'}): another design"
    return None
