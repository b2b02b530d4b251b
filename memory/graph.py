"""The experience graph: every attempt as a `Case`, linked to its parent, ranked for reuse.

Cases live in one Chroma collection. Each entry's document is the case's full JSON; its embedding is
the case's `embedding_text()` (task signature, hardware, idea, design); its metadata holds the flat
fields retrieval filters and ranks on (op families, hardware, outcome, downstream score, ...). The
lineage edge is the child's `parent_id`; children are found by querying on it.

Downstream score (KOPE): d(v) = 0.5 r_v + 0.35 * sum over children d(c). Adding a case recomputes d
along its ancestor chain, under the store's write lock so concurrent writers see consistent sums.

Retrieval: a nearest-neighbour query, then the exact filters (op family, hardware, outcome) applied to
the candidates' metadata, then ranking by outcome label, then d x confidence. When the nearest
candidates hold too few matches, the same query is re-run with the filters inside Chroma (exact but
slower on a large memory: Chroma's local metadata filtering scans). Cases from other hardware come back
marked `same_hardware=False`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from memory.records import (
    DOWNSTREAM_CHILDREN,
    DOWNSTREAM_SELF,
    OUTCOME_RANK,
    Case,
    major_minor,
    own_value,
)
from memory.store import ChromaStore
from tasks.task import TaskSignature

CASES = "kw_cases"
_MAX_LINEAGE = 10_000
_IN_CHUNK = 500


class RetrievedCase(BaseModel):
    """A case as retrieval returns it, with why it ranked where it did."""

    case: Case
    similarity: float
    same_hardware: bool
    score: float
    """d x confidence, the tie-breaker after the outcome label."""


def case_metadata(case: Case) -> dict[str, Any]:
    """Flat scalar fields for filtering (Chroma metadata takes no lists or None)."""
    meta: dict[str, Any] = {
        "task": case.task_name,
        "fams": "," + ",".join(case.signature.op_families) + ",",
        "hardware": case.hardware,
        "cc": case.compute_capability,
        "triton": major_minor(case.versions.triton),
        "torch": major_minor(case.versions.torch),
        "outcome": case.outcome,
        "rank": OUTCOME_RANK[case.outcome],
        "correct": case.correct,
        "d": float(case.downstream),
        "conf": float(case.confidence),
        "run_id": case.run_id,
        "parent_id": case.parent_id or "",
        "action": case.action,
        "kfamily": case.family,
        "design": case.design,
        "error_kind": case.error_kind or "",
        "created_at": float(case.created_at),
    }
    if case.speedup is not None:
        meta["speedup"] = float(case.speedup)
    if case.step_ratio is not None:
        meta["r"] = float(case.step_ratio)
    for fam in case.signature.op_families:
        meta[f"fam_{fam}"] = True
    return meta


def _chunks(items: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


class ExperienceGraph:
    """Cases and their lineage in a Chroma collection; see the module docstring."""

    def __init__(self, store: ChromaStore) -> None:
        self._store = store

    def _col(self):  # noqa: ANN202 - chromadb's Collection
        return self._store.collection(CASES)

    # -- writing ---------------------------------------------------------------------------------

    def add(self, case: Case) -> Case:
        """Store one case and update the downstream scores of its ancestors; returns the stored case."""
        return self.add_many([case])[0]

    def add_many(self, cases: Sequence[Case]) -> list[Case]:
        """Store new cases (ids must be new) and keep every affected downstream score current.

        Downstream scores inside the batch are computed here, bottom-up; ancestors already in memory
        are then updated level by level.
        """
        if not cases:
            return []
        ids = [c.id for c in cases]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate case ids in one batch")
        cases = [c.model_copy(deep=True) for c in cases]
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
        with self._store.writing():
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
            outside = {c.parent_id for c in cases if c.parent_id and c.parent_id not in by_id}
            self._propagate(outside)
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

    def _propagate(self, dirty: set[str]) -> None:
        """Recompute d for `dirty` cases from their children, then for their parents, up to the roots."""
        col = self._col()
        for _ in range(_MAX_LINEAGE):
            dirty.discard("")
            if not dirty:
                return
            ids = sorted(dirty)
            nodes = self._fetch(ids)
            child_d: dict[str, float] = defaultdict(float)
            for part in _chunks(ids, _IN_CHUNK):
                got = col.get(where={"parent_id": {"$in": list(part)}}, include=["metadatas"])
                for meta in got["metadatas"] or []:
                    child_d[str(meta["parent_id"])] += float(meta.get("d", 0.0))  # type: ignore[arg-type]
            changed: list[Case] = []
            nxt: set[str] = set()
            for node in nodes:
                d = DOWNSTREAM_SELF * own_value(node) + DOWNSTREAM_CHILDREN * child_d.get(node.id, 0.0)
                if not math.isclose(d, node.downstream, rel_tol=1e-12, abs_tol=1e-12):
                    node.downstream = d
                    changed.append(node)
                    if node.parent_id:
                        nxt.add(node.parent_id)
            for part in _chunks(changed, self._store.max_batch()):
                # Embeddings must be passed: without them Chroma would re-embed the JSON document.
                col.update(
                    ids=[c.id for c in part],
                    embeddings=self._store.embedder.embed_many([c.embedding_text() for c in part]),  # type: ignore[arg-type]
                    documents=[c.to_json() for c in part],
                    metadatas=[case_metadata(c) for c in part],  # type: ignore[misc]
                )
            dirty = nxt
        raise RuntimeError("lineage deeper than 10000 levels (a parent cycle?)")

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

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if ids:
            with self._store.writing():
                self._col().delete(ids=ids)

    # -- reading ---------------------------------------------------------------------------------

    def _fetch(self, ids: Sequence[str]) -> list[Case]:
        out: dict[str, Case] = {}
        col = self._col()
        for part in _chunks(list(ids), _IN_CHUNK):
            got = col.get(ids=list(part), include=["documents"])
            for cid, doc in zip(got["ids"], got["documents"] or [], strict=True):
                out[cid] = Case.from_json(doc)
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
            got = self._col().get(where={"parent_id": case_id}, include=["documents"])
        kids = [Case.from_json(d) for d in got["documents"] or []]
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
                got = self._col().get(include=["documents"], limit=batch, offset=offset)
            docs = got["documents"] or []
            for doc in docs:
                yield Case.from_json(doc)
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
    ) -> list[RetrievedCase]:
        """The k best cases for a query (a task signature or free text).

        Filters: `op_families` (any in common), `hardware` (this one, or with `other_hardware` any but
        this one), `outcomes`, `correct_only`, `exclude_ids`, `exclude_run`, `min_similarity`.
        Same-hardware results rank by outcome label, then d x confidence, then similarity;
        `other_hardware` results (feasibility, not speed) rank correct first, then by similarity.
        """
        if k <= 0:
            return []
        text = query.key() if isinstance(query, TaskSignature) else query
        if hardware and not other_hardware:
            text = f"{text} || {hardware}"
        emb = self._store.embedder.embed_many([text])
        fams = [f for f in (op_families or []) if f]
        excluded = set(exclude_ids)
        wanted_outcomes = set(outcomes) if outcomes else None

        def keep(meta: dict[str, Any], sim: float, cid: str) -> bool:
            if cid in excluded or sim < min_similarity:
                return False
            if fams and not any(meta.get(f"fam_{f}") for f in fams):
                return False
            if hardware:
                same = meta.get("hardware") == hardware
                if same == other_hardware:
                    return False
            if wanted_outcomes is not None and meta.get("outcome") not in wanted_outcomes:
                return False
            if correct_only and not meta.get("correct"):
                return False
            return not (exclude_run and meta.get("run_id") == exclude_run)

        with self._store.reading():
            col = self._col()
            total = col.count()
            if total == 0:
                return []
            n = min(pool, total)
            got = col.query(query_embeddings=emb, n_results=n, include=["metadatas", "distances"])
            hits = self._hits(got, keep)
            if len(hits) < k and n < total:
                where = self._where(fams, hardware, other_hardware, wanted_outcomes, correct_only)
                if where is not None:
                    got = col.query(
                        query_embeddings=emb, n_results=n, where=where, include=["metadatas", "distances"]
                    )
                    hits = self._hits(got, keep)
            if other_hardware:
                hits.sort(key=lambda h: (not h[1].get("correct"), -h[2]))
            else:
                hits.sort(
                    key=lambda h: (
                        int(h[1].get("rank", 99)),
                        -float(h[1].get("d", 0.0)) * float(h[1].get("conf", 1.0)),
                        -h[2],
                    )
                )
            top = hits[:k]
            cases = {c.id: c for c in self._fetch([h[0] for h in top])}
        out = []
        for cid, meta, sim in top:
            if cid in cases:
                out.append(
                    RetrievedCase(
                        case=cases[cid],
                        similarity=sim,
                        same_hardware=(meta.get("hardware") == hardware) if hardware else True,
                        score=float(meta.get("d", 0.0)) * float(meta.get("conf", 1.0)),
                    )
                )
        return out

    @staticmethod
    def _hits(got: Any, keep: Any) -> list[tuple[str, dict[str, Any], float]]:
        hits = []
        ids = got["ids"][0] if got["ids"] else []
        metas = got["metadatas"][0] if got["metadatas"] else []
        dists = got["distances"][0] if got["distances"] else []
        for cid, meta, dist in zip(ids, metas, dists, strict=True):
            sim = 1.0 - float(dist)  # cosine distance
            m = dict(meta or {})
            if keep(m, sim, cid):
                hits.append((cid, m, sim))
        return hits

    @staticmethod
    def _where(
        fams: list[str],
        hardware: str | None,
        other_hardware: bool,
        outcomes: set[str] | None,
        correct_only: bool,
    ) -> dict[str, Any] | None:
        clauses: list[dict[str, Any]] = []
        if fams:
            fam_clauses = [{f"fam_{f}": True} for f in fams]
            clauses.append(fam_clauses[0] if len(fam_clauses) == 1 else {"$or": fam_clauses})
        if hardware:
            clauses.append({"hardware": {"$ne": hardware}} if other_hardware else {"hardware": hardware})
        if outcomes:
            clauses.append({"outcome": {"$in": sorted(outcomes)}})
        if correct_only:
            clauses.append({"correct": True})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}
