"""The conv family as a whole-task writer for the offline writer's plug-in point (plugins.TASK_WRITERS
names `conv_task_writer` as the "conv" family).

`conv_task_writer(source, name, ctx)` answers tasks that analyse as one convolution plus fusable work
(providers/offline/families/conv/conv.py) and passes (None) on everything else. Whether a step is the
Triton convolution's or the generic path's is `takes_turn`; what it writes is chosen by the whole-task
policy (choice/whole_task.py) over the conv `FamilySpace` built here:
- large step: a design different from the parent's and from the representatives' (ctx.listed), the
  designs ranked by structure (conv_designs); a design+config that won on this hardware on this task or
  on a convolution of the same class (depthwise / few / many input channels per group, read from the
  case program's docstring), the nearest such task first (tasks.similarity), is tried first; programs of
  failed cases are avoided; when every design was written, a config not written yet;
- small step: a config one knob away from the parent's (conv_neighbours, in an order the context's
  seeded RNG draws), the first that no rule forbids and that writes a program not written yet (a knob
  the plan does not read writes the same program: the key is the program without its header);
- repair: by the feedback's error kind: resource errors shrink the tiles, a mismatch under DOT=tf32x3
  falls back to DOT=ieee, other failures take a large step (another design).
Rules apply to conv designs and knobs (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages,
LAYOUT, DOT, RECOMPUTE). DOT=tf32 only when the context allows TF32.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Hashable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kernelwright.providers.offline.choice.context import WriterContext
from kernelwright.providers.offline.choice.policy import stays_with_parent
from kernelwright.providers.offline.choice.whole_task import FamilySpace, choose_program
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

if TYPE_CHECKING:
    from kernelwright.providers.offline.writer import WriterAnswer


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
    if stays_with_parent(ctx):
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
    written: dict[tuple[str, ConvConfig], str] = {}

    def program(design: str, config: ConvConfig) -> str:
        """The program `config` writes (each written once per answer); ConvEmitError where it cannot be."""
        if (design, config) not in written:
            written[design, config] = emit_conv_program(
                plan, source, design=design, config=config, precision=precision
            )
        return written[design, config]

    def key(design: str, config: ConvConfig) -> Hashable:
        """The program without its header line: a knob this plan does not read (X_TMA where no stage tiles
        boxes, GROUP_M on plane tiles, ...) writes the same program under another header, a candidate that
        measures nothing new. Where the design cannot write it: its design and config."""
        try:
            return program(design, config).split("\n", 1)[1]
        except ConvEmitError:
            return design, config

    def repairs(
        design: str, base: ConvConfig, kind: str | None, resources: bool
    ) -> list[tuple[ConvConfig, str]]:
        if resources:
            return [
                (base.model_copy(update={"num_stages": max(2, base.num_stages - 1)}), "fewer stages"),
                (base.model_copy(update={"BLOCK_M": max(16, base.BLOCK_M // 2)}), "smaller BLOCK_M"),
                (base.model_copy(update={"BLOCK_N": max(16, base.BLOCK_N // 2)}), "smaller BLOCK_N"),
            ]
        if kind == "mismatch" and base.DOT == "tf32x3":
            return [(base.model_copy(update={"DOT": "ieee"}), "exact fp32 products")]
        return []

    def neighbours(design: str, base: ConvConfig, rng: random.Random) -> list[ConvConfig]:
        options = conv_neighbours(design, base, precision)
        rng.shuffle(options)
        return options

    cls = _conv_class((plan.full_spec or plan.spec).in_per_group)
    space = FamilySpace(
        family=FAMILY,
        designs=conv_designs(plan),
        configs=lambda d: conv_configs(d, plan, precision),
        pairs=_config_dict,
        read=lambda meta: (meta.design, config_from_pairs(meta.config)),
        key=key,
        neighbours=neighbours,
        repairs=repairs,
        case_fits=lambda case: _similar(case, name, cls),
        allows=lambda design, config: not (precision == "strict" and config.DOT == "tf32"),
    )
    choice = choose_program(ctx, space)
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
