"""The offline writer's decisions: a design and a config for each kernel, from the `WriterContext`
(context.py: the request, the parent, rules, experience cases and the target read from the prompt).

A rule that names a design and/or KEY=VALUE pairs forbids every config that matches all of them
(`forbidden`); a large step takes a design other than the parent's and the representatives', the design
and config of a good near case first; a small step a config one knob from the parent's (`neighbours`); a
repair fixes the parent by its error kind. A config whose kernel would not fit the target (designs.fits)
is never written. Every choice is deterministic for a given prompt and seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kernelwright.providers.offline.choice.context import (
    PromptCase,
    WriterContext,
    error_kind,
    norm_value,
    resources_error,
)
from kernelwright.providers.offline.choice.designs import (
    KINDS,
    KMAJOR_PRECS,
    Design,
    KernelInfo,
    config_space,
    default_config,
    default_design,
    designs_for,
    find_design,
    fits,
    last_resort,
    launch_effect,
    make_config,
    task_derived_keys,
)
from kernelwright.providers.protocol import KernelHeader
from kernelwright.tasks.analysis import family_ops

# ---- choosing --------------------------------------------------------------------------------------


@dataclass
class Choice:
    design: Design
    config: dict[str, Any]
    why: str


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Steps(Protocol[T_co]):
    """What one choice space does at each kind of step; `choose_step` says which step it is. The generic
    writer's kernels (`_KernelSteps`) and the whole-task families (whole_task.FamilySpace) are two."""

    def repair(self, ctx: WriterContext) -> T_co | None:
        """Fix the parent by its error kind; None: no fix of the parent's config, take a large step."""

    def small_step(self, ctx: WriterContext) -> T_co | None:
        """A config one knob from the parent's; None: none allowed, take a large step."""

    def large_step(self, ctx: WriterContext, asked: bool) -> T_co | None:
        """Another design (`asked`: the request asked for a large step, it is not a fallback)."""


def choose_step(ctx: WriterContext, steps: Steps[T]) -> T | None:
    """The one policy: the request's kind of step, or a large step where that step finds nothing.

    Every choice of the writer goes through here, so a request kind means the same to every family."""
    got = None
    if ctx.kind == "repair":
        got = steps.repair(ctx)
    elif ctx.kind == "small_step":
        got = steps.small_step(ctx)
    return got if got is not None else steps.large_step(ctx, ctx.kind == "large_step")


def stays_with_parent(ctx: WriterContext) -> bool:
    """A small step or a repair: the step patches its parent, so it is written the parent's way."""
    return ctx.kind in ("small_step", "repair")


def forbidden(ctx: WriterContext, family: str, design: str, config: dict[str, Any]) -> bool:
    return any(r.forbids(family, design, config, ctx.kept_torch) for r in ctx.rules)


def admissible(ctx: WriterContext, info: KernelInfo, design: Design, config: dict[str, Any]) -> bool:
    """A config the writer may emit: no rule forbids it and it fits the target (designs.fits)."""
    return not forbidden(ctx, info.family, design.name, config) and fits(design, info, config)


def was_tried(ctx: WriterContext, family: str, design: Design, space: dict[str, tuple[Any, ...]],
              config: dict[str, Any]) -> bool:  # fmt: skip
    """Whether a program already written (<tried>) has this design and exactly this config."""
    return any(
        m.family == family and m.design == design.name and _identical(config, _coerce(space, m.config, {}))
        for m in ctx.tried
    )


def design_forbidden(ctx: WriterContext, family: str, design: str) -> bool:
    """A rule forbids every config of the design (it names the design and no KEY=VALUE pair)."""
    return any(r.forbids(family, design, {}, ctx.kept_torch) and not r.pairs for r in ctx.rules)


def rules_allow(ctx: WriterContext, family: str, design: str, config: dict[str, Any]) -> bool:
    """No rule forbids the design, nor this config of it: the check every family's choices pass."""
    return not design_forbidden(ctx, family, design) and not forbidden(ctx, family, design, config)


DUAL_DESIGNS = ("dual", "dual_persistent")


def fuse_allowed(ctx: WriterContext) -> bool:
    """Whether matmuls sharing A are merged into one dual kernel in this program.

    Both forms are in the search space and the search measures them: on an H200 (strict fp32, SwiGLU
    4096x4096 -> 2x8192) the two products as separate 128x128 tf32x3 kernels ran 6.98 ms, the best dual
    kernel 7.45 ms (its two accumulators need a smaller tile), torch.compile 10.94 ms. So the root starts
    unfused; a small step or repair keeps the parent's form; a large step switches form (from the root,
    to the form none of the listed designs has yet). Never when rules forbid every dual design."""
    if all(design_forbidden(ctx, "matmul", d) for d in DUAL_DESIGNS):
        return False
    parent = ctx.parent
    parent_dual = parent is not None and parent.family == "matmul" and parent.design in DUAL_DESIGNS
    if ctx.kind != "large_step":
        return parent_dual
    if parent is not None and parent.family == "matmul":
        return not parent_dual
    listed_dual = any(m.family == "matmul" and m.design in DUAL_DESIGNS for m in ctx.listed)
    listed_single = any(m.family == "matmul" and m.design not in DUAL_DESIGNS for m in ctx.listed)
    return listed_single and not listed_dual


def _coerce(
    space: dict[str, tuple[Any, ...]], values: dict[str, Any], base: dict[str, Any]
) -> dict[str, Any]:
    """`base` with the keys of `values` that name a value in the space (compared as text)."""
    out = dict(base)
    for k, v in values.items():
        if k not in space:
            continue
        for option in space[k]:
            if norm_value(option) == norm_value(v):
                out[k] = option
                break
    return out


def _allowed_config(ctx: WriterContext, info: KernelInfo, design: Design, start: dict[str, Any],
                    avoid: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:  # fmt: skip
    """`start` if allowed, else the nearest allowed config (one, then two knobs away)."""
    space = config_space(design, info, ctx.tf32)
    avoid = avoid or []

    def ok(c: dict[str, Any]) -> bool:
        return admissible(ctx, info, design, c) and all(not same_kernel(design, c, a) for a in avoid)

    if ok(start):
        return start
    frontier = [start]
    for _ in range(3):
        nxt = []
        for c in frontier:
            for n in neighbours(space, c, ctx.rng):
                if ok(n):
                    return n
                nxt.append(n)
        frontier = nxt[:64]
    return None


def same_kernel(design: Design, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two configs of `design` that write the same kernel: equal on every knob, a knob one of them does
    not name being at the generator's default (a header names only the knobs its writer set)."""
    defaults = make_config(design, {})
    return all(
        norm_value(a.get(k, getattr(defaults, k, None))) == norm_value(b.get(k, getattr(defaults, k, None)))
        for k in set(a) | set(b)
    )


def _identical(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same keys with the same values (compared as text): a key only one of them names differs."""
    return all(norm_value(a.get(k)) == norm_value(b.get(k)) for k in set(a) | set(b))


def neighbours(
    space: dict[str, tuple[Any, ...]], config: dict[str, Any], rng: random.Random
) -> list[dict[str, Any]]:
    """Configs one knob one step away, in a seed-dependent order."""
    out = []
    keys = [k for k in space if len(space[k]) > 1]
    rng.shuffle(keys)
    for k in keys:
        opts = list(space[k])
        cur = config.get(k)
        idx = next((i for i, o in enumerate(opts) if norm_value(o) == norm_value(cur)), None)
        steps = [1, -1] if rng.random() < 0.5 else [-1, 1]
        for s in steps:
            j = (idx if idx is not None else 0) + s
            if 0 <= j < len(opts) and (idx is None or j != idx):
                c = dict(config)
                c[k] = opts[j]
                out.append(c)
    return out


def _shift(
    space: dict[str, tuple[Any, ...]], config: dict[str, Any], keys: tuple[str, ...], step: int
) -> dict[str, Any]:
    c = dict(config)
    for k in keys:
        if k not in space or k not in c:
            continue
        opts = list(space[k])
        idx = next((i for i, o in enumerate(opts) if norm_value(o) == norm_value(c[k])), None)
        if idx is None:
            continue
        j = min(max(idx + step, 0), len(opts) - 1)
        if k == "num_warps" and opts[j] == 0:
            continue
        c[k] = opts[j]
    return c


def ranked_cases(ctx: WriterContext, cases: list[PromptCase]) -> list[PromptCase]:
    """Good cases to start from, best first: near ones (tasks.similarity) before far ones, then same
    hardware first, then the most similar, then the fastest. A case with no readable task line ranks as
    near when the task's own signature is unknown too (an LLM-style prompt), else after the near ones."""

    def key(c: PromptCase) -> tuple[bool, bool, float, float]:
        sim = ctx.similarity(c)
        return (not ctx.near(c), not c.same_hardware, -(sim if sim is not None else 0.0), -(c.speedup or 0.0))

    return sorted(cases, key=key)


_FIRST_KERNEL_PARENT = 1.02
"""Where a case does not say whether its ratio is to the reference: a lost case whose parent's speedup
(speedup / step ratio, both shown rounded) is at most this had the reference for its parent, it was its
task's first kernel."""


def _start_from(c: PromptCase) -> bool:
    """A case worth starting from: a win over its parent, or a task's first kernel at least as fast as the
    reference (a root at 1.00x is labelled "tie" or "ineffective", and may still be the best kernel known
    for its task). A step that tied or lost to a kernel is not: that kernel, its parent, was as fast or
    faster and is a case too."""
    if c.good:
        return True
    if not ((_lost(c) or _tie(c)) and c.speedup is not None and c.speedup >= 1.0):
        return False
    if c.first_kernel is not None:
        return c.first_kernel
    parent = c.parent_speedup
    return parent is None or parent <= _FIRST_KERNEL_PARENT


def _other_ops(ctx: WriterContext, info: KernelInfo, case: PromptCase) -> bool:
    """The case's task computes other ops of this kernel's family than this task (a mean where this
    task has a logsumexp), as far as both signatures name them."""
    if ctx.signature is None or case.signature is None:
        return False
    mine = family_ops(ctx.signature.ops, info.family)
    theirs = family_ops(case.signature.ops, info.family)
    return bool(mine and theirs and not mine & theirs)


def _case_pick(ctx: WriterContext, info: KernelInfo, options: list[Design]) -> Choice | None:
    """The design and config of the nearest, then fastest, case worth starting from on this hardware: a
    speed learned on another target is not advice here (its cases are shown for what compiles and is
    correct). A case of other ops of the kernel's family may advise a config of the default design, not
    replace the default design."""
    good = ranked_cases(
        ctx,
        [
            c
            for c in ctx.cases
            if _start_from(c) and c.same_hardware and c.meta and c.meta.family == info.family
        ],
    )
    default = default_design(info).name
    for case in good:
        assert case.meta is not None
        d = next((x for x in options if x.name == case.meta.design), None)
        if d is None:
            continue
        if d.name != default and _other_ops(ctx, info, case):
            # A design that won for other ops says nothing against this task's default, which may be
            # one the other task could not use (online softmax-style passes for a logsumexp, not a mean).
            continue
        base = default_config(d, info, ctx.tf32)
        derived = task_derived_keys(d)
        advice = {k: v for k, v in case.meta.config.items() if k not in derived}
        cfg = _coerce(config_space(d, info, ctx.tf32), advice, base)
        # Only what failed or lost on a task at least as near as this case's overrides it.
        avoid = _bad_configs(ctx, info, d, at_least=ctx.similarity(case), won=cfg)
        cfg2 = _allowed_config(ctx, info, d, cfg, avoid)
        if cfg2 is not None:
            speed = f"{case.speedup:.2f}x" if case.speedup else "a win"
            sim = ctx.similarity(case)
            how = f"similarity {sim:.2f}" if sim is not None else "similarity unknown"
            return Choice(d, cfg2, f"experience: {d.name} gave {speed} on a {info.family} task ({how})")
    return None


def _lost(c: PromptCase) -> bool:
    """A correct case slower than its parent, on this hardware (outcome "ineffective"; "negative", a
    clear loss, is already bad)."""
    return c.outcome.lower() == "ineffective" and c.same_hardware


def _tie(c: PromptCase) -> bool:
    """A correct case within the judge's noise of its parent, on this hardware (outcome "tie"): neither
    advice to start from nor a config to avoid."""
    return c.outcome.lower() == "tie" and c.same_hardware


def _failed(c: PromptCase) -> bool:
    """A case whose program did not run correctly (not merely slower: "negative" is a clear loss)."""
    return c.bad and "negative" not in c.outcome.lower()


def _bad_configs(
    ctx: WriterContext,
    info: KernelInfo,
    d: Design,
    at_least: float | None = None,
    won: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Configs of `d` that failed, or lost to their parent on this hardware, on near tasks (with
    `at_least`, on tasks at least that similar): not written again. A loss of `won` itself (a config
    started from because it won, or was the fastest known, on a task at least as near) does not count
    against it: a root a little slower than eager is "ineffective" and still the best kernel its task has; a
    failure does."""
    out = []
    space, base = config_space(d, info, ctx.tf32), default_config(d, info, ctx.tf32)
    for c in ctx.cases:
        sim = ctx.similarity(c)
        if (
            (c.bad or _lost(c))
            and not (
                won is not None
                and not _failed(c)
                and c.meta
                and same_kernel(d, _coerce(space, c.meta.config, base), won)
            )
            and ctx.near(c)
            and (at_least is None or sim is None or sim >= at_least)
            and c.meta
            and c.meta.family == info.family
            and c.meta.design == d.name
            and c.meta.config
        ):
            # read as the writer reads a case it starts from: its knobs over the design's defaults
            out.append(_coerce(space, c.meta.config, base))
    return out


def _design_score(ctx: WriterContext, info: KernelInfo, d: Design) -> int:
    """Negative for designs that only ever failed in the experience shown on near tasks."""
    cases = [
        c
        for c in ctx.cases
        if c.meta and c.meta.family == info.family and c.meta.design == d.name and ctx.near(c)
    ]
    if cases and all(c.bad for c in cases):
        return -1
    return 0


CLOSED_FOR_TASK = "on this task again"
"""How a rule line of a design closed for the task reads (nodes/prompts.closed_design_rule)."""


class DesignsClosed(ValueError):
    """Every design of the primary kernel is closed for the task: none is written again."""


def choose(ctx: WriterContext, info: KernelInfo, primary: bool) -> Choice:
    """The design and config for one kernel under the request and context."""
    options = [d for d in designs_for(info) if not design_forbidden(ctx, info.family, d.name)]
    closed = [r for r in ctx.rules if CLOSED_FOR_TASK in r.text and not r.pairs]
    if not options and primary and closed and all(any(r.forbids(info.family, d.name, {}) for r in closed)
                                                   for d in designs_for(info)):  # fmt: skip
        raise DesignsClosed(
            f"every {info.family} design it has was closed for this task by two identical failures"
        )
    if not options:
        options = designs_for(info)
    default = default_design(info)
    # Default design first, then the registry's order; designs that only ever failed go last, and before
    # them the ones the kind knows lose on this kernel (designs.last_resort).
    order = sorted(
        options,
        key=lambda d: (
            _design_score(ctx, info, d) < 0,
            d is not default and last_resort(d, info),
            d is not default,
            options.index(d),
        ),
    )
    if not primary:
        return _first_allowed(ctx, info, order, "default for this part")
    choice = choose_step(ctx, _KernelSteps(ctx, info, options, order))
    assert choice is not None  # a kernel's large step always chooses
    return choice


class _KernelSteps:
    """The steps of the policy (`choose_step`) for one primary kernel of the generic writer, over the
    designs that apply to it (`order`: the order they are tried in)."""

    def __init__(
        self, ctx: WriterContext, info: KernelInfo, options: list[Design], order: list[Design]
    ) -> None:
        self.info, self.order = info, order
        self.default = default_design(info)
        parent = ctx.parent if (ctx.parent and ctx.parent.family == info.family) else None
        parent_design = find_design(info.family, parent.design) if parent else None
        if parent_design is not None and parent_design not in options:
            parent_design = None
        self.parent, self.parent_design = parent, parent_design

    def repair(self, ctx: WriterContext) -> Choice | None:
        if self.parent_design is None or self.parent is None:
            return None
        return _repair(ctx, self.info, self.parent_design, self.parent, self.order)

    def small_step(self, ctx: WriterContext) -> Choice | None:
        info, parent, parent_design = self.info, self.parent, self.parent_design
        if parent_design is None or parent is None:
            d = self.default
            space = config_space(d, info, ctx.tf32)
            base = default_config(d, info, ctx.tf32)
            for n in neighbours(space, base, ctx.rng):
                if admissible(ctx, info, d, n):
                    return Choice(
                        d, n, f"small step (no readable parent): {d.name} one knob from its default"
                    )
            return None
        space = config_space(parent_design, info, ctx.tf32)
        base = _coerce(space, parent.config, default_config(parent_design, info, ctx.tf32))
        steps = neighbours(space, base, ctx.rng)
        prec = norm_value(base.get("PREC"))
        if prec in KMAJOR_PRECS and "KMAJOR" in space and norm_value(base.get("KMAJOR")) == "0":
            steps.insert(0, dict(base, KMAJOR=1))  # Hopper's TF32 MMAs read both operands K-major
        elif prec in ("ieee", "bf16x6", "tf32x3") and "PREC" in space:
            # Split-precision tensor-core dots keep fp32 accuracy and are often much faster than IEEE
            # ones; which of the two wins depends on the product (see kind_matmul). From IEEE dots: bf16
            # parts (either operand layout) first, then 3xTF32 with K-major operands (no copy where B
            # already is, as an nn.Linear weight); from either of the two, the other. BLOCK_K >= 32.
            alts = {"ieee": ("tf32x3", "bf16x6"), "bf16x6": ("tf32x3",), "tf32x3": ("bf16x6",)}[prec]
            for alt in alts:
                tc = dict(base, PREC=alt)
                if "KMAJOR" in space:
                    tc["KMAJOR"] = int(alt in KMAJOR_PRECS)
                if "BLOCK_K" in space and int(base.get("BLOCK_K") or 0) < 32:
                    tc["BLOCK_K"] = 32
                steps.insert(0, tc)
        effect = launch_effect(parent_design, info, base)
        for n in steps:
            if effect is not None and launch_effect(parent_design, info, n) == effect:
                continue  # the same kernel launched the same way: nothing new to measure
            # a knob the parent's header does not name (a newer one) counts as moved when set
            if (
                admissible(ctx, info, parent_design, n)
                and not _identical(n, base)
                and not was_tried(ctx, info.family, parent_design, space, n)
            ):
                moved = ", ".join(f"{k}={n[k]}" for k in n if norm_value(n[k]) != norm_value(base.get(k)))
                return Choice(parent_design, n, f"small step from the parent's {parent_design.name}: {moved}")
        return _first_allowed(ctx, info, self.order, "no neighbouring config is allowed; another design")

    def large_step(self, ctx: WriterContext, asked: bool) -> Choice:
        """A design other than the parent's and the ones shown (also a first program, and a step the
        request's kind has no parent for)."""
        info, order, parent, parent_design = self.info, self.order, self.parent, self.parent_design
        shown = {m.design for m in ctx.listed + ctx.tried if m.family == info.family}
        exclude = shown | ({parent_design.name} if parent_design else set())
        fresh = [d for d in order if d.name not in exclude]
        if asked or parent_design is None:
            picked = _case_pick(ctx, info, fresh)
            if picked is not None:
                return picked
        if not fresh:
            fresh = [d for d in order if parent_design is None or d.name != parent_design.name]
            # Every design has been written: a config of one that has not been, nearest its default.
            for d in fresh:
                space = config_space(d, info, ctx.tf32)
                base = default_config(d, info, ctx.tf32)
                written = [
                    _coerce(space, m.config, base)
                    for m in ctx.tried
                    if m.family == info.family and m.design == d.name
                ]
                if not written:
                    continue
                cfg = _allowed_config(ctx, info, d, base, written)
                if cfg is not None:
                    return Choice(
                        d, cfg, f"every design written already: {d.name} at a config not written yet"
                    )
        if fresh:
            why = (
                f"a different design than the parent's {parent_design.name}"
                if parent_design
                else "default design"
            )
            return _first_allowed(ctx, info, fresh, why)
        # Only the parent's design applies: a far config of it.
        assert parent_design is not None and parent is not None
        space = config_space(parent_design, info, ctx.tf32)
        base = _coerce(space, parent.config, default_config(parent_design, info, ctx.tf32))
        far = _shift(space, base, tuple(space), 2 if ctx.rng.random() < 0.5 else -2)
        cfg = _allowed_config(ctx, info, parent_design, far, [base]) or base
        return Choice(parent_design, cfg, f"only {parent_design.name} applies: a distant config")


def _first_allowed(ctx: WriterContext, info: KernelInfo, order: list[Design], why: str) -> Choice:
    for d in order:
        cfg = _allowed_config(ctx, info, d, default_config(d, info, ctx.tf32), _bad_configs(ctx, info, d))
        if cfg is not None:
            return Choice(d, cfg, why)
    d = order[0]
    return Choice(d, default_config(d, info, ctx.tf32), f"{why} (every config is forbidden by a rule)")


_SIZE_KEYS = ("BLOCK", "BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_R", "BLOCK_I", "TILE", "RMAX", "num_stages")


def _repair(
    ctx: WriterContext, info: KernelInfo, d: Design, parent: KernelHeader, order: list[Design]
) -> Choice:
    kind = error_kind(ctx.feedback)
    space = config_space(d, info, ctx.tf32)
    base = _coerce(space, parent.config, default_config(d, info, ctx.tf32))
    if kind == "compile_error" or resources_error(ctx.feedback):
        smaller = _shift(space, base, _SIZE_KEYS, -1)
        if "num_warps" in smaller and smaller.get("num_warps") not in (0,):
            smaller = _shift(space, smaller, ("num_warps",), -1)
        cfg = _allowed_config(ctx, info, d, smaller, [base])
        if cfg is not None and not same_kernel(d, cfg, base):
            return Choice(
                d, cfg, f"repair ({kind or 'resources'}): smaller blocks and fewer stages for {d.name}"
            )
    if kind == "timeout":
        larger = _shift(space, base, ("BLOCK", "BLOCK_M", "BLOCK_N", "BLOCK_R", "TILE", "BLOCK_I"), 1)
        cfg = _allowed_config(ctx, info, d, larger, [base])
        if cfg is not None and not same_kernel(d, cfg, base):
            return Choice(d, cfg, f"repair (timeout): fewer, larger blocks for {d.name}")
    if kind == "mismatch":
        if "PREC" in base and norm_value(base["PREC"]) != "ieee":
            strict = dict(base, PREC="ieee")
            if not forbidden(ctx, info.family, d.name, strict):
                return Choice(d, strict, "repair (mismatch): strict IEEE fp32 tl.dot")
        if d.mode in ("online", "split"):
            two_pass = next((x for x in order if x.mode in ("looped", "registers")), None)
            if two_pass is not None:
                return _first_allowed(ctx, info, [two_pass], "repair (mismatch): two-pass statistics")
    simplest = KINDS[info.kind].simplest_mode
    alt = [x for x in order if x.mode == simplest] + [x for x in order if x.mode != simplest]
    return _first_allowed(
        ctx, info, alt, f"repair ({kind or 'unknown error'}): the simplest known-good design"
    )
