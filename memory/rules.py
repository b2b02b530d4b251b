"""The rule book: validity rules learned from failures ("You cannot ..."), merged, counted, pruned.

AdaExplore turns each failed attempt into one rule and injects rules seen often enough into every
prompt. Here rules are kept with their evidence and the hardware and toolchain they were seen on, are
retrieved by relevance instead of pasted whole, and carry a measured effect:

- Merging. A new candidate is compared with its nearest existing rules. With a `judge` given (a
  callable (rule A, rule B) -> same?, e.g. nodes.reflector's chat-model judge; memory holds no prompt
  text), it decides whether two rules prohibit the same action. Without one, the normalised
  error signatures decide (see `records.error_signature`), with a check that the rule texts are not
  unrelated, and rules that name different kernels (design, config, family) stay apart. A duplicate raises the existing rule's count and adds its evidence, once per case: a case
  already in the rule's evidence is not counted again (the same write repeated after a failure).
- Injection. Only rules with count >= the threshold (default 3) are offered to the context manager,
  and rules whose evidence is a limit the compiler reported exceeded (`Rule.certain`: shared memory,
  registers) from their first sighting: a compiler's resource report does not change on a second try.
- Effect. For each attempt the reflector records which rules were in its context and whether it failed
  (`record_rule_exposure`). A rule's effect compares the failure rate of attempts that had it with
  that of comparable attempts (sharing an op family) that did not. Exposures are appended, never
  updated, so concurrent writers lose nothing; an attempt's exposure has its case's id, so recording it
  again replaces it.
- Pruning. `prune` drops rules that had enough exposure and did not lower the failure rate, and rules
  whose Triton (major.minor) is not the installed one.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from kernelwright.hardware.result import Versions
from kernelwright.memory.embedding import text_similarity
from kernelwright.memory.records import (
    LIMIT_EXCEEDED,
    MAX_EVIDENCE,
    MAX_EXCERPT,
    Evidence,
    Exposure,
    Rule,
    RuleCandidate,
    error_signature,
    major_minor,
    text_key,
)
from kernelwright.memory.store import ChromaStore

RULES = "kw_rules"
EXPOSURES = "kw_exposures"
DEFAULT_THRESHOLD = 3
MERGE_NEIGHBOURS = 6
# Thresholds of the judge-free merge, on hashing-embedding cosine similarities (see tests for cases).
SIGNATURE_SAME = 0.9
TEXT_RELATED = 0.3
TEXT_SAME = 0.88
JUDGE_MIN_SIMILARITY = 0.2
_MIN_SIGNATURE_WORDS = 3

RuleJudge = Callable[[str, str], bool]
"""Whether two rule texts prohibit the same action (a reworded duplicate); may raise, and then the
signatures decide."""


class RuleUpdate(BaseModel):
    """What adding a candidate did."""

    rule: Rule
    merged: bool
    matched_by: str = ""
    """"exact" (the same words), "judge", "signature", "text" when merged; "" for a new rule."""
    note: str = ""


class RankedRule(BaseModel):
    rule: Rule
    score: float
    similarity: float


class RuleEffect(BaseModel):
    """Failure rates of attempts with and without a rule in context."""

    rule_id: str
    with_attempts: int = 0
    with_failures: int = 0
    without_attempts: int = 0
    without_failures: int = 0

    @property
    def rate_with(self) -> float | None:
        return self.with_failures / self.with_attempts if self.with_attempts else None

    @property
    def rate_without(self) -> float | None:
        return self.without_failures / self.without_attempts if self.without_attempts else None

    def helps(self, min_samples: int) -> bool | None:
        """True/False once both sides have `min_samples` attempts; None before."""
        if self.with_attempts < min_samples or self.without_attempts < min_samples:
            return None
        assert self.rate_with is not None and self.rate_without is not None
        return self.rate_with < self.rate_without


class PrunedRule(BaseModel):
    id: str
    text: str
    reason: str


class PruneReport(BaseModel):
    removed: list[PrunedRule] = Field(default_factory=list)
    kept: int = 0
    dry_run: bool = False


def _informative(signature: str) -> bool:
    body = signature.split(":", 1)[1] if ":" in signature else ""
    return len(re.findall(r"[a-z_]{2,}", body)) >= _MIN_SIGNATURE_WORDS


# What a rule written from a kernel's header prohibits (nodes.reflector.signature_rule): "You cannot use
# design=flat with BLOCK=1024,num_warps=4 for pointwise on <target>: <error>" -> "use design=flat ... pointwise"
_HEADER_ACTION = re.compile(r"^You cannot (use design=\S+.*?) on ", re.S)


def _header_action(text: str) -> str | None:
    m = _HEADER_ACTION.match(text.strip())
    return m.group(1) if m else None


def signatures_match(cand_sig: str, cand_text: str, rule: Rule) -> str:
    """Judge-free merge decision: "signature", "text" or "" (no match).

    Two rules that name different kernels (design, config or family from a program's header) never merge,
    however alike their errors: the error signature of a mismatch masks its numbers, so every mismatch
    reads alike, and merged they forbid the first rule's kernel on evidence from other kernels (a flat
    pointwise config was once forbidden on four mismatches of three other programs)."""
    mine, theirs = _header_action(cand_text), _header_action(rule.text)
    if mine is not None and theirs is not None and mine != theirs:
        return ""
    text_sim = text_similarity(cand_text, rule.text)
    if text_sim >= TEXT_SAME:
        return "text"
    if _informative(cand_sig) and _informative(rule.error_signature):
        sig_sim = 1.0 if cand_sig == rule.error_signature else text_similarity(cand_sig, rule.error_signature)
        if sig_sim >= SIGNATURE_SAME and text_sim >= TEXT_RELATED:
            return "signature"
    return ""


def _offered(threshold: int) -> dict[str, Any] | None:
    """The Chroma filter for rules offered at `threshold`: seen at least that often, or certain from
    their first sighting (Rule.certain, a compiler's resource report); None (every rule) at 0."""
    if threshold <= 0:
        return None
    seen: dict[str, Any] = {"count": {"$gte": threshold}}
    return {"$or": [seen, {"certain": True}]} if threshold > 1 else seen


def rule_metadata(rule: Rule) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "count": int(rule.count),
        "certain": rule.certain,
        "sig": rule.error_signature,
        "text": text_key(rule.text),
        "kinds": "," + ",".join(rule.error_kinds) + ",",
        "fams": "," + ",".join(rule.op_families) + ",",
        "hardware": "," + ",".join(rule.hardware) + ",",
        "triton": "," + ",".join(rule.triton_versions) + ",",
        "first_seen": float(rule.first_seen),
        "last_seen": float(rule.last_seen),
    }
    return meta


def exposure_metadata(exp: Exposure) -> dict[str, Any]:
    return {
        "failed": exp.failed,
        "rules": "," + ",".join(exp.rule_ids) + ",",
        "fams": "," + ",".join(exp.op_families) + ",",
        "hardware": exp.hardware,
        "run_id": exp.run_id,
        "at": float(exp.at),
    }


def _union(xs: list[str], new: Iterable[str]) -> list[str]:
    out = list(xs)
    for x in new:
        if x and x not in out:
            out.append(x)
    return out


class RuleBook:
    """Rules and their exposures in Chroma; see the module docstring."""

    def __init__(self, store: ChromaStore, threshold: int = DEFAULT_THRESHOLD) -> None:
        self._store = store
        self.threshold = threshold
        self._cache: tuple[tuple[int, int], tuple[list[Rule], np.ndarray] | None] | None = None

    def _rules(self):  # noqa: ANN202 - chromadb's Collection
        return self._store.collection(RULES)

    def _exposures(self):  # noqa: ANN202
        return self._store.collection(EXPOSURES)

    # -- adding ----------------------------------------------------------------------------------

    def add(self, candidate: RuleCandidate, *, judge: RuleJudge | None = None) -> RuleUpdate:
        """Merge a rule candidate into the book: a duplicate raises a count, anything else is new."""
        sig = error_signature(candidate.error_kind, candidate.error)
        mm = major_minor(candidate.versions.triton)
        tm = major_minor(candidate.versions.torch)
        evidence = Evidence(
            case_id=candidate.case_id,
            error_kind=candidate.error_kind,
            excerpt=_excerpt(candidate.error),
            hardware=candidate.hardware,
            triton=candidate.versions.triton,
        )
        with self._store.writing(f"adding a rule from case {candidate.case_id or '(none)'}"):
            match, how, note = self._find_duplicate(candidate, sig, judge)
            now = time.time()
            if match is not None and candidate.case_id in {e.case_id for e in match.evidence} - {None}:
                # This case's observation is counted already: the same write made again (a run's step
                # repeated after the memory server failed it part-way) must not raise the count twice.
                return RuleUpdate(
                    rule=match, merged=True, matched_by=how, note="counted already for this case"
                )
            if match is not None:
                rule = match
                rule.count += 1
                rule.evidence = (rule.evidence + [evidence])[-MAX_EVIDENCE:]
                rule.error_kinds = _union(rule.error_kinds, [candidate.error_kind or ""])
                rule.op_families = _union(rule.op_families, candidate.op_families)
                rule.hardware = _union(rule.hardware, [candidate.hardware])
                rule.triton_versions = _union(rule.triton_versions, [mm])
                rule.torch_versions = _union(rule.torch_versions, [tm])
                rule.last_seen = max(rule.last_seen, now)
                if not rule.error_signature:
                    rule.error_signature = sig
            else:
                rule = Rule(
                    text=candidate.text,
                    error_signature=sig,
                    error_kinds=[candidate.error_kind] if candidate.error_kind else [],
                    op_families=[f for f in candidate.op_families if f],
                    evidence=[evidence],
                    hardware=[candidate.hardware] if candidate.hardware else [],
                    triton_versions=[mm] if mm else [],
                    torch_versions=[tm] if tm else [],
                    first_seen=now,
                    last_seen=now,
                )
            self.put_raw([rule])
        return RuleUpdate(rule=rule, merged=match is not None, matched_by=how, note=note)

    def _find_duplicate(
        self, cand: RuleCandidate, sig: str, judge: RuleJudge | None
    ) -> tuple[Rule | None, str, str]:
        col = self._rules()
        total = col.count()
        if total == 0:
            return None, "", ""
        exact = col.get(where={"sig": sig}, include=["documents"]) if _informative(sig) else {"documents": []}
        key = text_key(cand.text)
        worded = col.get(where={"text": key}, include=["documents"])
        near = col.query(
            query_texts=[f"{cand.text} || {' '.join(cand.op_families)} || {cand.error_kind or ''} || {sig}"],
            n_results=min(MERGE_NEIGHBOURS, total),
            include=["documents", "distances"],
        )
        candidates: dict[str, tuple[Rule, float]] = {}
        for doc, dist in zip(near["documents"][0], near["distances"][0], strict=True):  # type: ignore[index]
            r = Rule.from_json(doc)
            candidates[r.id] = (r, 1.0 - float(dist))
        for doc in [*(worded["documents"] or []), *(exact["documents"] or [])]:
            r = Rule.from_json(doc)
            candidates.setdefault(r.id, (r, 1.0))
        ordered = sorted(candidates.values(), key=lambda rs: -rs[1])
        # The same words are the same rule: no judge is asked (a store written before the text key was
        # kept in metadata finds it among the neighbours).
        for rule, _ in ordered:
            if text_key(rule.text) == key:
                return rule, "exact", ""
        note = ""
        if judge is not None:
            try:
                for rule, sim in ordered:
                    if sim >= JUDGE_MIN_SIMILARITY and judge(cand.text, rule.text):
                        return rule, "judge", ""
                return None, "", ""
            except Exception as exc:  # a model/provider failure must not lose the rule; fall back, say so
                note = f"judge failed ({type(exc).__name__}: {str(exc)[:120]}); used error signatures"
        for rule, _ in ordered:
            how = signatures_match(sig, cand.text, rule)
            if how:
                return rule, how, note
        return None, "", note

    def put_raw(self, rules: Sequence[Rule]) -> None:
        """Store rules exactly as given (overwriting same ids)."""
        if not rules:
            return
        doing = (
            f"storing rule {rules[0].id} (count {rules[0].count})"
            if len(rules) == 1
            else f"storing {len(rules)} rules"
        )
        with self._store.writing(doing):
            col = self._rules()
            step = self._store.max_batch()
            for start in range(0, len(rules), step):
                part = rules[start : start + step]
                col.upsert(
                    ids=[r.id for r in part],
                    embeddings=self._store.embedder.embed_many([r.embedding_text() for r in part]),  # type: ignore[arg-type]
                    documents=[r.to_json() for r in part],
                    metadatas=[rule_metadata(r) for r in part],  # type: ignore[misc]
                )

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if ids:
            with self._store.writing(f"deleting {len(ids)} rule(s)"):
                self._rules().delete(ids=ids)

    # -- reading ---------------------------------------------------------------------------------

    def get(self, rule_id: str) -> Rule | None:
        with self._store.reading():
            got = self._rules().get(ids=[rule_id], include=["documents"])
        docs = got["documents"] or []
        return Rule.from_json(docs[0]) if docs else None

    def all(self, min_count: int = 0) -> list[Rule]:
        """Every rule offered at `min_count` (count >= min_count, or certain: see `_offered`), most
        counted first; every rule at 0."""
        with self._store.reading():
            got = self._rules().get(where=_offered(min_count), include=["documents"])  # type: ignore[arg-type]
        rules = [Rule.from_json(d) for d in got["documents"] or []]
        return sorted(rules, key=lambda r: (-r.count, r.first_seen, r.id))

    def count(self) -> int:
        with self._store.reading():
            return int(self._rules().count())

    def relevant(
        self,
        query: str,
        *,
        op_families: Sequence[str] = (),
        hardware: str = "",
        versions: Versions | None = None,
        min_count: int | None = None,
        k: int = 10,
    ) -> list[RankedRule]:
        """Rules over the threshold that apply here, best first.

        Rules seen only with other Triton versions (major.minor) are left out: what a compiler rejected
        may be accepted by another. So are rules about another target's limits (Rule.target_bound): a
        config that ran out of shared memory on one GPU may fit another's. Ranking: similarity to the query (task signature, feedback), plus
        a bonus for a shared op family, a rule seen on this hardware, and (logarithmically) its count.
        """
        threshold = self.threshold if min_count is None else min_count
        mm = major_minor(versions.triton) if versions is not None else ""
        if k <= 0:
            return []
        with self._store.reading():
            pool = self._injectable(threshold)
        if not pool:
            return []
        rules, matrix = pool
        sims = matrix @ self._store.embedder.embed_many([query])[0]
        ranked: list[RankedRule] = []
        fams = {f for f in op_families if f}
        for rule, sim in zip(rules, sims.tolist(), strict=True):
            if mm and rule.triton_versions and mm not in rule.triton_versions:
                continue
            if hardware and rule.target_bound and rule.hardware and hardware not in rule.hardware:
                continue  # a limit of another GPU (shared memory, registers) says nothing about this one
            score = sim + 0.05 * math.log2(max(1, rule.count))
            if fams & set(rule.op_families):
                score += 0.15
            if hardware and hardware in rule.hardware:
                score += 0.05
            ranked.append(RankedRule(rule=rule, score=score, similarity=sim))
        ranked.sort(key=lambda r: (-r.score, r.rule.id))
        # A rule stored twice in the same words (before exact duplicates were merged) is offered once.
        distinct: dict[str, RankedRule] = {}
        for r in ranked:
            distinct.setdefault(text_key(r.rule.text), r)
        return list(distinct.values())[:k]

    def _injectable(self, threshold: int) -> tuple[list[Rule], np.ndarray] | None:
        """Rules with count >= threshold (or certain ones) and their embeddings, cached until anything
        writes to memory.

        Rules are few (hundreds), so ranking them in-process beats a filtered Chroma query; the cache
        makes repeated context builds between writes cost nothing here.
        """
        token = self._store.cache_token()
        if token is not None and self._cache is not None and self._cache[0] == (token, threshold):
            return self._cache[1]
        got = self._rules().get(where=_offered(threshold), include=["documents", "embeddings"])  # type: ignore[arg-type]
        docs = got["documents"] or []
        if not docs:
            pool: tuple[list[Rule], np.ndarray] | None = None
        else:
            pool = ([Rule.from_json(d) for d in docs], np.asarray(got["embeddings"], dtype=np.float32))
        self._cache = ((token, threshold), pool) if token is not None else None
        return pool

    # -- effect ----------------------------------------------------------------------------------

    def record_rule_exposure(
        self,
        rule_ids: Sequence[str],
        failed: bool,
        *,
        op_families: Sequence[str] = (),
        hardware: str = "",
        case_id: str | None = None,
        run_id: str = "",
    ) -> Exposure:
        """Record one attempt: which rules were in its context (possibly none) and whether it failed.

        With a `case_id`, the exposure's id is the case's: recording one attempt again overwrites it."""
        exp = Exposure(
            rule_ids=list(dict.fromkeys(r for r in rule_ids if r)),
            failed=bool(failed),
            op_families=[f for f in op_families if f],
            hardware=hardware,
            case_id=case_id,
            run_id=run_id,
        )
        if case_id:
            exp.id = f"exp-{case_id}"
        self.put_exposures([exp])
        return exp

    def put_exposures(self, exposures: Sequence[Exposure]) -> None:
        if not exposures:
            return
        doing = (
            f"recording exposure {exposures[0].id}"
            if len(exposures) == 1
            else f"recording {len(exposures)} exposures"
        )
        with self._store.writing(doing):
            col = self._exposures()
            step = self._store.max_batch()
            for start in range(0, len(exposures), step):
                part = exposures[start : start + step]
                col.upsert(
                    ids=[e.id for e in part],
                    embeddings=self._store.embedder.embed_many(  # type: ignore[arg-type]
                        [f"{' '.join(e.op_families)} {e.hardware}" for e in part]
                    ),
                    documents=[e.to_json() for e in part],
                    metadatas=[exposure_metadata(e) for e in part],  # type: ignore[misc]
                )

    def exposures(self) -> list[Exposure]:
        out: list[Exposure] = []
        offset, batch = 0, 5000
        while True:
            with self._store.reading():
                got = self._exposures().get(include=["documents"], limit=batch, offset=offset)
            docs = got["documents"] or []
            out.extend(Exposure.from_json(d) for d in docs)
            if len(docs) < batch:
                return out
            offset += batch

    def exposure_count(self) -> int:
        with self._store.reading():
            return int(self._exposures().count())

    def effects(self, rules: Sequence[Rule] | None = None) -> dict[str, RuleEffect]:
        """Per rule: failure rate with it in context vs comparable attempts without it.

        "Comparable" = sharing an op family with the rule (every attempt when the rule has none).
        """
        rules = list(rules) if rules is not None else self.all()
        rule_fams = {r.id: frozenset(r.op_families) for r in rules}
        # One pass over the exposures: totals per distinct family set, and per rule the attempts that
        # had it (all, and those comparable to it); "without" = comparable - comparable-with.
        per_famset: dict[frozenset[str], list[int]] = defaultdict(lambda: [0, 0])
        with_all: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        with_comparable: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for e in self.exposures():
            fs, failed = frozenset(e.op_families), int(e.failed)
            tally = per_famset[fs]
            tally[0] += 1
            tally[1] += failed
            for rid in set(e.rule_ids):
                rf = rule_fams.get(rid)
                if rf is None:
                    continue
                with_all[rid][0] += 1
                with_all[rid][1] += failed
                if not rf or rf & fs:
                    with_comparable[rid][0] += 1
                    with_comparable[rid][1] += failed
        out: dict[str, RuleEffect] = {}
        for rule in rules:
            rf = rule_fams[rule.id]
            comparable = [0, 0]
            for fs, (n, f) in per_famset.items():
                if not rf or rf & fs:
                    comparable[0] += n
                    comparable[1] += f
            w, wc = with_all[rule.id], with_comparable[rule.id]
            out[rule.id] = RuleEffect(
                rule_id=rule.id,
                with_attempts=w[0],
                with_failures=w[1],
                without_attempts=comparable[0] - wc[0],
                without_failures=comparable[1] - wc[1],
            )
        return out

    def prune(
        self,
        *,
        installed: Versions | None = None,
        min_samples: int = 20,
        dry_run: bool = False,
    ) -> PruneReport:
        """Merge rules stored more than once in the same words (a memory from before such rules were
        merged on adding: the oldest keeps the summed count and the evidence), then drop rules that do
        not help (>= min_samples attempts with and without, failure rate with >= without) and rules whose
        Triton major.minor does not include the installed one."""
        mm = major_minor(installed.triton) if installed is not None else ""
        with self._store.writing("pruning rules"):
            rules, merged, removed = merge_same_words(self.all())
            merged_away = len(removed)
            if merged and not dry_run:
                self.put_raw(merged)
            effects = self.effects(rules)
            for rule in rules:
                eff = effects[rule.id]
                if mm and rule.triton_versions and mm not in rule.triton_versions:
                    reason = f"seen only with triton {', '.join(rule.triton_versions)}; installed is {mm}"
                    removed.append(PrunedRule(id=rule.id, text=rule.text, reason=reason))
                elif eff.helps(min_samples) is False:
                    reason = (
                        f"does not help: failure rate {eff.rate_with:.2f} with it ({eff.with_attempts} attempts)"
                        f" vs {eff.rate_without:.2f} without ({eff.without_attempts})"
                    )
                    removed.append(PrunedRule(id=rule.id, text=rule.text, reason=reason))
            if removed and not dry_run:
                self._rules().delete(ids=[r.id for r in removed])
        return PruneReport(removed=removed, kept=len(rules) - (len(removed) - merged_away), dry_run=dry_run)


def merge_same_words(rules: list[Rule]) -> tuple[list[Rule], list[Rule], list[PrunedRule]]:
    """(every rule once, the rules that absorbed copies, the copies merged away) for rules in the same
    words (`records.text_key`). The oldest copy is kept; its count grows by each copy's count, less the
    cases both counted; evidence, families, hardware and versions are united."""
    groups: dict[str, list[Rule]] = defaultdict(list)
    for rule in rules:
        groups[text_key(rule.text)].append(rule)
    left: list[Rule] = []
    merged: list[Rule] = []
    removed: list[PrunedRule] = []
    for copies in groups.values():
        keep, *others = sorted(copies, key=lambda r: (r.first_seen, r.id))
        left.append(keep)
        if not others:
            continue
        for other in others:
            seen = {e.case_id for e in keep.evidence} - {None}
            fresh = [e for e in other.evidence if e.case_id is None or e.case_id not in seen]
            keep.count += other.count - (len(other.evidence) - len(fresh))
            keep.evidence = sorted(keep.evidence + fresh, key=lambda e: e.at)[-MAX_EVIDENCE:]
            keep.error_kinds = _union(keep.error_kinds, other.error_kinds)
            keep.op_families = _union(keep.op_families, other.op_families)
            keep.hardware = _union(keep.hardware, other.hardware)
            keep.triton_versions = _union(keep.triton_versions, other.triton_versions)
            keep.torch_versions = _union(keep.torch_versions, other.torch_versions)
            keep.last_seen = max(keep.last_seen, other.last_seen)
        for other in others:
            reason = f"the same words as {keep.id}: merged into it (count now {keep.count})"
            removed.append(PrunedRule(id=other.id, text=other.text, reason=reason))
        merged.append(keep)
    return left, merged, removed


def _excerpt(error: str) -> str:
    """The error's last lines, or the first line saying a limit was exceeded (a compile report lists
    every kernel of the program, and the one that did not fit need not be the last)."""
    lines = [ln.rstrip() for ln in (error or "").splitlines() if ln.strip()]
    exceeded = [ln for ln in lines if LIMIT_EXCEEDED.search(ln)]
    text = exceeded[0] if exceeded else "\n".join(lines[-4:])
    return text[-MAX_EXCERPT:]
