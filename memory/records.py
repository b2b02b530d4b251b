"""The typed records memory keeps: cases (one per attempt), rules (validity rules), rule exposures.

Every record has a `schema_version` and ignores unknown keys when loaded, so memory written by a newer
or older version still loads. Records travel as JSON (`to_json` / `from_dict`); the store keeps that
JSON whole and adds flat, scalar filter fields beside it (Chroma metadata takes only scalars).

Also here: the outcome label of an attempt from its step ratio (KOPE) and the normalisation of error
messages into signatures that rule merging compares. A case's header fields come from
`providers.protocol.KernelHeader`, the one reader of the `# kernelwright:` line.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kernelwright.hardware.result import EvalResult, Versions
from kernelwright.providers.protocol import KernelHeader
from kernelwright.tasks.task import TaskSignature

CASE_SCHEMA = 1
RULE_SCHEMA = 1
EXPOSURE_SCHEMA = 1

Outcome = Literal["effective", "partial", "tie", "unmeasured", "ineffective", "negative", "failed"]
"""Label of an attempt by its step ratio r = speedup / parent speedup (KOPE): effective r >= 1.05,
partial 1 <= r < 1.05, ineffective 0.85 <= r < 1, negative r < 0.85, failed = not correct.
`tie`: within the judge's noise of its parent, neither a win nor a loss: 1/TIE_R < r < TIE_R, or r's
interval (the two speedups' 95% intervals) holds 1 while r is below EFFECTIVE_R.
`unmeasured`: correct, but no meaningful timing (e.g. the CPU interpreter), so r is unknown."""

OUTCOMES: tuple[str, ...] = ("effective", "partial", "tie", "unmeasured", "ineffective", "negative", "failed")
OUTCOME_RANK = {o: i for i, o in enumerate(OUTCOMES)}
"""Retrieval order: lower is better. An unmeasured correct kernel ranks above a measured slowdown."""

EFFECTIVE_R = 1.05
NEGATIVE_R = 0.85
TIE_R = 1.02
"""Steps closer than 2% to their parent are ties. The same program judged in two evaluations of one session
differs by up to ~1% on an H200 (0.2273 / 0.2255 ms, benchmarks/RESULTS.md, twenty-second session), more
across machines; a 0.7% "win" (a 1-D pooling's BLOCK=256) was once carried to every later pooling task
and cost 2-D max pooling 25%."""
DOWNSTREAM_SELF = 0.5
DOWNSTREAM_CHILDREN = 0.35
"""d(v) = 0.5 r_v + 0.35 * sum of d over v's children (KOPE's downstream score)."""

MAX_EXCERPT = 300
MAX_EVIDENCE = 8


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def text_key(text: str) -> str:
    """What two rule texts that say the same thing word for word share: a hash of the text with its
    spacing, letter case and final full stop ignored (a judge is never asked whether "X" and "X" agree)."""
    norm = " ".join((text or "").split()).rstrip(" .").casefold()
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:16]


def code_key(code: str) -> str:
    """What two programs that are the same code share: a hash of the code with trailing spaces and blank
    lines ignored (the same kernel stored by several attempts is shown to a model once)."""
    lines = [ln.rstrip() for ln in (code or "").splitlines()]
    return hashlib.sha1("\n".join(ln for ln in lines if ln).encode("utf-8")).hexdigest()[:16]


class MemoryRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    def to_json(self) -> str:
        """Canonical JSON (sorted keys) so export -> import -> export is byte-identical."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Load a record, ignoring keys this version does not know."""
        return cls.model_validate(data)

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.model_validate(json.loads(text))


# --- outcome labels ----------------------------------------------------------------------------------


def ratio_to_reference(parent_speedup: float | None) -> bool:
    """Whether a step's ratio is taken to the reference (speedup 1): its parent had no speedup (a task's
    first kernel, or a parent that failed or was not timed)."""
    return parent_speedup is None or not parent_speedup > 0


def ratio_base(parent_speedup: float | None) -> float:
    """The speedup a step's ratio is taken to: its parent's, or the reference's 1.0 (ratio_to_reference)."""
    return 1.0 if parent_speedup is None or ratio_to_reference(parent_speedup) else parent_speedup


def step_ratio(correct: bool, speedup: float | None, parent_speedup: float | None) -> float | None:
    """r = speedup / parent speedup; the reference (speedup 1) stands in for a parent without one.

    0 for a failed attempt, None for a correct one without a meaningful speedup.
    """
    if not correct:
        return 0.0
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return None
    return speedup / ratio_base(parent_speedup)


def step_ratio_interval(
    speedup_ci: tuple[float, float] | None,
    parent_speedup: float | None,
    parent_speedup_ci: tuple[float, float] | None = None,
) -> tuple[float, float] | None:
    """The range of r that the two speedups' 95% intervals allow: (child low / parent high, child high /
    parent low). The parent's point speedup stands in for an interval it does not have, and the
    reference (speedup 1, exact) for a parent without a speedup. None without the child's interval."""
    if speedup_ci is None or not all(math.isfinite(x) and x > 0 for x in speedup_ci):
        return None
    if parent_speedup_ci is not None and all(math.isfinite(x) and x > 0 for x in parent_speedup_ci):
        p_lo, p_hi = min(parent_speedup_ci), max(parent_speedup_ci)
    else:
        p_lo = p_hi = ratio_base(parent_speedup)
    return min(speedup_ci) / p_hi, max(speedup_ci) / p_lo


def outcome_label(correct: bool, r: float | None, r_interval: tuple[float, float] | None = None) -> Outcome:
    """The label of a step with ratio r (step_ratio) and, where the judge gave intervals, r's range
    (step_ratio_interval): a step within noise of its parent is a tie (TIE_R)."""
    if not correct:
        return "failed"
    if r is None:
        return "unmeasured"
    if 1.0 / TIE_R < r < TIE_R or (
        r_interval is not None and r_interval[0] <= 1.0 <= r_interval[1] and NEGATIVE_R <= r < EFFECTIVE_R
    ):
        return "tie"
    if r >= EFFECTIVE_R:
        return "effective"
    if r >= 1.0:
        return "partial"
    if r >= NEGATIVE_R:
        return "ineffective"
    return "negative"


def own_value(case: Case) -> float:
    """r_v in the downstream score: the step ratio, 1 (neutral) when unmeasured, 0 when failed."""
    if not case.correct:
        return 0.0
    return case.step_ratio if case.step_ratio is not None else 1.0


def timing_confidence(result: EvalResult | None) -> float:
    """How much a case's speedup can be trusted, in (0, 1].

    1 for a meaningful timing with a tight confidence interval; lower as the interval widens; 0.5 when
    the timing is not meaningful (interpreter) or absent. Failed attempts get 1: their label is certain.
    """
    if result is None:
        return 0.5
    if not result.correct:
        return 1.0
    if not result.timing_meaningful or result.runtime_ms is None or result.runtime_ms <= 0:
        return 0.5
    if result.runtime_ci_ms is None:
        return 0.8
    lo, hi = result.runtime_ci_ms
    rel = max(0.0, (hi - lo) / result.runtime_ms)
    return max(0.1, min(1.0, 1.0 - rel))


def capability_str(cc: Any) -> str:
    """Compute capability as text: 90 -> "9.0", (9, 0) -> "9.0", "sm_90" -> "9.0"; "" when unknown."""
    if cc is None or cc == "":
        return ""
    if isinstance(cc, tuple | list) and len(cc) == 2:
        return f"{int(cc[0])}.{int(cc[1])}"
    if isinstance(cc, int):
        return f"{cc // 10}.{cc % 10}"
    s = str(cc).strip().lower().removeprefix("sm_")
    if s.isdigit():
        return f"{int(s) // 10}.{int(s) % 10}"
    return s


def major_minor(version: str | None) -> str:
    """'3.6.0' -> '3.6'; '' when unknown."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def installed_versions() -> Versions:
    """Installed torch/triton versions, read from package metadata (imports neither)."""
    return Versions.installed()


# --- cases -------------------------------------------------------------------------------------------


class Case(MemoryRecord):
    """One attempt: what was tried on which task and hardware, and what came of it."""

    schema_version: int = CASE_SCHEMA
    id: str = Field(default_factory=lambda: new_id("case"))
    run_id: str = ""
    task_name: str = ""
    signature: TaskSignature = Field(default_factory=TaskSignature)
    action: str = ""
    """large_step, small_step or repair (free text for other producers)."""
    idea: str = ""
    """What the attempt set out to do, in a sentence."""
    kernel_header: str = ""
    """The kernel's `# kernelwright:` line, verbatim."""
    family: str = ""
    design: str = ""
    config: dict[str, str] = Field(default_factory=dict)
    code: str = ""
    code_diff: str = ""
    """Optional unified diff to the parent's code."""
    feedback: str = ""
    """The evaluation feedback shown to the next step (error tail, mismatch report, timing)."""
    stage: str = ""
    error_kind: str | None = None
    correct: bool = False
    speedup: float | None = None
    """Speedup vs eager; None when not measured."""
    speedup_ci: tuple[float, float] | None = None
    """The judge's 95% interval of that speedup, where it gave one."""
    fraction_of_floor: float | None = None
    """The roofline floor's time over the kernel's measured time (1.0: at the floor); None when not timed.
    A whole-model run takes a kernel at or over its roofline stop from memory without searching again."""
    parent_speedup: float | None = None
    step_ratio: float | None = None
    outcome: Outcome = "failed"
    confidence: float = 1.0
    downstream: float = 0.0
    """d(v) = 0.5 r_v + 0.35 * sum d(children); kept current by the experience graph."""
    hardware: str = ""
    compute_capability: str = ""
    versions: Versions = Field(default_factory=Versions)
    parent_id: str | None = None
    rule_ids: list[str] = Field(default_factory=list)
    """Rules that were in the attempt's context."""
    created_at: float = Field(default_factory=time.time)

    @field_validator("compute_capability", mode="before")
    @classmethod
    def _cc(cls, v: Any) -> str:
        return capability_str(v)

    @classmethod
    def from_attempt(
        cls,
        *,
        signature: TaskSignature,
        code: str,
        result: EvalResult | None = None,
        correct: bool | None = None,
        speedup: float | None = None,
        parent: Case | None = None,
        parent_speedup: float | None = None,
        speedup_ci: tuple[float, float] | None = None,
        parent_speedup_ci: tuple[float, float] | None = None,
        fraction_of_floor: float | None = None,
        hardware: str = "",
        compute_capability: Any = None,
        versions: Versions | None = None,
        task_name: str = "",
        action: str = "",
        idea: str = "",
        feedback: str = "",
        run_id: str = "",
        rule_ids: list[str] | None = None,
        code_diff: str = "",
        confidence: float | None = None,
    ) -> Case:
        """Build a case from an attempt, computing r, the outcome label and confidence.

        `result` supplies correctness, speedup (vs eager) and its interval, stage, error and versions unless
        they are given explicitly. The parent's speedup and interval come from `parent` when it is given.
        """
        if correct is None:
            correct = bool(result.correct) if result is not None else False
        if speedup is None and result is not None and result.timing_meaningful:
            speedup = result.speedup_vs_eager
            speedup_ci = speedup_ci or result.speedup_vs_eager_ci
        if not correct or speedup is None:
            speedup, speedup_ci, fraction_of_floor = None, None, None
        if parent is not None and parent_speedup is None:
            parent_speedup, parent_speedup_ci = parent.speedup, parent_speedup_ci or parent.speedup_ci
        r = step_ratio(correct, speedup, parent_speedup)
        r_interval = step_ratio_interval(speedup_ci, parent_speedup, parent_speedup_ci)
        header = KernelHeader.parse(code) or KernelHeader()
        if versions is None:
            versions = result.versions if result is not None else Versions()
        if not feedback and result is not None:
            feedback = result.summary() if result.correct else (result.error or result.summary())
        case = cls(
            task_name=task_name,
            signature=signature,
            action=action,
            idea=idea,
            kernel_header=header.line,
            family=header.family,
            design=header.design,
            config=header.config,
            code=code,
            code_diff=code_diff,
            feedback=feedback,
            stage=result.stage if result is not None else "",
            error_kind=result.error_kind if result is not None and not correct else None,
            correct=correct,
            speedup=speedup,
            speedup_ci=speedup_ci,
            fraction_of_floor=fraction_of_floor,
            parent_speedup=parent_speedup,
            step_ratio=r,
            outcome=outcome_label(correct, r, r_interval),
            confidence=confidence if confidence is not None else timing_confidence(result),
            hardware=hardware or (result.target if result is not None else ""),
            compute_capability=compute_capability,
            versions=versions,
            parent_id=parent.id if parent is not None else None,
            rule_ids=list(rule_ids or []),
            run_id=run_id,
        )
        case.downstream = DOWNSTREAM_SELF * own_value(case)
        return case

    def embedding_text(self) -> str:
        """What similarity search compares: the task's shape of work, then the idea and design."""
        parts = [
            self.signature.key(),
            self.hardware,
            self.action,
            self.idea,
            f"family={self.family} design={self.design}" if (self.family or self.design) else "",
            " ".join(f"{k}={v}" for k, v in sorted(self.config.items())),
            self.error_kind or "",
            self.feedback[:200] if not self.correct else "",
        ]
        return " || ".join(p for p in parts if p)

    def summary(self) -> str:
        """One line for a person: "two_pass for softmax (09_softmax) on h100: effective, 1.80x"."""
        what = self.design or self.idea or self.action or "attempt"
        task = f" ({self.task_name})" if self.task_name else ""
        sp = f", {self.speedup:.2f}x" if self.speedup is not None else ""
        fams = "+".join(self.signature.op_families) or "?"
        return f"{what} for {fams}{task} on {self.hardware or '?'}: {self.outcome}{sp}"


# --- rules -------------------------------------------------------------------------------------------


class Evidence(MemoryRecord):
    """One failure that produced or confirmed a rule."""

    case_id: str | None = None
    error_kind: str | None = None
    excerpt: str = ""
    hardware: str = ""
    triton: str = ""
    at: float = Field(default_factory=time.time)


_RULE_PREFIX_RE = re.compile(r"^\s*(?:-\s*)?you\s+cannot\b", re.I)


def check_rule_text(text: str) -> str:
    """One line beginning "You cannot ..."; ValueError with a one-line reason otherwise."""
    line = " ".join((text or "").split())
    if not _RULE_PREFIX_RE.match(line):
        raise ValueError(f"a rule must be one sentence starting 'You cannot ...', got {line[:80]!r}")
    line = _RULE_PREFIX_RE.sub("You cannot", line, count=1)
    if len(line) < len("You cannot x"):
        raise ValueError("a rule must name the prohibited action after 'You cannot'")
    return line


_TARGET_LIMITS = re.compile(
    r"out of resources?|outofresources|shared memory|shared_mem|\bregisters?\b|hardware limit", re.I
)


LIMIT_EXCEEDED = re.compile(
    r"exceeds (?:the )?(?:shared memory|registers)|out of resources?|outofresources", re.I
)
"""How a compiler's resource report reads where a kernel does not fit its target (Rule.certain)."""


class Rule(MemoryRecord):
    """A validity rule: one sentence naming the smallest prohibited action, with its evidence."""

    schema_version: int = RULE_SCHEMA
    id: str = Field(default_factory=lambda: new_id("rule"))
    text: str
    error_signature: str = ""
    """Normalised form of the error that produced it (see `error_signature`)."""
    error_kinds: list[str] = Field(default_factory=list)
    op_families: list[str] = Field(default_factory=list)
    count: int = 1
    evidence: list[Evidence] = Field(default_factory=list)
    """The most recent few pieces of evidence (at most MAX_EVIDENCE)."""
    hardware: list[str] = Field(default_factory=list)
    triton_versions: list[str] = Field(default_factory=list)
    """major.minor of every Triton it was seen with."""
    torch_versions: list[str] = Field(default_factory=list)
    first_seen: float = Field(default_factory=time.time)
    last_seen: float = Field(default_factory=time.time)

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        return check_rule_text(v)

    @property
    def target_bound(self) -> bool:
        """Whether the rule is about the target's limits (shared memory, registers, resources): such a rule
        holds on the hardware it was seen on, not elsewhere (another GPU has other limits). Every other
        validity rule (a wrong result, a crash, a construct the compiler rejects) holds on any target of
        the same Triton version."""
        return bool(_TARGET_LIMITS.search(self._evidence_text()))

    @property
    def certain(self) -> bool:
        """Whether the evidence is a limit the compiler reported exceeded (shared memory, registers, out of
        resources): the same kernel on the same target and Triton exceeds it every time, so one sighting
        proves the rule, where a wrong result or a crash needs repeating to tell the kernel's fault from
        chance."""
        return bool(LIMIT_EXCEEDED.search(self._evidence_text()))

    def _evidence_text(self) -> str:
        return " ".join([self.error_signature, *(e.excerpt for e in self.evidence)])

    def embedding_text(self) -> str:
        return " || ".join(
            p
            for p in (self.text, " ".join(self.op_families), " ".join(self.error_kinds), self.error_signature)
            if p
        )


class RuleCandidate(BaseModel):
    """A new rule as the reflector proposes it, with the failure it came from."""

    model_config = ConfigDict(extra="ignore")

    text: str
    error_kind: str | None = None
    error: str = ""
    """The error message (tail) of the failed attempt."""
    case_id: str | None = None
    op_families: list[str] = Field(default_factory=list)
    hardware: str = ""
    versions: Versions = Field(default_factory=Versions)

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        return check_rule_text(v)


class Exposure(MemoryRecord):
    """One attempt's exposure to rules: which rules were in its context and whether it failed."""

    schema_version: int = EXPOSURE_SCHEMA
    id: str = Field(default_factory=lambda: new_id("exp"))
    rule_ids: list[str] = Field(default_factory=list)
    failed: bool
    op_families: list[str] = Field(default_factory=list)
    hardware: str = ""
    case_id: str | None = None
    run_id: str = ""
    at: float = Field(default_factory=time.time)


# --- error signatures --------------------------------------------------------------------------------

_ERROR_LINE_RE = re.compile(r"\b[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b")
_NORMALISERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"file \"[^\"]*\"(, line \d+)?", re.I), "file"),
    (re.compile(r"(?:[a-z]:)?(?:[\\/][\w.@+-]+){2,}[\\/]?", re.I), "<path>"),
    (re.compile(r"0x[0-9a-f]+", re.I), "<hex>"),
    (re.compile(r"'[\w.]{1,60}'|\"[\w.]{1,60}\"|`[\w.]{1,60}`"), "<q>"),
    (re.compile(r"\b[a-z_]+\d+[a-z0-9_]*\b", re.I), "<id>"),
    (re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), "<n>"),
    (re.compile(r"[\^~]+"), " "),
    (re.compile(r"\s+"), " "),
]


def error_signature(error_kind: str | None, error: str | None) -> str:
    """A normalised error: the exception lines of the message with paths, hex, numbers, quoted names and
    numbered identifiers replaced by placeholders, prefixed by the error kind.

    Two failures with the same cause but different shapes, files or variable names get the same
    signature; that is what rule merging compares when no LLM judge is configured.
    """
    lines = [ln.strip() for ln in (error or "").splitlines() if ln.strip()]
    picked = [ln for ln in lines if _ERROR_LINE_RE.search(ln)]
    text = " ".join((picked or lines)[-2:])
    for pat, rep in _NORMALISERS:
        text = pat.sub(rep, text)
    text = text.strip().lower()[:400]
    return f"{error_kind or 'error'}: {text}" if text else (error_kind or "")
