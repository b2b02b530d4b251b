"""The offline writer end to end: prompt text in, one candidate program (or a reason why not) out.

    answer = write_program(prompt, seed=0)
    answer.code         # the module source (None when the task cannot be written)
    answer.explanation  # one line: what was written and why
    answer.text         # what the chat model answers: the explanation and one ```python block

Steps: parse the prompt sections; analyse the task (cached per source); split it into kernels; read
the context (request, parent, feedback, rules, experience, target); choose a design and config for
the main kernel as the request asks and defaults for the others; emit the module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelwright.providers.offline.choice.context import WriterContext, read_context
from kernelwright.providers.offline.choice.designs import (
    REGISTRY,
    KernelInfo,
    config_space,
    default_config,
    default_design,
    kernel_info,
    make_config,
)
from kernelwright.providers.offline.choice.matmul_fusion import fuse_dual_matmuls
from kernelwright.providers.offline.choice.policy import Choice, DesignsClosed, choose, fuse_allowed
from kernelwright.providers.offline.choice.schedule import Schedule, schedule
from kernelwright.providers.offline.emit.emit_module import (
    EmitError,
    ProgramMeta,
    UndefinedNameError,
    emit_program,
)
from kernelwright.providers.offline.emit.emit_rows import RowPlanError
from kernelwright.providers.offline.frontend.analysis import AnalysisError, analyze_cached
from kernelwright.providers.offline.plugins import task_writers
from kernelwright.providers.protocol import kept_as_torch_line, parse_sections

CONFIG_KEYS = {
    "BLOCK", "BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_R", "BLOCK_I", "TILE", "RMAX", "num_warps", "num_stages",
    "WAVES", "SPLIT_K", "GROUP_M", "PREC", "KMAJOR", "PERSIST", "PRELOAD", "STATIC", "MERGE",
    "WRITE_CHUNKS",
}  # fmt: skip


@dataclass
class WriterAnswer:
    code: str | None
    explanation: str
    meta: ProgramMeta | None = None
    kernels: list[dict[str, Any]] = field(default_factory=list)
    unsupported: str | None = None
    """Set when the task itself is beyond this writer (an operator or dtype it has no design for), not
    this step: the graph then stops the run at once (nodes/planner.py unsupported_stop)."""

    @property
    def text(self) -> str:
        if self.code is None:
            return self.explanation
        return f"{self.explanation}\n\n```python\n{self.code.rstrip()}\n```\n"


TaskWriter = Callable[[str, str, WriterContext], "WriterAnswer | None"]
"""A writer for whole tasks of one family: (task source, task name, context) -> answer, or None to pass."""

# Writers of whole tasks (Triton convolutions, standalone pooling) are named in plugins.TASK_WRITERS and
# asked first, in that order, with the parsed context (request kind, parent header, rules, experience cases,
# TF32 permission; `policy.forbidden` and `policy.neighbours` apply to any family's designs and configs).
# The first answer that is not None is the program.


def _no_program(reason: str, *, task_level: bool = True) -> WriterAnswer:
    """No program. `task_level`: the reason holds for every step of this task (an unsupported operator),
    so the run may as well stop; else it is this step's (a config whose code generation failed)."""
    return WriterAnswer(
        None,
        f"The offline writer cannot write this task: {reason}",
        unsupported=reason if task_level else None,
    )


def _full_config(choice: Choice, info: KernelInfo, tf32: bool) -> dict[str, Any]:
    """Every key of the design's space, so the metadata line reads back exactly."""
    space = config_space(choice.design, info, tf32)
    base = default_config(choice.design, info, tf32)
    out = {k: choice.config.get(k, base.get(k)) for k in space}
    for k, v in choice.config.items():
        out.setdefault(k, v)
    return {k: v for k, v in out.items() if v is not None}


def write_program(prompt: str, seed: int = 0) -> WriterAnswer:
    sections = parse_sections(prompt)
    task = sections.get("task")
    if task is None or not task.body.strip():
        return _no_program("the prompt has no <task> section with the reference program", task_level=False)
    name = task.attrs.get("name", "task")
    writers = task_writers()
    if writers:
        ctx0 = read_context(sections, seed, CONFIG_KEYS)
        for _family, writer in writers:
            answer = writer(task.body, name, ctx0)
            if answer is not None:
                return answer
    try:
        analysed = analyze_cached(task.body, name)
    except AnalysisError as exc:
        return _no_program(str(exc))
    try:
        sched = schedule(analysed.graph)
    except ValueError as exc:
        return _no_program(str(exc))
    ctx = read_context(sections, seed, CONFIG_KEYS)
    if fuse_allowed(ctx):
        sched = fuse_dual_matmuls(sched)
    kernels = sched.triton_kernels()
    if not kernels:
        ops = ", ".join(sorted({k.anchor.op for k in sched.kernels if k.anchor is not None}))
        return _no_program(f"nothing in it is work this writer expresses in Triton (only {ops})")
    ctx.kept_torch = frozenset(kept_torch_ops(sched))
    infos = {k.id: kernel_info(sched, k, ctx.sm_count, ctx.smem_bytes, ctx.arch) for k in kernels}
    primary = max(kernels, key=lambda k: (infos[k.id].cost, -k.id))
    try:
        return _emit(analysed, sched, ctx, infos, primary.id)
    except DesignsClosed as exc:  # a closed design is not written again (nodes/repeats.py)
        return _no_program(str(exc))


def _emit(
    analysed: Any, sched: Schedule, ctx: WriterContext, infos: dict[int, KernelInfo], primary: int
) -> WriterAnswer:
    choices = {kid: choose(ctx, info, kid == primary) for kid, info in infos.items()}
    for attempt in range(2):
        configs = {}
        records = []
        for kid, ch in choices.items():
            full = _full_config(ch, infos[kid], ctx.tf32)
            configs[kid] = make_config(ch.design, full)
            records.append(
                {"kernel": kid, "family": infos[kid].family, "design": ch.design.name, "config": full}
            )
        main = choices[primary]
        meta = ProgramMeta(
            infos[primary].family, main.design.name, _full_config(main, infos[primary], ctx.tf32)
        )
        explanation = _explain(analysed, sched, infos, choices, primary, ctx)
        try:
            code = emit_program(analysed, sched, configs, meta, explanation)
            return WriterAnswer(code, explanation, meta, records)
        except UndefinedNameError as exc:  # the schedule's, not a design's: no other design writes it
            return _no_program(f"code generation failed: {exc}")
        except (EmitError, RowPlanError, ValueError, KeyError) as exc:
            if attempt == 1:
                return _no_program(f"code generation failed: {exc}", task_level=False)
            # The chosen designs cannot be written for this task: fall back to each kernel's default.
            for kid, info in infos.items():
                d = default_design(info)
                choices[kid] = Choice(d, default_config(d, info, ctx.tf32), f"default ({exc})")
    raise AssertionError("unreachable")


def kept_torch_ops(sched: Schedule) -> list[str]:
    """The ops the program leaves to torch (a convolution through cuDNN, say), by their aten names."""
    return sorted({k.anchor.op.split(".")[1] if k.anchor.op.startswith("aten.") else k.anchor.op
                   for k in sched.kernels if k.kind == "glue" and k.anchor is not None and k.anchor.kind == "opaque"})  # fmt: skip


def _explain(analysed: Any, sched: Schedule, infos: dict[int, KernelInfo], choices: dict[int, Choice],
             primary: int, ctx: WriterContext) -> str:  # fmt: skip
    main = choices[primary]
    n = len(choices)
    torch_ops = kept_torch_ops(sched)
    parts = [
        f"{ctx.kind.replace('_', ' ')}: {infos[primary].family} kernel as {main.design.name} ({main.why})"
    ]
    parts.append(f"{n} Triton kernel{'s' if n != 1 else ''}, shape-generic")
    if torch_ops:
        parts.append(kept_as_torch_line(torch_ops))
    return "; ".join(parts) + "."


__all__ = ["REGISTRY", "TaskWriter", "WriterAnswer", "write_program"]
