"""`open_memory(location)` and the `Memory` it returns: the experience graph and rule book of one store.

A location is a folder (Chroma PersistentClient), a Chroma server URL (`http://host:port`, HttpClient),
or None for $KERNELWRIGHT_MEMORY, else ~/.kernelwright.

Export/import: JSONL, one record per line, each with a "kind" field ("case", "rule", "exposure"),
in a fixed order with sorted keys, so export -> import into an empty memory -> export gives a
byte-identical file. Import validates every line before it writes anything; a bad line is reported
with its line number and nothing is imported. Records are written as they are (downstream scores
included), overwriting records with the same id; if a write fails part-way, what was written is
rolled back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from kernelwright.memory.embedding import make_embedder
from kernelwright.memory.graph import CASES, ExperienceGraph
from kernelwright.memory.records import OUTCOMES, Case, Exposure, MemoryRecord, Rule
from kernelwright.memory.rules import DEFAULT_THRESHOLD, EXPOSURES, RULES, RuleBook
from kernelwright.memory.store import ChromaStore, get_store, resolve_location

ENV_RULE_THRESHOLD = "KERNELWRIGHT_RULE_THRESHOLD"
RECORD_KINDS: dict[str, type[MemoryRecord]] = {"case": Case, "rule": Rule, "exposure": Exposure}


class MemoryImportError(ValueError):
    """A JSONL file that cannot be imported; the message names the file and line."""


class MemoryStats(BaseModel):
    location: str
    embedding: str
    cases: int
    rules: int
    rules_injectable: int
    """Rules at or over the injection threshold."""
    rule_threshold: int
    exposures: int
    outcomes: dict[str, int] = Field(default_factory=dict)
    exists: bool = True
    """False for a memory folder that does not exist yet (nothing learned; nothing was made to say so)."""


class TransferReport(BaseModel):
    path: str
    cases: int = 0
    rules: int = 0
    exposures: int = 0


class Memory:
    """Everything the agent learns: `cases` (ExperienceGraph) and `rules` (RuleBook) in one store."""

    def __init__(self, store: ChromaStore, *, rule_threshold: int = DEFAULT_THRESHOLD) -> None:
        self._store = store
        self.location = store.location
        self.cases = ExperienceGraph(store)
        self.rules = RuleBook(store, threshold=rule_threshold)
        self._closed = False

    @property
    def read_only(self) -> bool:
        """Opened from a folder this process cannot write: reads work, writes raise MemoryLocationError."""
        return self._store.read_only

    @property
    def embedding(self) -> str:
        return self._store.embedder.describe()

    def stats(self) -> MemoryStats:
        outcomes = {o: self.cases.count_where({"outcome": o}) for o in OUTCOMES}
        return MemoryStats(
            location=self.location,
            embedding=self.embedding,
            cases=self.cases.count(),
            rules=self.rules.count(),
            rules_injectable=len(self.rules.all(min_count=self.rules.threshold)),
            rule_threshold=self.rules.threshold,
            exposures=self.rules.exposure_count(),
            outcomes={k: v for k, v in outcomes.items() if v},
        )

    # -- export / import -------------------------------------------------------------------------

    def iter_records(self) -> Iterator[tuple[str, MemoryRecord]]:
        """Every record in export order: cases, rules, exposures, each by creation time then id."""
        cases = sorted(self.cases.iter_all(), key=lambda c: (c.created_at, c.id))
        for c in cases:
            yield "case", c
        for r in sorted(self.rules.all(), key=lambda r: (r.first_seen, r.id)):
            yield "rule", r
        for e in sorted(self.rules.exposures(), key=lambda e: (e.at, e.id)):
            yield "exposure", e

    def export_jsonl(self, path: str | os.PathLike[str]) -> TransferReport:
        report = TransferReport(path=os.fspath(path))
        tmp = Path(f"{os.fspath(path)}.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for kind, rec in self.iter_records():
                data: dict[str, Any] = {"kind": kind, **rec.model_dump(mode="json")}
                fh.write(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
                setattr(report, f"{kind}s", getattr(report, f"{kind}s") + 1)
        os.replace(tmp, path)
        return report

    @staticmethod
    def read_jsonl(path: str | os.PathLike[str]) -> dict[str, list[MemoryRecord]]:
        """Parse and validate a JSONL export; MemoryImportError naming the first bad line."""
        out: dict[str, list[MemoryRecord]] = {k: [] for k in RECORD_KINDS}
        seen: set[tuple[str, str]] = set()
        try:
            fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise MemoryImportError(f"cannot read {path}: {exc.strerror}") from exc
        with fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path}:{lineno}"
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise MemoryImportError(f"{where}: not valid JSON ({exc.msg})") from exc
                if not isinstance(data, dict):
                    raise MemoryImportError(f"{where}: expected a JSON object")
                kind = data.pop("kind", None)
                if kind not in RECORD_KINDS:
                    raise MemoryImportError(
                        f"{where}: 'kind' must be one of {', '.join(RECORD_KINDS)}, got {kind!r}"
                    )
                try:
                    rec = RECORD_KINDS[kind].from_dict(data)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(p) for p in err["loc"]) or "record"
                    raise MemoryImportError(f"{where}: invalid {kind}: {loc}: {err['msg']}") from exc
                rid = str(getattr(rec, "id", ""))
                if (kind, rid) in seen:
                    raise MemoryImportError(f"{where}: duplicate {kind} id {rid}")
                seen.add((kind, rid))
                out[kind].append(rec)
        return out

    def import_jsonl(self, path: str | os.PathLike[str]) -> TransferReport:
        records = self.read_jsonl(path)
        cases = [r for r in records["case"] if isinstance(r, Case)]
        rules = [r for r in records["rule"] if isinstance(r, Rule)]
        exposures = [r for r in records["exposure"] if isinstance(r, Exposure)]
        with self._store.writing(f"importing {os.fspath(path)}"):
            before = self._snapshot(cases, rules, exposures)
            try:
                if cases:
                    self.cases.put_raw(cases)
                self.rules.put_raw(rules)
                self.rules.put_exposures(exposures)
            except BaseException:
                self._restore(before, cases, rules, exposures)
                raise
        return TransferReport(
            path=os.fspath(path), cases=len(cases), rules=len(rules), exposures=len(exposures)
        )

    def _snapshot(
        self, cases: list[Case], rules: list[Rule], exposures: list[Exposure]
    ) -> dict[str, dict[str, str]]:
        """The stored JSON of the records an import would overwrite, by collection and id."""
        snap: dict[str, dict[str, str]] = {}
        for name, recs in ((CASES, cases), (RULES, rules), (EXPOSURES, exposures)):
            ids = [r.id for r in recs]
            found: dict[str, str] = {}
            col = self._store.collection(name)
            for i in range(0, len(ids), 500):
                got = col.get(ids=ids[i : i + 500], include=["documents"])
                found.update(zip(got["ids"], got["documents"] or [], strict=True))
            snap[name] = found
        return snap

    def _restore(
        self,
        before: dict[str, dict[str, str]],
        cases: list[Case],
        rules: list[Rule],
        exposures: list[Exposure],
    ) -> None:
        for name, recs in ((CASES, cases), (RULES, rules), (EXPOSURES, exposures)):
            new_ids = [r.id for r in recs if r.id not in before[name]]
            if new_ids:
                self._store.collection(name).delete(ids=new_ids)
        self.cases.clear_cache()
        self.cases.put_raw([Case.from_json(d) for d in before[CASES].values()])
        self.rules.put_raw([Rule.from_json(d) for d in before[RULES].values()])
        self.rules.put_exposures([Exposure.from_json(d) for d in before[EXPOSURES].values()])

    # -- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._store.release()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory({self.location!r}, embedding={self.embedding!r})"


def open_memory(
    location: str | os.PathLike[str] | None = None,
    *,
    embedding: str | None = None,
    rule_threshold: int | None = None,
    retry_s: float | None = None,
) -> Memory:
    """Open (creating if needed) the memory at a folder or Chroma server URL.

    `embedding`: "hashing" (default), "hashing-<dim>" or "st:<local sentence-transformers model>"
    (else $KERNELWRIGHT_EMBEDDING). `rule_threshold`: the count from which rules are injected
    (else $KERNELWRIGHT_RULE_THRESHOLD, else 3). `retry_s`: for a server, how long one request may
    keep failing transiently before a read or write fails (else $KERNELWRIGHT_MEMORY_RETRY_S, else 60;
    memory/http_retry.py).
    """
    loc = resolve_location(location)
    if rule_threshold is None:
        rule_threshold = _rule_threshold()
    store = get_store(loc, make_embedder(embedding), retry_s=retry_s)
    return Memory(store, rule_threshold=rule_threshold)


def _rule_threshold() -> int:
    raw = os.environ.get(ENV_RULE_THRESHOLD, "").strip()
    try:
        return int(raw) if raw else DEFAULT_THRESHOLD
    except ValueError as exc:
        raise ValueError(f"{ENV_RULE_THRESHOLD}={raw!r} is not an integer") from exc


def missing_folder(location: str | os.PathLike[str] | None) -> str | None:
    """The resolved folder when `location` names a memory folder that does not exist, else None. Reading
    commands ask first: opening a memory makes its folder, and reading must make nothing."""
    loc = resolve_location(location)
    if loc.startswith(("http://", "https://")) or Path(loc).exists():
        return None
    return loc


def empty_stats(location: str, embedding: str | None = None) -> MemoryStats:
    """The stats of a memory that does not exist yet: nothing in it."""
    return MemoryStats(
        location=location,
        embedding=make_embedder(embedding).describe(),
        cases=0,
        rules=0,
        rules_injectable=0,
        rule_threshold=_rule_threshold(),
        exposures=0,
        exists=False,
    )


def export_salvaged(location: str, path: str | os.PathLike[str]) -> TransferReport:
    """Write the records a damaged memory folder still holds (memory.damage.salvage_documents) as a JSONL
    export that `import_jsonl` accepts; records that no longer parse are left out."""
    from kernelwright.memory.damage import salvage_documents

    docs = salvage_documents(Path(location))
    kinds: dict[str, tuple[str, type[MemoryRecord]]] = {
        CASES: ("case", Case),
        RULES: ("rule", Rule),
        EXPOSURES: ("exposure", Exposure),
    }
    report = TransferReport(path=os.fspath(path))
    if not any(docs.values()):
        return report  # nothing to save: no empty file is left where the user expects an export
    tmp = Path(f"{os.fspath(path)}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for collection, (kind, cls) in kinds.items():
            for doc in docs.get(collection, []):
                try:
                    rec = cls.from_json(doc)
                except (ValidationError, ValueError):
                    continue
                data: dict[str, Any] = {"kind": kind, **rec.model_dump(mode="json")}
                fh.write(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
                setattr(report, f"{kind}s", getattr(report, f"{kind}s") + 1)
    os.replace(tmp, path)
    return report
