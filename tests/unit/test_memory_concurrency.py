"""Two processes writing to one memory folder at once lose nothing.

Chroma's local mode alone loses index entries under concurrent writers (each process writes back its
own view of the vector index); memory/store.py serialises writes and reloads stale views. This test
runs two real writer processes at once and then checks, from a third, that every case, rule count,
exposure and downstream score is there and that the vector index holds every case.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings

from kernelwright.memory import Case, open_memory
from kernelwright.memory.embedding import HashingEmbedding
from kernelwright.memory.graph import CASES
from kernelwright.memory.rules import EXPOSURES, RULES
from kernelwright.tasks.task import TaskSignature

N_CASES = 6
N_SHARED_RULES = 4
N_OWN_RULES = 3

WRITER = textwrap.dedent(
    """
    import os, sys, time
    from kernelwright.hardware.result import Versions
    from kernelwright.memory import Case, RuleCandidate, open_memory
    from kernelwright.tasks.task import TaskSignature

    loc, tag, root_id, n_cases, n_shared, n_own = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
    sig = TaskSignature(op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123]], input_dtypes=["float32"])
    v = Versions(triton="3.6.0", torch="2.13.0")
    shared_topics = ["recursion", "python lists", "string formatting", "global variables"]
    own_topics = {"alpha": ["tensor slicing", "dictionary lookups", "exceptions"],
                  "beta": ["closures", "generators", "keyword arguments"]}[tag]
    mem = open_memory(loc)
    root = mem.cases.get(root_id)
    prev = root
    # Line both writers up: say ready, wait for the go signal.
    open(os.path.join(loc, f"{tag}.ready"), "w").close()
    while not os.path.exists(os.path.join(loc, "go")):
        time.sleep(0.01)
    for i in range(n_cases):
        # Half the cases hang off the shared root (its downstream score is updated by both
        # processes), the other half form this process's own chain.
        parent = root if i % 2 == 0 else prev
        c = Case.from_attempt(signature=sig, code=f"# {tag} {i}", correct=True, speedup=1.0 + i / 100,
                              parent=parent, hardware="h", run_id=tag)
        mem.cases.add(c)
        prev = c if i % 2 else prev
        if i < n_shared:
            t = shared_topics[i]
            mem.rules.add(RuleCandidate(text=f"You cannot use {t} inside a kernel (shared)",
                                        error_kind="compile_error", error=f"UnsupportedLanguageConstruct: {t}",
                                        versions=v))
        if i < n_own:
            t = own_topics[i]
            mem.rules.add(RuleCandidate(text=f"You cannot rely on {t} in a launcher (own)",
                                        error_kind="runtime_error", error=f"RuntimeError: {t} went wrong",
                                        versions=v))
        mem.rules.record_rule_exposure([], failed=i % 3 == 0, op_families=["matmul"], run_id=tag)
    mem.close()
    print("done", tag)
    """
)


def test_two_writer_processes_lose_nothing(tmp_path: Path) -> None:
    loc = tmp_path / "shared"
    sig = TaskSignature(
        op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123]], input_dtypes=["float32"]
    )
    # Chroma writes a process's vector index back to disk every `sync_threshold` adds (default 1000);
    # a low threshold makes that happen many times here, which is where unsafe writers lose entries.
    client = chromadb.PersistentClient(path=str(loc), settings=Settings(anonymized_telemetry=False))
    for name in (CASES, RULES, EXPOSURES):
        client.create_collection(
            name,
            embedding_function=HashingEmbedding(),  # type: ignore[arg-type]
            metadata={"kernelwright_schema": 1, "embedding": "hashing-256"},
            configuration={"hnsw": {"space": "cosine", "sync_threshold": 2, "batch_size": 2}},
        )
    client.close()  # type: ignore[attr-defined]
    with open_memory(loc) as m:
        root = m.cases.add(
            Case.from_attempt(signature=sig, code="root", correct=True, speedup=1.0, hardware="h")
        )
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    args = [str(loc), None, root.id, str(N_CASES), str(N_SHARED_RULES), str(N_OWN_RULES)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *[tag if a is None else a for a in args]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("alpha", "beta")
    ]
    deadline = time.time() + 120
    while not all((loc / f"{tag}.ready").exists() for tag in ("alpha", "beta")):
        assert time.time() < deadline and all(p.poll() is None for p in procs), "a writer did not start"
        time.sleep(0.02)
    (loc / "go").touch()
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
        assert out.startswith("done")

    # Check from a fresh process view (this process last saw the memory before the writers ran).
    with open_memory(loc) as m:
        assert m.cases.count() == 1 + 2 * N_CASES
        assert m.rules.exposure_count() == 2 * N_CASES
        rules = m.rules.all()
        shared = [r for r in rules if "(shared)" in r.text]
        own = [r for r in rules if "(own)" in r.text]
        assert len(shared) == N_SHARED_RULES and all(r.count == 2 for r in shared)
        assert len(own) == 2 * N_OWN_RULES and all(r.count == 1 for r in own)
        # Every case is in the vector index, not only in the SQL tables.
        with m._store.reading():
            col = m._store.collection(CASES)
            hits = col.query(query_texts=[sig.key()], n_results=1 + 2 * N_CASES, include=[])["ids"][0]
            assert len(set(hits)) == 1 + 2 * N_CASES
            for tag in ("alpha", "beta"):
                filtered = col.query(
                    query_texts=[sig.key()], n_results=N_CASES, where={"run_id": tag}, include=[]
                )
                assert len(filtered["ids"][0]) == N_CASES
        # Downstream scores are consistent everywhere, the shared root included.
        cases = {c.id: c for c in m.cases.iter_all()}
        for c in cases.values():
            kids = [k for k in cases.values() if k.parent_id == c.id]
            expected = 0.5 * (c.step_ratio or 0.0) + 0.35 * sum(k.downstream for k in kids)
            assert c.downstream == pytest.approx(expected), c.id
        assert (
            len([k for k in cases.values() if k.parent_id == root.id]) == N_CASES + 2
        )  # evens + chain heads
