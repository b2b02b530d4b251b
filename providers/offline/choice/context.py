"""What the prompt asks for and what the context teaches, read into a `WriterContext`.

From the prompt sections (providers/protocol.py) this module reads
- the request kind: large_step (a different design), small_step (a neighbouring config of the parent's
  design) or repair (a fix for the parent's error);
- the parent's design and config, from its first line `# kernelwright: family=.. design=.. config=..`;
- rules ("- You cannot ..."): a rule that names a design and/or KEY=VALUE pairs forbids every config
  that matches all of them (a rule naming only a design forbids the design); forbidden choices are
  never made. A rule learned from a program that kept an op in torch ("... beside torch's conv2d")
  applies only where the program being written keeps that op in torch too;
- experience cases (<case outcome=".." speedup=".." same_hardware="..">): on a large step the design and
  config that won on a task of the same family (same hardware preferred), or a task's first kernel at
  least as fast as the reference, is tried first (a tie with its parent is no win); design+config pairs
  of failed, negative or slower ("ineffective") cases are avoided;
- the target: whether TF32 is allowed for fp32 matmuls (`tf32_allowed`: a `precision: tf32` line, as
  the context builder writes under --allow-tf32, or words to that effect; `precision: strict` never),
  its SM count (`sm_count: N`, 132 when not named) and its shared memory per program (`smem/block N KiB`,
  227 when not named): a config whose kernel would not fit (designs.fits) is never written.

Reading is deterministic for a given prompt and seed (the context's `rng`); policy.py chooses from it.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any

from kernelwright.providers.offline.choice.designs import (
    DEFAULT_ARCH,
    DEFAULT_SM_COUNT,
    DEFAULT_SMEM_BYTES,
    DESIGN_NAMES,
    target_arch,
    target_sm_count,
    target_smem_bytes,
)
from kernelwright.providers.protocol import KernelHeader, Section, beside_torch_op
from kernelwright.tasks.similarity import NEAR, parse_case_line, parse_signature_key, signature_similarity
from kernelwright.tasks.task import TaskSignature

_PAIR_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([A-Za-z0-9_.+\-]+)")
_CASE_RE = re.compile(r"<case\b([^>]*)>(.*?)</case>", re.S)
_ATTR_RE = re.compile(r'([a-z_]+)="([^"]*)"')
_STEP_RATIO_RE = re.compile(r"^step ratio vs (parent|the reference):\s*([0-9.]+)\s*$", re.M)
ERROR_KINDS = ("static_check", "syntax_error", "import_error", "compile_error", "runtime_error", "shape_mismatch",
               "mismatch", "timeout", "crash", "harness_error")  # fmt: skip
_GOOD = ("effective", "partial")
_BAD = ("failed", "failure", "negative", "incorrect", "wrong", "error")


def parse_meta(text: str | None) -> KernelHeader | None:
    """The first header in `text` (providers.protocol.KernelHeader.find) when it names a family and a
    design, the two the policy chooses by; else None."""
    header = KernelHeader.find(text)
    return header if header is not None and header.family and header.design else None


@dataclass
class PromptRule:
    text: str
    design: str | None = None
    family: str | None = None
    pairs: dict[str, str] = field(default_factory=dict)
    mentions: list[str] = field(default_factory=list)
    beside: str | None = None
    """The torch op the failing program kept ("beside torch's conv2d"): the rule is about that kind of
    program (cuDNN + a fused epilogue), not about every kernel of its family and config."""

    def forbids(
        self, family: str, design: str, config: dict[str, Any], kept: frozenset[str] = frozenset()
    ) -> bool:
        if self.family and self.family != family:
            return False
        if self.beside and self.beside not in kept:
            return False
        names = [self.design] if self.design else []
        names += [d for d in self.mentions if d not in names]
        if names and design not in names:
            return False
        if not names and not self.pairs:
            return False
        for k, v in self.pairs.items():
            if k not in config or norm_value(config[k]) != norm_value(v):
                return False
        return True


def norm_value(v: Any) -> str:
    s = str(v).strip().lower()
    try:
        f = float(s)
        return str(int(f)) if f == int(f) else repr(f)
    except ValueError:
        return s


def parse_rules(body: str | None, config_keys: set[str]) -> list[PromptRule]:
    out: list[PromptRule] = []
    for line in (body or "").splitlines():
        line = line.strip()
        if not line.startswith(("-", "*")):
            continue
        text = line.lstrip("-* ").strip()
        norm = re.sub(r"split[- ]k\b", "split_k", text, flags=re.I)
        rule = PromptRule(text)
        rule.beside = beside_torch_op(norm)
        for k, v in _PAIR_RE.findall(norm.replace("config=", " ")):
            v = v.rstrip(".")  # a sentence's full stop is not part of the value ("... design=rows.")
            if k == "design":
                rule.design = v
            elif k == "family":
                rule.family = v
            elif k in config_keys or re.fullmatch(r"[A-Z][A-Z0-9_]*", k):
                # Any UPPER_CASE knob counts, so rules can name other families' config keys too.
                rule.pairs[k] = v
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", norm))
        rule.mentions = sorted(d for d in DESIGN_NAMES if d in words and d != rule.design)
        if rule.design or rule.pairs or rule.mentions:
            out.append(rule)
    return out


@dataclass
class PromptCase:
    outcome: str
    speedup: float | None
    same_hardware: bool
    meta: KernelHeader | None
    body: str
    signature: TaskSignature | None = None
    """The case's task, from its "task: NAME (families; in shapes; dtypes)" line."""
    step_ratio: float | None = None
    """Its speedup over its parent's ("step ratio vs parent" line) or over the reference's ("step ratio vs
    the reference": its task's first kernel), None when the case does not say."""
    first_kernel: bool | None = None
    """Whether its ratio is to the reference (a first kernel), as its step ratio line says; None without one."""

    @property
    def parent_speedup(self) -> float | None:
        """Its parent's speedup over the reference (1.0: the parent was the reference itself)."""
        if self.first_kernel:
            return 1.0
        if self.speedup is None or not self.step_ratio:
            return None
        return self.speedup / self.step_ratio

    @property
    def good(self) -> bool:
        return self.outcome.lower() in _GOOD and (self.speedup is None or self.speedup > 0)

    @property
    def bad(self) -> bool:
        return any(b in self.outcome.lower() for b in _BAD)


def parse_cases(body: str | None) -> list[PromptCase]:
    out = []
    for attrs, inner in _CASE_RE.findall(body or ""):
        a = dict(_ATTR_RE.findall(attrs))
        try:
            speedup = float(a["speedup"]) if a.get("speedup") not in (None, "", "None", "none") else None
        except ValueError:
            speedup = None
        # Only a case marked as from other hardware is; "unknown" (no target named) counts as this one.
        other = a.get("same_hardware", "").strip().lower() in ("false", "no", "0")
        ratio = _STEP_RATIO_RE.search(inner)
        out.append(PromptCase(a.get("outcome", ""), speedup, not other,
                        parse_meta(inner), inner, parse_case_line(inner),
                        float(ratio.group(2)) if ratio else None,
                        (ratio.group(1) == "the reference") if ratio else None))  # fmt: skip
    return out


def tf32_allowed(*texts: str | None) -> bool:
    t = " ".join(x for x in texts if x)
    if re.search(r"\b(no|not|without|disallow\w*|forbid\w*)\s+tf32", t, re.I):
        return False
    return bool(
        re.search(r"precision\s*[:=]\s*\"?(tf32|reduced)", t, re.I)
        or re.search(r"tf32\s+(is\s+)?(allowed|permitted|ok|enabled)", t, re.I)
        or re.search(r"allow[-_ ]?tf32", t, re.I)
    )


def error_kind(feedback: str | None) -> str | None:
    t = feedback or ""
    for kind in ERROR_KINDS:
        if re.search(rf"\b{kind}\b", t):
            return kind
    low = t.lower()
    if "out of resources" in low or "outofresources" in low:
        return "compile_error"
    if "timed out" in low or "timeout" in low:
        return "timeout"
    if "mismatch" in low or "not close" in low:
        return "mismatch"
    return None


def resources_error(feedback: str | None) -> bool:
    low = (feedback or "").lower()
    return any(
        w in low for w in ("out of resources", "outofresources", "shared memory", "registers", "too large")
    )


@dataclass
class WriterContext:
    kind: str = "large_step"
    parent: KernelHeader | None = None
    feedback: str = ""
    rules: list[PromptRule] = field(default_factory=list)
    cases: list[PromptCase] = field(default_factory=list)
    listed: list[KernelHeader] = field(default_factory=list)
    tried: list[KernelHeader] = field(default_factory=list)
    """Programs already written in the run (<tried>): a small step skips their configs, a large step
    their designs (while another design is left)."""
    tf32: bool = False
    sm_count: int = DEFAULT_SM_COUNT
    """The target's SM count (<target> `sm_count: N`); defaults decide how many programs fill the GPU."""
    smem_bytes: int = DEFAULT_SMEM_BYTES
    """The target's shared memory per program (<target> `smem/block N KiB`): configs beyond it are never
    written (designs.fits)."""
    arch: int = DEFAULT_ARCH
    """The target's compute capability (<target> `sm_90`): designs one architecture alone runs."""
    rng: random.Random = field(default_factory=random.Random)
    signature: TaskSignature | None = None
    """This task's signature (the <task> section's `signature` attribute), to rank cases by."""
    kept_torch: frozenset[str] = frozenset()
    """The ops the program being written keeps in torch (conv2d, ...): rules learned beside them apply."""

    def similarity(self, case: PromptCase) -> float | None:
        """How alike the case's task is to this one (tasks.similarity), or None when either is unknown."""
        if self.signature is None or case.signature is None:
            return None
        return signature_similarity(self.signature, case.signature)

    def near(self, case: PromptCase) -> bool:
        """A near case (similarity >= NEAR); when similarity is unknown every case counts as near."""
        sim = self.similarity(case)
        return sim is None or sim >= NEAR


_IDS = re.compile(r'\bid="[^"]*"|\b(?:case|rule|exp)-\S+')
"""Record ids in prompt text: `id="..."` attributes and case-/rule-/exp- names (random per run)."""
_MEASURED = re.compile(r"\d+\.\d+(?:[eE][-+]?\d+)?")
"""Decimal numbers in prompt text: measured times and speedups (configs and counts are integers)."""


def read_context(sections: dict[str, Section], seed: int, config_keys: set[str]) -> WriterContext:
    req = sections.get("request")
    kind = (req.attrs.get("kind") if req else None) or "large_step"
    if kind not in ("large_step", "small_step", "repair"):
        kind = "large_step"
    parent = sections.get("parent")
    fb = sections.get("feedback")
    designs = sections.get("designs")
    listed = (
        [m for m in (parse_meta(x) for x in re.split(r"<design\b", designs.body)) if m] if designs else []
    )
    tried = sections.get("tried")
    task = sections.get("task")
    signature = parse_signature_key(task.attrs.get("signature", "")) if task else None
    h = hashlib.sha256()
    for tag in ("request", "task", "parent", "feedback", "rules", "experience", "designs", "target"):
        s = sections.get(tag)
        # Ids name a run's records (a case id carries its run's random id): the same task, seed and
        # memory must give the same choices whatever the runs that wrote the memory were called. Measured
        # times differ by a percent from run to run on one GPU: they must not re-draw the seeded choices
        # either (two H200 benches of one depthwise task took different small steps after roots timed
        # 1.83 and 1.85 ms). What was measured still decides which program is the parent.
        h.update(f"<{tag}>{_MEASURED.sub('#', _IDS.sub('', s.body)) if s else ''}".encode())
    rng = random.Random(f"{seed}:{h.hexdigest()}")
    target = sections["target"].body if "target" in sections else None
    return WriterContext(
        kind=kind,
        parent=parse_meta(parent.body if parent else None),
        feedback=fb.body if fb else "",
        rules=parse_rules(sections["rules"].body if "rules" in sections else None, config_keys),
        cases=parse_cases(sections["experience"].body if "experience" in sections else None),
        listed=listed,
        tried=[m for m in (parse_meta(x) for x in tried.body.splitlines()) if m] if tried else [],
        tf32=tf32_allowed(
            target,
            req.body if req else None,
            " ".join(f"{k}={v}" for k, v in (req.attrs.items() if req else [])),
        ),  # fmt: skip
        sm_count=target_sm_count(target),
        smem_bytes=target_smem_bytes(target),
        arch=target_arch(target),
        rng=rng,
        signature=signature,
    )
