"""The experience graph: every attempt as a `Case`, linked to its parent, ranked for reuse.

Cases live in one Chroma collection. Each entry's document is the case's full JSON; its embedding is
the case's `embedding_text()` (task signature, hardware, idea, design); its metadata holds the flat
fields retrieval filters and ranks on (op families, hardware, outcome, downstream score, ...). The
lineage edge is the child's `parent_id`; children are found by querying on it.

Downstream score (KOPE): d(v) = 0.5 r_v + 0.35 * sum over children d(c). d is linear in the children's
scores, so adding a case with score d adds 0.35^k x d to its k-th ancestor: one walk up the chain and
one metadata update, under the store's write lock so concurrent writers' increments add up. The current
d lives in the entry's metadata (the record JSON keeps the value it was stored with; reads take the
metadata's). `rescore()` recomputes every score from the lineage, should a process die between the
two writes of an add.

Retrieval: a nearest-neighbour query, then the exact filters (op family, hardware, outcome) applied to
the candidates' filter fields, then ranking by outcome label, then d x confidence. When the nearest
candidates hold too few matches the pool is widened (up to POOL_LIMIT). Chroma's own `where` filters
are not used: in local mode they scan, 0.2-1.8 s per query at 100k cases (measured), while the vector
query alone takes ~2 ms. Fetching metadata with results costs ~0.1 ms per result, so the filter fields
are cached per process (`Facets`), kept current by this process's writes and dropped when another
process writes. Cases from other hardware come back marked `same_hardware=False`.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from kernelwright.memory.records import (
    DOWNSTREAM_CHILDREN,
    DOWNSTREAM_SELF,
    OUTCOME_RANK,
    Case,
    code_key,
    outcome_label,
    own_value,
    step_ratio_interval,
)
from kernelwright.memory.store import ChromaStore
from kernelwright.tasks.similarity import NEAR, parse_signature_key, signature_similarity
from kernelwright.tasks.task import TaskSignature

CASES = "kw_cases"
_MAX_LINEAGE = 10_000
_IN_CHUNK = 500
POOL_LIMIT = 768
FACETS_LIMIT = 500_000
FACETS_TTL_S = 30.0


class Facets:
    """The filter and ranking fields of one case (a compact form of its metadata)."""

    __slots__ = ("conf", "correct", "d", "fams", "hardware", "outcome", "run_id", "sig")

    def __init__(
        self,
        hardware: str,
        outcome: str,
        correct: bool,
        d: float,
        conf: float,
        run_id: str,
        fams: frozenset[str],
        sig: str = "",
    ) -> None:
        self.hardware, self.outcome, self.correct = hardware, outcome, correct
        self.d, self.conf, self.run_id, self.fams = d, conf, run_id, fams
        self.sig = sig  # the case's TaskSignature.key(); "" in a store written before it was kept

    @classmethod
    def of(cls, meta: Any) -> Facets:
        return cls(
            hardware=str(meta.get("hardware", "")),
            outcome=str(meta.get("outcome", "")),
            correct=bool(meta.get("correct", False)),
            d=float(meta.get("d", 0.0)),
            conf=float(meta.get("conf", 1.0)),
            run_id=str(meta.get("run_id", "")),
            fams=frozenset(k[4:] for k in meta if k.startswith("fam_")),
            sig=str(meta.get("sig", "")),
        )


class RetrievedCase(BaseModel):
    """A case as retrieval returns it, with why it ranked where it did."""

    case: Case
    similarity: float
    same_hardware: bool
    score: float
    """d x confidence, the tie-breaker after the outcome label."""


def case_metadata(case: Case) -> dict[str, Any]:
    """Flat scalar fields for filtering and ranking (Chroma metadata takes no lists or None).

    Deliberately few: every key is a row in Chroma's metadata table, and the number of keys dominates
    insert time and the cost of returning metadata with query results. Everything else is in the
    record JSON (the document).
    """
    meta: dict[str, Any] = {
        "hardware": case.hardware,
        "outcome": case.outcome,
        "correct": case.correct,
        "d": float(case.downstream),
        "conf": float(case.confidence),
        "sig": case.signature.key(),
    }
    if case.parent_id:
        meta["parent_id"] = case.parent_id
    if case.run_id:
        meta["run_id"] = case.run_id
    for fam in case.signature.op_families:
        meta[f"fam_{fam}"] = True
    return meta


def _with_score(case: Case, meta: Any) -> Case:
    """The stored record with its current downstream score (kept in metadata, updated in place)."""
    if meta and "d" in meta:
        case.downstream = float(meta["d"])
    return case


def _chunks(items: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


class FacetCache:
    """Filter fields of cases (`Facets`), kept in this process so a search need not ask Chroma for them.

    Returning metadata with a query costs ~0.1 ms per result in Chroma's local mode, ten times the vector
    search itself; the fields cached here are kept current by this process's own writes and dropped when
    another process writes (or, for a server, after FACETS_TTL_S).
    """

    def __init__(self, store: ChromaStore, collection: Callable[[], Any]) -> None:
        self._store, self._collection = store, collection
        self._entries: dict[str, Facets] = {}
        self._token: int | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def _current(self) -> dict[str, Facets]:
        token = self._store.epoch if not self._store.remote else int(time.monotonic() // FACETS_TTL_S)
        if token != self._token:
            self._entries.clear()
            self._token = token
        return self._entries

    def of(self, ids: Sequence[str]) -> dict[str, Facets]:
        """The given cases' fields, from the cache or (for the missing ones) from Chroma."""
        cache = self._current()
        missing = [i for i in ids if i not in cache]
        if missing:
            if len(cache) + len(missing) > FACETS_LIMIT:
                cache.clear()
            got = self._collection().get(ids=missing, include=["metadatas"])
            for cid, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
                cache[cid] = Facets.of(meta or {})
        return {i: cache[i] for i in ids if i in cache}

    def note(self, cases: Iterable[Case]) -> None:
        """Own write: keep the cache current instead of dropping it."""
        cache = self._current()
        for c in cases:
            cache[c.id] = Facets.of(case_metadata(c))

    def set_downstream(self, scores: dict[str, float]) -> None:
        cache = self._current()
        for i, d in scores.items():
            if i in cache:
                cache[i].d = d

    def drop(self, ids: Iterable[str]) -> None:
        for i in ids:
            self._entries.pop(i, None)

    def clear(self) -> None:
        self._entries.clear()


class ExperienceGraph:
    """Cases and their lineage in a Chroma collection; see the module docstring."""

    def __init__(self, store: ChromaStore) -> None:
        self._store = store
        self.facets = FacetCache(store, self._col)
        """Filter fields of cases, cached (FacetCache)."""

    def _col(self):  # noqa: ANN202 - chromadb's Collection
        return self._store.collection(CASES)

    # -- writing ---------------------------------------------------------------------------------

    def add(self, case: Case) -> Case:
        """Store one case and update the downstream scores of its ancestors; returns the stored case."""
        return self.add_many([case])[0]

    def add_many(self, cases: Sequence[Case]) -> list[Case]:
        """Store new cases (ids must be new) and keep every affected downstream score current.

        Downstream scores inside the batch are computed here, bottom-up; ancestors already in memory
        then get their increments (see the module docstring).
        """
        if not cases:
            return []
        ids = [c.id for c in cases]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate case ids in one batch")
        # Shallow copies: only the scalar `downstream` is changed here.
        cases = [c.model_copy() for c in cases]
        by_id = {c.id: c for c in cases}
        kids: dict[str, list[Case]] = defaultdict(list)
        for c in cases:
            if c.parent_id in by_id:
                kids[c.parent_id].append(c)
        for c in self._bottom_up(cases, kids):
            c.downstream = DOWNSTREAM_SELF * own_value(c) + DOWNSTREAM_CHILDREN * sum(
                k.downstream for k in kids.get(c.id, [])
            )
        texts = [c.embedding_text() for c in cases]
        embeddings = self._store.embedder.embed_many(texts)
        doing = f"adding case {ids[0]}" if len(ids) == 1 else f"adding {len(ids)} cases ({ids[0]}, ...)"
        with self._store.writing(doing):
            col = self._col()
            existing = col.get(ids=ids, include=[])["ids"]
            if existing:
                raise ValueError(f"case id already in memory: {existing[0]}")
            step = self._store.max_batch()
            for start in range(0, len(cases), step):
                part = cases[start : start + step]
                col.add(
                    ids=[c.id for c in part],
                    embeddings=embeddings[start : start + step],  # type: ignore[arg-type]
                    documents=[c.to_json() for c in part],
                    metadatas=[case_metadata(c) for c in part],  # type: ignore[misc]
                )
            # Each stored ancestor's d grows by 0.35^depth x the new child's d (d is linear in its
            # children), so one pass up the chains and one metadata update cover every ancestor.
            deltas: dict[str, float] = defaultdict(float)
            for c in cases:
                if c.parent_id and c.parent_id not in by_id:
                    deltas[c.parent_id] += DOWNSTREAM_CHILDREN * c.downstream
            self.facets.note(cases)
            self._add_to_ancestors(deltas)
        return cases

    @staticmethod
    def _bottom_up(cases: Sequence[Case], kids: dict[str, list[Case]]) -> list[Case]:
        """Cases ordered children before parents (within the batch)."""
        order: list[Case] = []
        seen: set[str] = set()
        for root in cases:
            stack: list[tuple[Case, bool]] = [(root, False)]
            while stack:
                node, expanded = stack.pop()
                if node.id in seen and not expanded:
                    continue
                if expanded:
                    order.append(node)
                    continue
                seen.add(node.id)
                stack.append((node, True))
                stack.extend((k, False) for k in kids.get(node.id, []) if k.id not in seen)
        return order

    def _add_to_ancestors(self, deltas: dict[str, float]) -> None:
        """Add `deltas[id]` to each case's d and the propagated share to every ancestor above it.

        Runs under the write lock, so concurrent writers' increments add up instead of overwriting.
        """
        col = self._col()
        total: dict[str, float] = defaultdict(float)
        current: dict[str, float] = {}
        level = {k: v for k, v in deltas.items() if k and v}
        for _ in range(_MAX_LINEAGE):
            if not level:
                break
            nxt: dict[str, float] = defaultdict(float)
            ids = list(level)
            for part in _chunks(ids, _IN_CHUNK):
                got = col.get(ids=list(part), include=["metadatas"])
                for cid, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
                    m = meta or {}
                    current.setdefault(cid, float(m.get("d", 0.0)))  # type: ignore[arg-type]
                    total[cid] += level[cid]
                    parent = m.get("parent_id")
                    if parent:
                        nxt[str(parent)] += DOWNSTREAM_CHILDREN * level[cid]
            level = dict(nxt)
        else:
            raise RuntimeError("lineage deeper than 10000 levels (a parent cycle?)")
        if total:
            ids = sorted(total)
            for part in _chunks(ids, self._store.max_batch()):
                col.update(ids=list(part), metadatas=[{"d": current[i] + total[i]} for i in part])
            self.facets.set_downstream({i: current[i] + total[i] for i in ids})

    def rescore(self) -> int:
        """Recompute every downstream score from the lineage (repair after a crash between writes);
        returns how many changed."""
        with self._store.writing("rescoring the cases"):
            col = self._col()
            got = col.get(include=["metadatas"])
            metas = {cid: (m or {}) for cid, m in zip(got["ids"], got["metadatas"] or [], strict=True)}
            kids: dict[str, list[str]] = defaultdict(list)
            for cid, m in metas.items():
                if m.get("parent_id") in metas:
                    kids[str(m["parent_id"])].append(cid)
            cases = {c.id: c for c in self._fetch(list(metas))}
            order = self._bottom_up(list(cases.values()), {k: [cases[i] for i in v] for k, v in kids.items()})
            new: dict[str, float] = {}
            for c in order:
                new[c.id] = DOWNSTREAM_SELF * own_value(c) + DOWNSTREAM_CHILDREN * sum(
                    new[k] for k in kids.get(c.id, [])
                )
            changed = [
                i
                for i, d in new.items()
                if not math.isclose(d, cases[i].downstream, rel_tol=1e-9, abs_tol=1e-12)
            ]
            for part in _chunks(changed, self._store.max_batch()):
                col.update(ids=list(part), metadatas=[{"d": new[i]} for i in part])
            self.facets.clear()
        return len(changed)

    def relabel(self, dry_run: bool = False) -> list[tuple[Case, str]]:
        """Label every case again from its step ratio and the judge's intervals (records.outcome_label), as a
        case written now would be: a memory built before a change to the labels (ties, 2026-12-04) keeps
        its old ones until this runs. Returns (the case with its new label, its old label) for each that
        changes; with `dry_run` nothing is written. Downstream scores follow the step ratio, not the label,
        and stay as they are."""
        with self._store.writing("relabelling the cases"):
            cases = {c.id: c for c in self.iter_all()}
            changed: list[tuple[Case, str]] = []
            for c in cases.values():
                parent = cases.get(c.parent_id) if c.parent_id else None
                interval = step_ratio_interval(
                    c.speedup_ci, c.parent_speedup, parent.speedup_ci if parent is not None else None
                )
                label = outcome_label(c.correct, c.step_ratio, interval)
                if label != c.outcome:
                    changed.append((c.model_copy(update={"outcome": label}), c.outcome))
            if changed and not dry_run:
                self.put_raw([c for c, _ in changed])
                self.facets.clear()
        return changed

    def put_raw(self, cases: Sequence[Case]) -> None:
        """Store cases exactly as given (overwriting same ids), without touching downstream scores.

        For import, where the records already carry their scores. Call inside `store.writing()`.
        """
        col = self._col()
        texts = [c.embedding_text() for c in cases]
        embeddings = self._store.embedder.embed_many(texts)
        step = self._store.max_batch()
        for start in range(0, len(cases), step):
            part = cases[start : start + step]
            col.upsert(
                ids=[c.id for c in part],
                embeddings=embeddings[start : start + step],  # type: ignore[arg-type]
                documents=[c.to_json() for c in part],
                metadatas=[case_metadata(c) for c in part],  # type: ignore[misc]
            )
        self.facets.note(cases)

    def clear_cache(self) -> None:
        """Forget cached filter fields (after writing to the collection other than through this class)."""
        self.facets.clear()

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if ids:
            with self._store.writing(f"deleting {len(ids)} case(s) ({ids[0]}, ...)"):
                self._col().delete(ids=ids)
                self.facets.drop(ids)

    # -- reading ---------------------------------------------------------------------------------

    def _fetch(self, ids: Sequence[str]) -> list[Case]:
        out: dict[str, Case] = {}
        col = self._col()
        for part in _chunks(list(ids), _IN_CHUNK):
            got = col.get(ids=list(part), include=["documents", "metadatas"])
            for cid, doc, meta in zip(
                got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True
            ):
                out[cid] = _with_score(Case.from_json(doc), meta)
        return [out[i] for i in ids if i in out]

    def get(self, case_id: str) -> Case | None:
        with self._store.reading():
            got = self._fetch([case_id])
        return got[0] if got else None

    def get_many(self, ids: Sequence[str]) -> list[Case]:
        with self._store.reading():
            return self._fetch(ids)

    def children(self, case_id: str) -> list[Case]:
        with self._store.reading():
            got = self._col().get(where={"parent_id": case_id}, include=["documents", "metadatas"])
        kids = [
            _with_score(Case.from_json(d), m)
            for d, m in zip(got["documents"] or [], got["metadatas"] or [], strict=True)
        ]
        return sorted(kids, key=lambda c: (c.created_at, c.id))

    def ancestors(self, case_id: str) -> list[Case]:
        """The chain from the root down to this case's parent."""
        chain: list[Case] = []
        seen = {case_id}
        node = self.get(case_id)
        while node is not None and node.parent_id and node.parent_id not in seen:
            seen.add(node.parent_id)
            node = self.get(node.parent_id)
            if node is not None:
                chain.append(node)
        return list(reversed(chain))

    def count(self) -> int:
        with self._store.reading():
            return int(self._col().count())

    def count_where(self, where: dict[str, Any]) -> int:
        with self._store.reading():
            return len(self._col().get(where=where, include=[])["ids"])  # type: ignore[arg-type]

    def iter_all(self, batch: int = 1000) -> Iterator[Case]:
        """Every case, in storage order."""
        offset = 0
        while True:
            with self._store.reading():
                got = self._col().get(include=["documents", "metadatas"], limit=batch, offset=offset)
            docs = got["documents"] or []
            for doc, meta in zip(docs, got["metadatas"] or [], strict=True):
                yield _with_score(Case.from_json(doc), meta)
            if len(docs) < batch:
                return
            offset += batch

    # -- retrieval -------------------------------------------------------------------------------

    def search(
        self,
        query: str | TaskSignature,
        *,
        op_families: Sequence[str] | None = None,
        hardware: str | None = None,
        other_hardware: bool = False,
        outcomes: Sequence[str] | None = None,
        correct_only: bool = False,
        exclude_ids: Iterable[str] = (),
        exclude_run: str | None = None,
        min_similarity: float = 0.0,
        k: int = 5,
        pool: int = 48,
        max_pool: int = POOL_LIMIT,
        distinct: bool = False,
        skip_codes: Iterable[str] = (),
    ) -> list[RetrievedCase]:
        """The k best cases for a query (a task signature or free text).

        Filters: `op_families` (any in common), `hardware` (this one, or with `other_hardware` any but
        this one), `outcomes`, `correct_only`, `exclude_ids`, `exclude_run`, `min_similarity`.
        Same-hardware results for a task signature rank cases of near tasks first (explicit similarity >=
        tasks.similarity.NEAR, most similar first), then by outcome label, then d x confidence, then
        embedding similarity;
        `other_hardware` results (feasibility, not speed) rank correct first, then by similarity.

        The filters are applied to the `pool` nearest cases, widened (x4 each time, up to `max_pool`)
        while fewer than k match. A memory of up to `max_pool` cases is therefore searched exactly; in
        a larger one, a case outside the `max_pool` nearest is not found even if it matches.

        `distinct`: the k best cases of k different programs (`records.code_key`: the same kernel stored
        by several attempts counts once, as its best-ranked case), none of them one of `skip_codes`
        (programs the caller shows already: a design, the parent).
        """
        if k <= 0:
            return []
        text = query.key() if isinstance(query, TaskSignature) else query
        if hardware and not other_hardware:
            text = f"{text} || {hardware}"
        emb = self._store.embedder.embed_many([text])
        fams = {f for f in (op_families or []) if f}
        excluded = set(exclude_ids)
        wanted_outcomes = set(outcomes) if outcomes else None

        def keep(f: Facets, sim: float, cid: str) -> bool:
            if cid in excluded or sim < min_similarity:
                return False
            if fams and not (fams & f.fams):
                return False
            if hardware and (f.hardware == hardware) == other_hardware:
                return False
            if wanted_outcomes is not None and f.outcome not in wanted_outcomes:
                return False
            if correct_only and not f.correct:
                return False
            return not (exclude_run and f.run_id == exclude_run)

        with self._store.reading():
            col = self._col()
            n = max(1, min(pool, max_pool))
            while True:
                got = col.query(query_embeddings=emb, n_results=n, include=["distances"])
                ids, dists = got["ids"][0], got["distances"][0]  # type: ignore[index]
                facets = self.facets.of(ids)
                hits = [
                    (cid, facets[cid], 1.0 - float(dist))  # cosine distance -> similarity
                    for cid, dist in zip(ids, dists, strict=True)
                    if cid in facets and keep(facets[cid], 1.0 - float(dist), cid)
                ]
                if len(hits) >= k or len(ids) < n or n >= max_pool:
                    break
                n = min(n * 4, max_pool)
            if other_hardware:
                hits.sort(key=lambda h: (not h[1].correct, -h[2]))
            else:
                near = near_tasks(self._fetch, query, hits) if isinstance(query, TaskSignature) else {}
                hits.sort(
                    key=lambda h: (
                        -near.get(h[0], 0.0),
                        OUTCOME_RANK.get(h[1].outcome, 99),
                        -h[1].d * h[1].conf,
                        -h[2],
                    )
                )
            if distinct:
                top, cases = distinct_programs(self._fetch, hits, k, set(skip_codes))
            else:
                top = hits[:k]
                cases = {c.id: c for c in self._fetch([h[0] for h in top])}
        return [
            RetrievedCase(
                case=cases[cid],
                similarity=sim,
                same_hardware=(f.hardware == hardware) if hardware else True,
                score=f.d * f.conf,
            )
            for cid, f, sim in top
            if cid in cases
        ]


def distinct_programs(
    fetch: Callable[[Sequence[str]], list[Case]],
    hits: Sequence[tuple[str, Facets, float]],
    k: int,
    seen: set[str],
) -> tuple[list[tuple[str, Facets, float]], dict[str, Case]]:
    """The first k ranked hits whose programs differ from each other and from `seen` (code keys),
    fetched a few at a time."""
    top: list[tuple[str, Facets, float]] = []
    cases: dict[str, Case] = {}
    at = 0
    while len(top) < k and at < len(hits):
        batch = hits[at : at + max(2 * k, 8)]
        at += len(batch)
        fetched = {c.id: c for c in fetch([h[0] for h in batch])}
        for hit in batch:
            case = fetched.get(hit[0])
            if case is None or code_key(case.code) in seen:
                continue
            seen.add(code_key(case.code))
            top.append(hit)
            cases[case.id] = case
            if len(top) == k:
                break
    return top, cases


def near_tasks(
    fetch: Callable[[Sequence[str]], list[Case]],
    query: TaskSignature,
    hits: Sequence[tuple[str, Facets, float]],
) -> dict[str, float]:
    """Explicit task similarity (tasks.similarity) of each hit whose task is near the query's (>= NEAR).

    Near cases rank first, the most similar task first (the task's own cases before a neighbour's),
    then by outcome and d x confidence as the rest: a fast kernel of a merely related task does not
    push out what won on this very task. A store written before signatures were kept in metadata
    reads them from the records."""
    sigs = {cid: parse_signature_key(f.sig) for cid, f, _ in hits if f.sig}
    missing = [cid for cid, f, _ in hits if not f.sig]
    if missing:
        sigs.update({c.id: c.signature for c in fetch(missing)})
    out = {}
    for cid, sig in sigs.items():
        sim = signature_similarity(query, sig) if sig is not None else 0.0
        if sim >= NEAR:
            out[cid] = round(sim, 6)
    return out
