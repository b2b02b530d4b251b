"""The active context manager: builds the coder's prompt under a token budget, as a pure function.

`build_context(...)` assembles the sections of providers/protocol.py in three tiers:

- hot (always): the request, the task source, the target facts, the parent kernel and its latest
  feedback (the feedback is cut to its tail when it exceeds its cap);
- warm: the representative designs of a large step; validity rules at or over the injection threshold
  that apply to this task, hardware and toolchain; ranked cases of similar tasks on this hardware;
- cold: cases from other hardware (shown for what compiles and is correct, not for speed) and short
  Triton notes (memory/docs.py).

Each warm and cold kind has its own cap, and everything fits the total budget: optional items are
added best first while they fit, and what does not fit is recorded as cut, with the reason. Rules are
not optional: within their cap they go in even where the hot tier alone fills the budget (the prompt
is then over it by the hot tier and the rules, never by anything else). The result
says what was injected and cut, with token counts, for the graph state and the run report.

The words of every section (request, answer format, precision line, how a rule, a case and a cut design
read) are nodes/prompts.py's; this module decides what goes in.

Tokens are counted by nodes/tokens.py (tiktoken where its encoding is cached, else a documented estimate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from kernelwright.hardware.result import Versions
from kernelwright.memory import Memory
from kernelwright.memory.docs import select_docs
from kernelwright.memory.records import Case, capability_str, code_key
from kernelwright.nodes.prompts import (
    case_text,
    design_outline,
    doc_line,
    fmt_speedup,
    precision_line,
    render_request,
    rule_line,
    tagged,
)
from kernelwright.nodes.records import ContextItem, ContextRecord
from kernelwright.nodes.tokens import CHARS_PER_TOKEN, default_counter
from kernelwright.providers.protocol import REQUEST_KINDS, header_line, render_section
from kernelwright.tasks.task import Task

# --- records -----------------------------------------------------------------------------------------


class TierCaps(BaseModel):
    """Token caps per kind of context, and item limits. The hot tier has no cap except `feedback`."""

    feedback: int = 700
    designs: int = 2400
    rules: int = 600
    cases: int = 2400
    cross_cases: int = 700
    docs: int = 450
    max_designs: int = 3
    max_tried: int = 16
    """Headers of programs already written, shown to small and large steps (the newest)."""
    max_rules: int = 12
    max_cases: int = 3
    max_cross_cases: int = 2
    max_docs: int = 3
    case_code_chars: int = 1800
    """A case's code is cut to this many characters (its metadata line is always kept)."""
    min_case_similarity: float = 0.2


class ContextBundle(BaseModel):
    """The rendered prompt and the record of what went in and what was cut."""

    prompt: str
    injected: list[ContextItem] = Field(default_factory=list)
    cut: list[ContextItem] = Field(default_factory=list)
    tokens_used: int = 0
    budget: int = 0
    token_counter: str = ""
    over_budget: bool = False
    """True only when the hot tier alone exceeds the budget (it is never cut)."""
    tier_tokens: dict[str, int] = Field(default_factory=dict)

    @property
    def rule_ids(self) -> list[str]:
        return [i.id for i in self.injected if i.kind == "rule" and i.id]

    @property
    def case_ids(self) -> list[str]:
        return [i.id for i in self.injected if i.kind == "case" and i.id]

    def record(self) -> ContextRecord:
        """The form the graph state and report keep."""
        return ContextRecord(
            tokens_used=self.tokens_used, budget=self.budget, injected=self.injected, cut=self.cut
        )


# --- rendering ---------------------------------------------------------------------------------------


def target_facts(target: Mapping[str, Any] | BaseModel | Any | None) -> tuple[str, str, str]:
    """(rendered facts, hardware name, compute capability) from a Target-like object or a mapping."""
    if target is None:
        return "", "", ""
    if isinstance(target, Mapping):
        data = dict(target)
        summary = ""
    else:
        describe = getattr(target, "summary", None)
        summary = str(describe()) if callable(describe) else ""
        data = target.model_dump() if isinstance(target, BaseModel) else dict(vars(target))
    name = str(data.get("name") or "")
    cc = capability_str(data.get("compute_capability"))
    lines = [summary] if summary else []
    for key in ("name", "arch", "compute_capability", "sm_count", "memory_bandwidth_gbs", "device"):
        if key in data and data[key] not in (None, "", 0):
            lines.append(f"{key}: {data[key]}")
    if not summary:
        skip = {"name", "arch", "compute_capability", "sm_count", "memory_bandwidth_gbs", "device"}
        for key, val in data.items():
            if key not in skip and isinstance(val, str | int | float) and val not in ("", None):
                lines.append(f"{key}: {val}")
    return "\n".join(lines), name, cc


def _design_parts(design: Any, index: int) -> tuple[str, str, float | None]:
    """(id, code, speedup) of a design given as code text, a mapping, or an object with .code."""
    if isinstance(design, str):
        return f"design-{index}", design, None
    if isinstance(design, Mapping):
        return (
            str(design.get("node_id") or design.get("id") or f"design-{index}"),
            str(design.get("code", "")),
            design.get("speedup"),
        )
    return (
        str(getattr(design, "node_id", None) or getattr(design, "id", None) or f"design-{index}"),
        str(getattr(design, "code", "")),
        getattr(design, "speedup", None),
    )


# --- building ----------------------------------------------------------------------------------------


class _Candidate(BaseModel):
    """An optional piece of context waiting for room."""

    kind: str
    id: str
    tier: str
    cap_key: str
    text: str
    summary: str
    tokens: int = 0
    short: str | None = None
    """A shorter form to inject when the full text does not fit (e.g. a design's header line only)."""
    why: str = ""
    """Why it was chosen (the report's "why" column): a rule's count and relevance, a case's match."""


Hot = list[tuple[str, str, str]]
"""The hot tier: (kind, section text, summary) per section, in protocol order."""


def build_context(
    task: Task,
    request_kind: str = "large_step",
    *,
    request_text: str | None = None,
    parent_code: str | None = None,
    feedback: str | None = None,
    error_kind: str | None = None,
    target: Mapping[str, Any] | BaseModel | Any | None = None,
    hardware: str | None = None,
    versions: Versions | None = None,
    memory: Memory | None = None,
    designs: Sequence[Any] = (),
    tried: Sequence[str] = (),
    budget: int = 8000,
    caps: TierCaps | None = None,
    exclude_case_ids: Iterable[str] = (),
    counter: Callable[[str], int] | None = None,
    precision: str | None = None,
    rules: bool = True,
) -> ContextBundle:
    """Build the coder's context for one step; see the module docstring.

    `target` is a hardware Target (anything with .name/.compute_capability/.summary()) or a mapping of
    facts; `hardware` overrides its name for memory lookups. `versions` (toolchain) selects the rules
    that apply. `memory` None builds from the hot tier, designs and docs only. `precision` ("strict",
    "tf32" or "reduced": graphs.context.Context.precision) adds a `precision:` line to <target> saying
    which fp32 dot/conv precisions a kernel may use. `rules` False leaves the rule book out (cases stay).
    `request_text` replaces the kind's own request (nodes/prompts.py REQUEST_TEXT).
    """
    if request_kind not in REQUEST_KINDS:
        raise ValueError(f"unknown request kind {request_kind!r}; known: {', '.join(REQUEST_KINDS)}")
    if budget <= 0:
        raise ValueError(f"token budget must be positive, got {budget}")
    caps = caps or TierCaps()
    count = counter or default_counter()
    facts, target_name, _cc = target_facts(target)
    if precision:
        facts = "\n".join(x for x in (facts, precision_line(precision)) if x)
    hw = hardware or target_name
    fams = list(task.signature.op_families)
    cut: list[ContextItem] = []

    hot = _hot_tier(
        task, request_kind, request_text, facts, hw, parent_code, feedback, tried, caps, count, cut
    )
    injected = [
        ContextItem(kind=kind, tier="hot", tokens=count(text), text=summary) for kind, text, summary in hot
    ]
    hot_tokens = sum(i.tokens for i in injected)

    # Warm and cold candidates, best first within each kind.
    query = task.signature.key()
    fb_tail = (feedback or "")[-400:]
    cands = _design_candidates(designs if request_kind == "large_step" else [], caps)
    # A program goes into the prompt once: a case with a shown design's or the parent's code adds nothing.
    shown = {
        code_key(_design_parts(d, i)[1])
        for i, d in enumerate(designs if request_kind == "large_step" else [])
    }
    if parent_code:
        shown.add(code_key(parent_code))
    if memory is not None:
        if rules:
            cands += _rule_candidates(
                memory, f"{query} || {error_kind or ''} || {fb_tail}", fams, hw, versions, caps
            )
        cands += _experience_candidates(memory, task, fams, hw, list(exclude_case_ids), caps, shown)
    cands += _doc_candidates(f"{query} {error_kind or ''} {fb_tail}", [*fams, error_kind or ""], caps)

    chosen = _fit(cands, budget - hot_tokens, budget, caps, count, cut)
    prompt, total = _trim_to_budget(hot, chosen, hw, budget, count, cut)

    injected += [
        ContextItem(kind=c.kind, id=c.id, tier=c.tier, tokens=c.tokens, text=c.summary, reason=c.why)
        for c in chosen
    ]
    tiers: dict[str, int] = {}
    for item in injected:
        tiers[item.tier] = tiers.get(item.tier, 0) + item.tokens
    return ContextBundle(
        prompt=prompt,
        injected=injected,
        cut=cut,
        tokens_used=total,
        budget=budget,
        token_counter=getattr(count, "name", "custom"),
        over_budget=total > budget,
        tier_tokens=tiers,
    )


def _hot_tier(
    task: Task,
    kind: str,
    request_text: str | None,
    facts: str,
    hw: str,
    parent_code: str | None,
    feedback: str | None,
    tried: Sequence[str],
    caps: TierCaps,
    count: Callable[[str], int],
    cut: list[ContextItem],
) -> Hot:
    """Request, task, target, parent, feedback (cut to its cap) and tried: always in, never cut."""
    hot: Hot = [("request", render_request(kind, request_text), kind)]
    # The signature lets a writer rank experience by similarity to this task (tasks/similarity.py).
    task_section = render_section("task", task.source, name=task.name, signature=task.signature.key())
    hot.append(("task", task_section, task.name))
    if facts:
        hot.append(("target", render_section("target", facts), hw or "target"))
    if parent_code:
        hot.append(("parent", render_section("parent", parent_code), "parent kernel"))
    if feedback:
        fb = _capped_feedback(feedback.strip(), caps.feedback, count, cut)
        hot.append(("feedback", render_section("feedback", fb), (fb.splitlines() or [""])[0][:120]))
    if tried and kind in ("small_step", "large_step"):
        lines = list(dict.fromkeys(t.strip() for t in tried if t.strip()))[-caps.max_tried :]
        hot.append(
            ("tried", render_section("tried", "\n".join(lines)), f"{len(lines)} program(s) already written")
        )
    return hot


def _capped_feedback(fb: str, cap: int, count: Callable[[str], int], cut: list[ContextItem]) -> str:
    """The feedback within `cap` tokens: its first line (what failed) and as much of the tail (where the
    error is) as fits; the cut is recorded."""
    if count(fb) <= cap:
        return fb
    lines = fb.splitlines()
    keep_head = lines[0] if len(lines) > 1 else ""
    tail = fb[-int(cap * CHARS_PER_TOKEN) :]
    while tail and count(f"{keep_head}\n[...]\n{tail}") > cap:
        tail = tail[len(tail) // 8 or 1 :]
    cut.append(
        ContextItem(
            kind="feedback",
            tier="hot",
            tokens=count(fb) - count(tail),
            text="middle of the feedback",
            reason=f"feedback cap {cap}",
        )
    )
    return f"{keep_head}\n[...]\n{tail}" if keep_head else f"[...]\n{tail}"


def _design_candidates(designs: Sequence[Any], caps: TierCaps) -> list[_Candidate]:
    """The representative designs of a large step (each program once), each with its outline as the
    short form."""
    out: list[_Candidate] = []
    seen: set[str] = set()
    for i, design in enumerate(designs):
        did, code, speedup = _design_parts(design, i)
        if code_key(code) in seen:
            continue
        seen.add(code_key(code))
        if len(out) == caps.max_designs:
            break
        lines = code.strip().splitlines()
        header = next((ln for ln in lines[:3] if header_line(ln)), None)
        body = tagged("design", code, id=did, speedup=fmt_speedup(speedup))
        short = tagged("design", design_outline(header, len(lines)), id=did, speedup=fmt_speedup(speedup))
        out.append(
            _Candidate(
                kind="design",
                id=did,
                tier="warm",
                cap_key="designs",
                text=body,
                summary=did,
                short=short,
                why="a representative design for a large step",
            )
        )
    return out


def _rule_candidates(
    memory: Memory, query: str, fams: list[str], hw: str, versions: Versions | None, caps: TierCaps
) -> list[_Candidate]:
    """Rules at or over the injection threshold that apply to this task, hardware and toolchain."""
    relevant = memory.rules.relevant(
        query, op_families=fams, hardware=hw, versions=versions, k=caps.max_rules
    )
    return [
        _Candidate(
            kind="rule",
            id=rr.rule.id,
            tier="warm",
            cap_key="rules",
            text=rule_line(rr.rule.text),
            summary=rr.rule.text,
            why=_rule_why(
                rr.rule.count, rr.rule.certain, bool(set(fams) & set(rr.rule.op_families)), rr.similarity
            ),
        )
        for rr in relevant
    ]


def _rule_why(count: int, certain: bool, same_family: bool, similarity: float) -> str:
    seen = f"seen {count} time{'s' if count != 1 else ''}"
    if certain:
        seen += " (a limit the compiler reported: offered from its first sighting)"
    family = "; same op family" if same_family else ""
    return f"{seen}{family}; relevance {similarity:.2f}"


def _experience_candidates(
    memory: Memory,
    task: Task,
    fams: list[str],
    hw: str,
    excluded: list[str],
    caps: TierCaps,
    shown: set[str] | None = None,
) -> list[_Candidate]:
    """Ranked cases of similar tasks on this hardware (warm), then correct ones from other hardware (cold):
    each of a different program, and none of a program in `shown` (code keys of the designs and parent)."""
    shown = set(shown or ())
    same = memory.cases.search(
        task.signature,
        op_families=fams or None,
        hardware=hw or None,
        exclude_ids=excluded,
        min_similarity=caps.min_case_similarity,
        k=caps.max_cases,
        distinct=True,
        skip_codes=shown,
    )
    out = [
        _case_candidate(
            rc.case,
            hw,
            cross=False,
            tier="warm",
            cap_key="cases",
            caps=caps,
            task=task.name,
            similarity=rc.similarity,
        )
        for rc in same
    ]
    if hw and caps.max_cross_cases > 0:
        cross = memory.cases.search(
            task.signature,
            op_families=fams or None,
            hardware=hw,
            other_hardware=True,
            correct_only=True,
            exclude_ids=excluded,
            min_similarity=caps.min_case_similarity,
            k=caps.max_cross_cases,
            distinct=True,
            skip_codes=shown | {code_key(rc.case.code) for rc in same},
        )
        out += [
            _case_candidate(
                rc.case,
                hw,
                cross=True,
                tier="cold",
                cap_key="cross_cases",
                caps=caps,
                task=task.name,
                similarity=rc.similarity,
            )
            for rc in cross
        ]
    return out


def _case_candidate(
    case: Case,
    hw: str,
    *,
    cross: bool,
    tier: str,
    cap_key: str,
    caps: TierCaps,
    task: str = "",
    similarity: float | None = None,
) -> _Candidate:
    same = "unknown" if not hw else ("true" if case.hardware == hw else "false")
    text = tagged(
        "case",
        case_text(case, caps.case_code_chars, cross),
        id=case.id,
        outcome=case.outcome,
        speedup=fmt_speedup(case.speedup),
        hardware=case.hardware or "unknown",
        same_hardware=same,
    )
    which = "this task" if case.task_name and case.task_name == task else f"task {case.task_name or '?'}"
    where = (
        f"correct on {case.hardware or 'other hardware'} (shows what compiles there)"
        if cross
        else case.outcome
    )
    match = f"; match {similarity:.2f}" if similarity is not None else ""
    return _Candidate(
        kind="case",
        id=case.id,
        tier=tier,
        cap_key=cap_key,
        text=text,
        summary=case.summary(),
        why=f"{which}, {where}{match}",
    )


def _doc_candidates(query: str, tags: list[str], caps: TierCaps) -> list[_Candidate]:
    """Short Triton notes (memory/docs.py) for the task's families and the parent's error."""
    return [
        _Candidate(
            kind="doc",
            id=doc.id,
            tier="cold",
            cap_key="docs",
            text=doc_line(doc.title, doc.text),
            summary=doc.title,
            why="a Triton note for this task's operators or error",
        )
        for doc, _score in select_docs(query, tags=tags, k=caps.max_docs)
    ]


def _fit(
    cands: list[_Candidate],
    room: int,
    budget: int,
    caps: TierCaps,
    count: Callable[[str], int],
    cut: list[ContextItem],
) -> list[_Candidate]:
    """Candidates in order, each kind within its cap and all within `room` tokens; a design that does not
    fit whole goes in as its outline; what is left out is recorded in `cut` with the reason.

    Validity rules are the exception to `room`: within their own cap they go in even when the hot tier
    has already spent the budget, as they are orders, not hints (a 6,000-token SwiGLU parent once left
    no room, its small steps and repairs were written without the rule that forbade their buffers, and
    three candidates failed on it)."""
    used_by_cap: dict[str, int] = {}
    chosen: list[_Candidate] = []

    def misfit(c: _Candidate, cap: int) -> str:
        if used_by_cap.get(c.cap_key, 0) + c.tokens > cap:
            return f"{c.cap_key} cap {cap}"
        return f"budget {budget}" if c.tokens > room and c.kind != "rule" else ""

    for c in cands:
        c.tokens = count(c.text)
        cap = int(getattr(caps, c.cap_key))
        reason = misfit(c, cap)
        if reason and c.short is not None:
            # the outline still tells the writer which design this is; the cut record says so
            full_tokens, c.text, c.short = c.tokens, c.short, None
            c.tokens = count(c.text)
            if not misfit(c, cap):
                cut.append(
                    ContextItem(
                        kind=c.kind,
                        id=c.id,
                        tier=c.tier,
                        tokens=full_tokens - c.tokens,
                        text=f"{c.summary} (code; outline kept)",
                        reason=reason,
                    )
                )
                reason = ""
        if reason:
            cut.append(
                ContextItem(kind=c.kind, id=c.id, tier=c.tier, tokens=c.tokens, text=c.summary, reason=reason)
            )
            continue
        chosen.append(c)
        used_by_cap[c.cap_key] = used_by_cap.get(c.cap_key, 0) + c.tokens
        room -= c.tokens
    return chosen


def _trim_to_budget(
    hot: Hot,
    chosen: list[_Candidate],
    hw: str,
    budget: int,
    count: Callable[[str], int],
    cut: list[ContextItem],
) -> tuple[str, int]:
    """The assembled prompt and its tokens. Section wrappers cost tokens too: the least important chosen
    items are dropped (from the end of `chosen`, in place; never a rule, see `_fit`) until the whole
    fits or only rules are left."""
    prompt = _assemble(hot, chosen, hw)
    total = count(prompt)
    while total > budget and any(c.kind != "rule" for c in chosen):
        victim = chosen.pop(max(i for i, c in enumerate(chosen) if c.kind != "rule"))
        cut.append(
            ContextItem(
                kind=victim.kind,
                id=victim.id,
                tier=victim.tier,
                tokens=victim.tokens,
                text=victim.summary,
                reason=f"budget {budget} (section overhead)",
            )
        )
        prompt = _assemble(hot, chosen, hw)
        total = count(prompt)
    return prompt, total


def _assemble(hot: Hot, chosen: list[_Candidate], hw: str) -> str:
    """Sections in protocol order: request, task, target, parent, feedback, designs, rules, experience, docs."""
    parts = [text for _, text, _ in hot]
    designs = [c.text for c in chosen if c.kind == "design"]
    rules = [c.text for c in chosen if c.kind == "rule"]
    cases = [c.text for c in chosen if c.kind == "case"]
    docs = [c.text for c in chosen if c.kind == "doc"]
    if designs:
        parts.append(render_section("designs", "\n".join(designs)))
    if rules:
        parts.append(render_section("rules", "\n".join(rules)))
    if cases:
        attrs = {"hardware": hw} if hw else {}
        parts.append(render_section("experience", "\n".join(cases), **attrs))
    if docs:
        parts.append(render_section("docs", "\n".join(docs)))
    return "\n\n".join(parts) + "\n"
