"""The choice of a whole-task family's program (convolutions, pooling): one policy over a family's space.

A family (families/conv/conv_writer.py, families/pool_writer.py) describes what it can write as a
`FamilySpace`: its applicable designs, each design's configs, how a config reads from and writes to a
`# kernelwright:` header, what makes two programs the same (`key`), a small step's candidates and a
repair's. `choose_program` hands the space's steps to the one policy (policy.choose_step, which the
generic writer's kernels go through too), which takes the request's step or else a large step:
- repair: the family's candidates for the parent's error kind, the first that rules allow; else a large step;
- small step: the first of the parent's neighbours (in the family's seeded order) that rules allow, that no
  failed case wrote and that is not a program written already (all written: any allowed one);
- large step: designs not written yet first; a good case's program on this hardware (nearest task first,
  where the family says the case fits this task), then the family's starts, then any config not written,
  in the designs' order; last, the first allowed start.
Rules (policy.rules_allow) apply to every choice; a failed case's program is never written again.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from kernelwright.providers.offline.choice.context import (
    PromptCase,
    WriterContext,
    error_kind,
    resources_error,
)
from kernelwright.providers.offline.choice.policy import (
    choose_step,
    design_forbidden,
    ranked_cases,
    rules_allow,
)
from kernelwright.providers.protocol import KernelHeader

C = TypeVar("C")


@dataclass
class FamilySpace(Generic[C]):
    """What a whole-task family hands the policy (see the module docstring)."""

    family: str
    designs: list[str]
    """The designs that apply to the task, preferred first."""
    configs: Callable[[str], list[C]]
    """A design's configs, its default first (a large step's start is the first one allowed)."""
    pairs: Callable[[C], dict[str, Any]]
    """A config as the KEY=VALUE pairs a header and a rule name."""
    read: Callable[[KernelHeader], tuple[str, C] | None]
    """A header's (design, config) where it is this family's and the family can write it again."""
    key: Callable[[str, C], Hashable]
    """What tells two programs apart: two (design, config) of one key write the same program."""
    neighbours: Callable[[str, C, random.Random], list[C]]
    """A small step's candidates from a config, in the seeded order a step takes them."""
    repairs: Callable[[str, C, str | None, bool], list[tuple[C, str]]]
    """(design, config, error kind, resource error) -> configs that may fix it, each with why."""
    starts: list[tuple[str, C]] | None = None
    """A large step's starts in order; None: each design's first allowed config."""
    case_fits: Callable[[PromptCase], bool] = field(default=lambda case: True)
    """Whether a good case's program can stand for this task (the same structure)."""
    allows: Callable[[str, C], bool] = field(default=lambda design, config: True)
    """Limits of the family's own beyond rules (a precision the context does not allow)."""


def choose_program(ctx: WriterContext, space: FamilySpace[C]) -> tuple[str, C, str] | None:
    """(design, config, why) for this step, or None where rules forbid every design."""
    designs = [d for d in space.designs if not design_forbidden(ctx, space.family, d)]
    if not designs:
        return None
    return choose_step(ctx, _FamilySteps(ctx, space, designs))


class _FamilySteps(Generic[C]):
    """The steps of the policy (policy.choose_step) over a family's space: what the family's programs
    written so far, its failed cases and the parent say, read once."""

    def __init__(self, ctx: WriterContext, space: FamilySpace[C], designs: list[str]) -> None:
        self.space, self.designs = space, designs
        self.bad = {space.key(*p) for c in ctx.cases if c.bad and (p := self.program(c.meta)) is not None}
        self.written_headers = [
            m for m in [*ctx.listed, *ctx.tried, ctx.parent] if m is not None and self.program(m) is not None
        ]
        self.written = {space.key(*p) for m in self.written_headers if (p := self.program(m)) is not None}
        self.parent = self.program(ctx.parent)
        self.rules_ok = partial(rules_allow, ctx, space.family)

    def program(self, meta: KernelHeader | None) -> tuple[str, C] | None:
        return self.space.read(meta) if meta is not None and meta.family == self.space.family else None

    def ok(self, design: str, config: C) -> bool:
        return (
            design in self.designs
            and self.space.allows(design, config)
            and self.rules_ok(design, self.space.pairs(config))
        )

    def fresh(self, design: str, config: C) -> bool:
        key = self.space.key(design, config)
        return key not in self.written and key not in self.bad

    def repair(self, ctx: WriterContext) -> tuple[str, C, str] | None:
        if self.parent is None:
            return None
        design, base = self.parent
        kind = error_kind(ctx.feedback)
        for config, why in self.space.repairs(design, base, kind, resources_error(ctx.feedback)):
            if config != base and self.ok(design, config):
                return design, config, f"repair ({kind or 'error'}): {why}"
        return None

    def small_step(self, ctx: WriterContext) -> tuple[str, C, str] | None:
        if self.parent is None or self.parent[0] not in self.designs:
            return None
        space = self.space
        design, base = self.parent
        options = [
            c
            for c in space.neighbours(design, base, ctx.rng)
            if self.ok(design, c) and space.key(design, c) not in self.bad
        ]
        new = [c for c in options if self.fresh(design, c)]
        if not (new or options):
            return None
        pick = (new or options)[0]
        old, now = space.pairs(base), space.pairs(pick)
        changed = ", ".join(f"{k}={v}" for k, v in now.items() if str(v) != str(old.get(k)))
        return design, pick, f"small step: {changed}"

    def large_step(self, ctx: WriterContext, asked: bool) -> tuple[str, C, str] | None:
        return _large_step(
            ctx, self.space, self.designs, self.written_headers, self.ok, self.fresh, self.parent is not None
        )


def _large_step(
    ctx: WriterContext,
    space: FamilySpace[C],
    designs: list[str],
    written_headers: list[KernelHeader],
    ok: Callable[[str, C], bool],
    fresh: Callable[[str, C], bool],
    has_parent: bool,
) -> tuple[str, C, str] | None:
    seen = {m.design for m in written_headers}
    order = [d for d in designs if d not in seen] or designs
    # A good program on this hardware, of a task the family says is alike, the nearest task first; a
    # speed from other hardware is not advice here.
    good = [c for c in ctx.cases if c.good and c.same_hardware and c.meta is not None and space.case_fits(c)]
    for case in ranked_cases(ctx, good):
        p = space.read(case.meta) if case.meta is not None and case.meta.family == space.family else None
        if p is not None and p[0] in order and ok(*p) and fresh(*p):
            return p[0], p[1], f"from experience (speedup {case.speedup})"
    if space.starts is not None:
        starts = sorted(space.starts, key=lambda s: s[0] not in order)  # designs not written yet first
    else:
        first = {d: next((c for c in space.configs(d) if ok(d, c)), None) for d in order}
        starts = [(d, c) for d, c in first.items() if c is not None]
    for design, config in starts:
        if ok(design, config) and fresh(design, config):
            return design, config, "large step" if has_parent else "first design"
    for design in order:
        for config in space.configs(design):
            if ok(design, config) and fresh(design, config):
                return design, config, "large step: a config not written yet"
    for design, config in [*starts, *((d, c) for d in order for c in space.configs(d))]:
        if ok(design, config):
            return design, config, "every config was written: the first allowed one"
    return None
