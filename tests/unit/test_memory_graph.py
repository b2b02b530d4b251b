"""The experience graph on a real Chroma PersistentClient in a temp folder."""

from __future__ import annotations

from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings

from kernelwright.memory import Case, MemoryLocationError, open_memory, resolve_location
from kernelwright.memory.graph import CASES
from kernelwright.tasks.task import TaskSignature

MM = TaskSignature(
    op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123], [123, 77]], input_dtypes=["float32"]
)
SOFTMAX = TaskSignature(
    op_families=["softmax"], ops=["aten._softmax"], input_shapes=[[7, 333]], input_dtypes=["float32"]
)
HW = "nvidia-h100"


def case(
    sig: TaskSignature = MM,
    *,
    speedup: float | None = 1.2,
    correct: bool = True,
    parent: Case | None = None,
    hw: str = HW,
    **kw,
) -> Case:  # noqa: ANN003
    code = kw.pop("code", "# kernelwright: family=matmul design=tiled config=BLOCK_M=64\nimport triton\n")
    return Case.from_attempt(
        signature=sig, code=code, correct=correct, speedup=speedup, parent=parent, hardware=hw, **kw
    )


@pytest.fixture
def mem(tmp_path: Path):  # noqa: ANN201
    m = open_memory(tmp_path / "mem")
    yield m
    m.close()


def test_location_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_MEMORY", str(tmp_path / "from_env"))
    assert resolve_location(None) == str((tmp_path / "from_env").resolve())
    monkeypatch.delenv("KERNELWRIGHT_MEMORY")
    assert resolve_location(None) == str(Path("~/.kernelwright").expanduser().resolve())
    assert resolve_location("http://127.0.0.1:8123/") == "http://127.0.0.1:8123"
    (tmp_path / "afile").write_text("x")
    with pytest.raises(MemoryLocationError, match="not a folder"):
        open_memory(tmp_path / "afile")
    with pytest.raises(MemoryLocationError, match="cannot reach"):
        open_memory("http://127.0.0.1:9")  # discard port: nothing listens


def test_downstream_scores_follow_the_lineage(mem) -> None:  # noqa: ANN001
    root = mem.cases.add(case(speedup=1.5))
    child = mem.cases.add(case(speedup=1.8, parent=root))  # r = 1.2
    grandchild = mem.cases.add(case(speedup=1.71, parent=child))  # r = 0.95
    failed = mem.cases.add(case(correct=False, speedup=None, parent=root))  # r = 0
    d_gc = 0.5 * 0.95
    d_child = 0.5 * 1.2 + 0.35 * d_gc
    d_root = 0.5 * 1.5 + 0.35 * (d_child + 0.0)
    assert mem.cases.get(grandchild.id).downstream == pytest.approx(d_gc)
    assert mem.cases.get(child.id).downstream == pytest.approx(d_child)
    assert mem.cases.get(root.id).downstream == pytest.approx(d_root)
    assert mem.cases.get(failed.id).outcome == "failed"
    assert [c.id for c in mem.cases.children(root.id)] == [child.id, failed.id]
    assert [c.id for c in mem.cases.ancestors(grandchild.id)] == [root.id, child.id]
    assert mem.cases.get(grandchild.id).outcome == "ineffective"
    # A lost ancestor update (a crash between the two writes of an add) is repaired by rescore().
    with mem._store.writing():
        mem._store.collection(CASES).update(ids=[root.id, child.id], metadatas=[{"d": 9.0}, {"d": 0.0}])
    assert mem.cases.get(root.id).downstream == 9.0
    assert mem.cases.rescore() == 2
    assert mem.cases.get(root.id).downstream == pytest.approx(d_root)
    assert mem.cases.get(child.id).downstream == pytest.approx(d_child)
    assert mem.cases.rescore() == 0


def test_batch_insert_scores_in_batch_and_existing_ancestors(mem) -> None:  # noqa: ANN001
    root = mem.cases.add(case(speedup=1.0))
    a = case(speedup=2.0, parent=root)
    b = case(speedup=3.0, parent=a)  # r = 1.5
    c = case(speedup=1.0, parent=a)  # r = 0.5
    stored = mem.cases.add_many([b, c, a])  # children listed before their parent on purpose
    by_id = {s.id: s for s in stored}
    d_a = 0.5 * 2.0 + 0.35 * (0.5 * 1.5 + 0.5 * 0.5)
    assert by_id[a.id].downstream == pytest.approx(d_a)
    assert mem.cases.get(a.id).downstream == pytest.approx(d_a)
    assert mem.cases.get(root.id).downstream == pytest.approx(0.5 * 1.0 + 0.35 * d_a)
    with pytest.raises(ValueError, match="already in memory"):
        mem.cases.add(mem.cases.get(a.id))
    assert mem.cases.count() == 4


def test_search_filters_ranks_and_marks_other_hardware(mem) -> None:  # noqa: ANN001
    effective = case(speedup=1.6, idea="effective one")
    partial = case(speedup=1.02, idea="partial one")
    negative = case(speedup=0.5, idea="negative one")
    failed = case(correct=False, speedup=None, idea="failed one")
    unmeasured = case(speedup=None, idea="unmeasured one")
    strong = case(speedup=1.6, idea="effective, tighter timing", confidence=1.0)
    weak = case(speedup=1.6, idea="effective, loose timing", confidence=0.2)
    other_hw = case(speedup=3.0, idea="fast elsewhere", hw="amd-mi300x")
    other_hw_failed = case(correct=False, speedup=None, idea="broken elsewhere", hw="amd-mi300x")
    softmax = case(
        SOFTMAX, speedup=4.0, idea="a softmax", code="# kernelwright: family=softmax design=rowwise\n"
    )
    mem.cases.add_many(
        [effective, partial, negative, failed, unmeasured, strong, weak, other_hw, other_hw_failed, softmax]
    )

    got = mem.cases.search(MM, op_families=["matmul"], hardware=HW, k=10)
    ids = [g.case.id for g in got]
    assert softmax.id not in ids and other_hw.id not in ids
    labels = [g.case.outcome for g in got]
    assert labels == ["effective"] * 3 + ["partial", "unmeasured", "negative", "failed"]
    # Within a label: d x confidence decides.
    assert ids.index(strong.id) < ids.index(weak.id)
    assert all(g.same_hardware for g in got)

    cross = mem.cases.search(MM, op_families=["matmul"], hardware=HW, other_hardware=True, k=5)
    assert [g.case.id for g in cross] == [other_hw.id, other_hw_failed.id]  # correct first
    assert not any(g.same_hardware for g in cross)
    only_correct = mem.cases.search(MM, hardware=HW, other_hardware=True, correct_only=True, k=5)
    assert [g.case.id for g in only_correct] == [other_hw.id]

    assert [g.case.id for g in mem.cases.search(MM, outcomes=["failed"], hardware=HW, k=5)] == [failed.id]
    excluded = mem.cases.search(
        MM, op_families=["matmul"], hardware=HW, exclude_ids=[effective.id, strong.id, weak.id], k=1
    )
    assert excluded[0].case.id == partial.id
    # Without filters a softmax query finds the softmax case first among the best-labelled ones.
    top = mem.cases.search(SOFTMAX, op_families=["softmax"], k=1)
    assert top[0].case.id == softmax.id


def test_search_widens_its_pool_until_enough_match(mem) -> None:  # noqa: ANN001
    # Many near-identical matmul cases on HW, one softmax case on another machine: the 8 nearest are
    # all HW cases, so the pool must widen (8 -> 32 -> 128) to find the cross-hardware one.
    mem.cases.add_many([case(speedup=1.1 + i / 1000) for i in range(60)])
    lone = mem.cases.add(case(SOFTMAX, speedup=1.3, hw="amd-mi300x"))
    got = mem.cases.search(MM, hardware=HW, other_hardware=True, k=3, pool=8)
    assert [g.case.id for g in got] == [lone.id]
    # With the widening capped below the memory's size, a far-away match is (documented as) missed.
    assert mem.cases.search(MM, hardware=HW, other_hardware=True, k=3, pool=8, max_pool=32) == []


def test_cached_filter_fields_follow_other_processes_writes(tmp_path: Path) -> None:
    import subprocess
    import sys

    loc = tmp_path / "mem"
    with open_memory(loc) as m:
        a = m.cases.add(case(speedup=1.5, idea="a"))
        b = m.cases.add(case(speedup=1.6, idea="b"))
        assert [g.case.id for g in m.cases.search(MM, hardware=HW, k=2)] == [b.id, a.id]
        code = (
            "import sys\n"
            "from kernelwright.memory import Case, open_memory\n"
            "m = open_memory(sys.argv[1]); a = m.cases.get(sys.argv[2])\n"
            "m.cases.add(Case.from_attempt(signature=a.signature, code='c', correct=True, speedup=3.0, parent=a, hardware=a.hardware))\n"
        )
        subprocess.run([sys.executable, "-c", code, str(loc), a.id], check=True, timeout=120)
        # a's downstream score rose in the other process (0.75 + 0.35 * 0.5 * 2.0); the cached
        # ranking fields are dropped and a now ranks first.
        got = m.cases.search(MM, hardware=HW, k=3)
        assert got[0].case.id == a.id
        assert got[0].case.downstream == pytest.approx(0.75 + 0.35)
        assert got[0].score == pytest.approx((0.75 + 0.35) * got[0].case.confidence)


def test_memory_persists_and_reopens_with_its_own_embedding(tmp_path: Path) -> None:
    loc = tmp_path / "mem"
    with open_memory(loc) as m:
        stored = m.cases.add(case(speedup=1.4))
    with open_memory(loc) as m:
        assert m.cases.get(stored.id) == stored
        assert m.embedding == "hashing-256"
    # A plain Chroma client rebuilds the collection's embedding function from its stored config
    # (not Chroma's default, which would download a model).
    client = chromadb.PersistentClient(path=str(loc), settings=Settings(anonymized_telemetry=False))
    col = client.get_collection(CASES)
    assert col.configuration_json["embedding_function"]["name"] == "kernelwright-hashing"
    assert col.query(query_texts=[MM.key()], n_results=1)["ids"][0] == [stored.id]
    client.close()  # type: ignore[attr-defined]
    with pytest.raises(MemoryLocationError, match="built with embedding"):
        open_memory(loc, embedding="hashing-64").cases.count()


def test_a_record_written_by_a_newer_version_still_loads(mem) -> None:  # noqa: ANN001
    c = case(speedup=1.3)
    mem.cases.add(c)
    with mem._store.writing():
        col = mem._store.collection(CASES)
        doc = col.get(ids=[c.id], include=["documents"])["documents"][0]
        newer = doc[:-1] + ',"schema_version":2,"profile_trace":{"sm_util":0.8}}'
        col.update(ids=[c.id], documents=[newer], embeddings=[[0.0] * 255 + [1.0]])
    assert mem.cases.get(c.id).speedup == pytest.approx(1.3)
    assert mem.cases.get(c.id).schema_version == 2


def test_search_ranks_the_task_s_own_cases_before_a_faster_distant_one(mem) -> None:  # noqa: ANN001
    """Near tasks first (tasks.similarity), most similar first: what won on this very task is not pushed
    out by a fast kernel of a merely related one, whatever its outcome and downstream score."""
    far = TaskSignature(
        op_families=["matmul"], ops=["aten.bmm"], input_shapes=[[64, 512, 512], [64, 512, 512]],
        input_dtypes=["bfloat16"],
    )  # fmt: skip
    fast_elsewhere = case(far, speedup=4.0, idea="fast on another matmul")
    own_partial = case(speedup=1.02, idea="this task, partial")
    own_root = case(speedup=1.3, idea="this task, root")
    own_best = case(speedup=1.6, parent=own_root, idea="this task, best")
    mem.cases.add_many([fast_elsewhere, own_partial, own_root, own_best])
    got = [g.case.id for g in mem.cases.search(MM, op_families=["matmul"], hardware=HW, k=4)]
    assert got[-1] == fast_elsewhere.id
    assert set(got[:3]) == {own_partial.id, own_root.id, own_best.id}
    assert got.index(own_partial.id) == 2  # among equally near cases the outcome label still decides
    # A store written before the signature was kept in metadata reads it from the records.
    with mem._store.writing():
        mem._store.collection(CASES).update(ids=got, metadatas=[{"sig": ""}] * len(got))
    mem.cases.facets.clear()
    again = [g.case.id for g in mem.cases.search(MM, op_families=["matmul"], hardware=HW, k=4)]
    assert again == got
    # Free-text queries keep the outcome-first order: the 4x case (effective, largest d) first.
    assert mem.cases.search("matmul", hardware=HW, k=1)[0].case.id == fast_elsewhere.id
