"""Memory against a real Chroma server: `chroma run` on a free loopback port, used over HTTP."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelwright.hardware.result import Versions
from kernelwright.memory import Case, RuleCandidate, open_memory
from kernelwright.nodes.context_builder import build_context
from kernelwright.providers.protocol import parse_sections
from kernelwright.tasks.task import Task, TaskSignature

SIG = TaskSignature(
    op_families=["softmax"], ops=["aten._softmax"], input_shapes=[[7, 333]], input_dtypes=["float32"]
)
V = Versions(torch="2.13.0", triton="3.6.0")


def test_memory_over_http(chroma_server: str, tmp_path: Path) -> None:
    mem = open_memory(chroma_server)
    try:
        root = mem.cases.add(
            Case.from_attempt(
                signature=SIG,
                code="# kernelwright: family=softmax design=rowwise config=BLOCK=512\n",
                correct=True,
                speedup=1.4,
                hardware="nvidia-h100",
                idea="one row per program",
            )
        )
        child = mem.cases.add(
            Case.from_attempt(
                signature=SIG,
                code="# kernelwright: family=softmax design=online\n",
                correct=True,
                speedup=2.1,
                parent=root,
                hardware="nvidia-h100",
            )
        )
        mem.cases.add(
            Case.from_attempt(signature=SIG, code="k", correct=True, speedup=5.0, hardware="amd-mi300x")
        )
        assert mem.cases.get(root.id).downstream == pytest.approx(0.5 * 1.4 + 0.35 * 0.5 * 1.5)
        assert [c.id for c in mem.cases.children(root.id)] == [child.id]
        for n in range(3):
            mem.rules.add(
                RuleCandidate(
                    text="You cannot reduce a row longer than BLOCK in a single tl.max",
                    error_kind="mismatch",
                    error=f"mismatch: max abs error {n}.5 at row {n}",
                    op_families=["softmax"],
                    versions=V,
                )
            )
        mem.rules.record_rule_exposure([mem.rules.all()[0].id], failed=False, op_families=["softmax"])
        stats = mem.stats()
        assert (stats.cases, stats.rules, stats.rules_injectable, stats.exposures) == (3, 1, 1, 1)

        task = Task(name="softmax", source="class Model: ...\n", signature=SIG)
        b = build_context(
            task, "small_step", parent_code="p", target={"name": "nvidia-h100"}, versions=V, memory=mem
        )
        sec = parse_sections(b.prompt)
        assert sec["rules"].body == "- You cannot reduce a row longer than BLOCK in a single tl.max"
        assert (
            'same_hardware="false"' in sec["experience"].body
            and 'same_hardware="true"' in sec["experience"].body
        )

        exported = tmp_path / "server.jsonl"
        mem.export_jsonl(exported)
    finally:
        mem.close()
    # The server's data moves to a local folder and back out unchanged.
    with open_memory(tmp_path / "local") as local:
        local.import_jsonl(exported)
        local.export_jsonl(tmp_path / "local.jsonl")
    assert exported.read_bytes() == (tmp_path / "local.jsonl").read_bytes()


SERVER_WRITER = """
import os, sys, time
from kernelwright.hardware.result import Versions
from kernelwright.memory import Case, RuleCandidate, open_memory
from kernelwright.tasks.task import TaskSignature

url, sync, tag, root_id, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
sig = TaskSignature(op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123]], input_dtypes=["float32"])
v = Versions(triton="3.6.0", torch="2.13.0")
mem = open_memory(url)
root = mem.cases.get(root_id)
open(os.path.join(sync, tag + ".ready"), "w").close()
while not os.path.exists(os.path.join(sync, "go")):
    time.sleep(0.01)
prev = root
for i in range(n):
    parent = root if i % 2 == 0 else prev
    c = Case.from_attempt(signature=sig, code=f"# {tag} {i}", correct=True, speedup=1.0 + i / 100,
                          parent=parent, hardware="h", run_id=tag)
    mem.cases.add(c)
    prev = c if i % 2 else prev
    # every writer learns the same rule at every step: its count must end at writers x steps
    mem.rules.add(RuleCandidate(text="You cannot use recursion inside a kernel (shared)", error_kind="compile_error",
                                error="UnsupportedLanguageConstruct: recursion", versions=v, case_id=c.id))
    mem.rules.record_rule_exposure([], failed=i % 3 == 0, op_families=["matmul"], run_id=tag)
mem.close()
print("done", tag)
"""


def test_concurrent_writers_on_one_server_lose_nothing(chroma_server: str, tmp_path: Path) -> None:
    """Three processes write cases, rules and exposures to one `chroma run` at once; afterwards every case,
    every rule observation (counts) and every exposure is there, once."""
    writers, n = 3, 4
    with open_memory(chroma_server) as m:
        root = m.cases.add(
            Case.from_attempt(signature=SIG, code="root", correct=True, speedup=1.0, hardware="h")
        )
    script = tmp_path / "writer.py"
    script.write_text(SERVER_WRITER)
    sync = tmp_path / "sync"
    sync.mkdir()
    tags = [f"w{i}" for i in range(writers)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), chroma_server, str(sync), tag, root.id, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for tag in tags
    ]
    deadline = time.time() + 120
    while not all((sync / f"{t}.ready").exists() for t in tags):
        assert time.time() < deadline and all(p.poll() is None for p in procs), "a writer did not start"
        time.sleep(0.02)
    (sync / "go").touch()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        assert out.startswith("done")
    with open_memory(chroma_server) as m:
        assert m.cases.count() == 1 + writers * n
        assert m.rules.exposure_count() == writers * n
        rules = m.rules.all()
        shared = [r for r in rules if "(shared)" in r.text]
        assert len(shared) == 1, [r.text for r in shared]
        assert shared[0].count == writers * n
