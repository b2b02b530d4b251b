"""Export/import (JSONL round trip, validation) and the `kernelwright memory` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.cli.main import main
from kernelwright.hardware.result import Versions
from kernelwright.memory import Case, MemoryImportError, RuleCandidate, open_memory
from kernelwright.tasks.task import TaskSignature

MM = TaskSignature(
    op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123], [123, 77]], input_dtypes=["float32"]
)
V = Versions(torch="2.13.0", triton="3.6.0", python="3.11.9")


def fill(loc: Path) -> None:
    with open_memory(loc) as m:
        root = m.cases.add(
            Case.from_attempt(
                signature=MM,
                code="# kernelwright: family=matmul design=a\n",
                correct=True,
                speedup=1.3,
                hardware="h",
                versions=V,
            )
        )
        m.cases.add(
            Case.from_attempt(
                signature=MM, code="k2", correct=True, speedup=1.9, parent=root, hardware="h", versions=V
            )
        )
        m.cases.add(
            Case.from_attempt(signature=MM, code="k3", correct=False, parent=root, hardware="h", versions=V)
        )
        for n in range(3):
            m.rules.add(
                RuleCandidate(
                    text="You cannot use tl.dot with block dimensions below 16",
                    error_kind="compile_error",
                    error=f"AssertionError: first input shape ([constexpr[{n + 2}]]) must be >= 16!",
                    op_families=["matmul"],
                    versions=V,
                    case_id=f"c{n}",
                )
            )
        m.rules.add(
            RuleCandidate(
                text="You cannot index a block with a Python list",
                error_kind="compile_error",
                error="TypeError: list",
            )
        )
        rid = m.rules.all()[0].id
        m.rules.record_rule_exposure([rid], failed=False, op_families=["matmul"], hardware="h")
        m.rules.record_rule_exposure([], failed=True, op_families=["matmul"], hardware="h")


def test_export_import_export_is_byte_identical(tmp_path: Path) -> None:
    fill(tmp_path / "a")
    first, second = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    with open_memory(tmp_path / "a") as m:
        rep = m.export_jsonl(first)
    assert (rep.cases, rep.rules, rep.exposures) == (3, 2, 2)
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["case"] * 3 + ["rule"] * 2 + ["exposure"] * 2
    with open_memory(tmp_path / "b") as m:
        m.import_jsonl(first)
        m.export_jsonl(second)
        # Imported records keep their scores and links, and are searchable.
        root = next(c for c in m.cases.iter_all() if c.parent_id is None)
        assert len(m.cases.children(root.id)) == 2
        # Both correct cases are "effective"; the root's downstream score (with its children) is higher.
        assert [g.case.speedup for g in m.cases.search(MM, hardware="h", k=3)] == [1.3, 1.9, None]
    assert first.read_bytes() == second.read_bytes()


def test_import_validates_everything_before_writing(tmp_path: Path) -> None:
    fill(tmp_path / "a")
    good = tmp_path / "good.jsonl"
    with open_memory(tmp_path / "a") as m:
        m.export_jsonl(good)
    lines = good.read_text().splitlines()
    broken = lines[:4] + ['{"kind": "rule", "text": "Always unroll loops"}'] + lines[4:]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(broken) + "\n")
    with open_memory(tmp_path / "b") as m:
        with pytest.raises(MemoryImportError, match=r"bad\.jsonl:5: invalid rule: text: .*You cannot"):
            m.import_jsonl(bad)
        assert (m.cases.count(), m.rules.count(), m.rules.exposure_count()) == (0, 0, 0)
        for text, msg in [
            ("{not json", "not valid JSON"),
            ('{"kind": "note"}', "'kind' must be one of"),
            ("[1, 2]", "expected a JSON object"),
            (lines[0] + "\n" + lines[0], "duplicate case id"),
        ]:
            bad.write_text(text + "\n")
            with pytest.raises(MemoryImportError, match=msg):
                m.import_jsonl(bad)
        assert m.cases.count() == 0
        with pytest.raises(MemoryImportError, match="cannot read"):
            m.import_jsonl(tmp_path / "missing.jsonl")
        # Importing twice overwrites by id instead of duplicating.
        m.import_jsonl(good)
        m.import_jsonl(good)
        assert (m.cases.count(), m.rules.count(), m.rules.exposure_count()) == (3, 2, 2)


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loc = tmp_path / "mem"
    fill(loc)
    assert main(["memory", "stats", "--memory", str(loc), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["cases"] == 3 and stats["rules"] == 2 and stats["rules_injectable"] == 1
    assert stats["outcomes"] == {"effective": 2, "failed": 1}

    assert main(["memory", "stats", "--memory", str(loc)]) == 0
    assert "rules      2  (1 offered: at or over the threshold 3, or certain)" in capsys.readouterr().out

    assert main(["memory", "rules", "--memory", str(loc), "--json"]) == 0
    rules = json.loads(capsys.readouterr().out)
    assert [r["count"] for r in rules] == [3]
    assert rules[0]["effect"]["with_attempts"] == 1 and rules[0]["effect"]["rate_without"] == 1.0
    assert main(["memory", "rules", "--memory", str(loc), "--all"]) == 0
    out = capsys.readouterr().out
    assert "You cannot index a block with a Python list" in out and "fail 0% with (1)" in out

    exported = tmp_path / "x.jsonl"
    assert main(["memory", "export", str(exported), "--memory", str(loc)]) == 0
    assert "exported 3 cases, 2 rules, 2 exposures" in capsys.readouterr().out
    assert main(["memory", "import", str(exported), "--memory", str(tmp_path / "other"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cases"] == 3

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "case", "correct": "maybe"}\n')
    assert main(["memory", "import", str(bad), "--memory", str(loc)]) == 1
    assert "bad.jsonl:1: invalid case: correct" in capsys.readouterr().err

    assert main(["memory", "prune", "--memory", str(loc), "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == []
    # forget: a rule learned from a fault that was not the kernel's goes by id; an unknown id deletes nothing
    assert main(["memory", "rules", "--memory", str(loc), "--all", "--json"]) == 0
    ids = [r["id"] for r in json.loads(capsys.readouterr().out)]
    assert main(["memory", "forget", ids[0], "rule-nosuch", "--memory", str(loc)]) == 1
    assert "no rule or case rule-nosuch here" in capsys.readouterr().err
    assert main(["memory", "forget", ids[0], "--memory", str(loc)]) == 0
    assert f"forgot 1 rule(s), 0 case(s)\n  {ids[0]}" in capsys.readouterr().out
    assert main(["memory", "rules", "--memory", str(loc), "--all", "--json"]) == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ids[1:]
    # ... and a case judged wrongly (its id from `export`), alone or with rules
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    case_ids = [r["id"] for r in records if r["kind"] == "case"]
    assert main(["memory", "forget", case_ids[0], "--memory", str(loc), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "forgotten": [case_ids[0]],
        "rules": [],
        "cases": [case_ids[0]],
    }
    assert main(["memory", "stats", "--memory", str(loc), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cases"] == 2
    assert main(["memory", "stats", "--memory", str(tmp_path / "afile.txt")]) == 0  # a new, empty memory
    capsys.readouterr()
    (tmp_path / "plainfile").write_text("x")
    assert main(["memory", "stats", "--memory", str(tmp_path / "plainfile")]) == 1
    assert "not a folder" in capsys.readouterr().err


def test_relabel_brings_a_memory_from_before_ties_to_todays_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cases written before ties were labelled keep "partial" for a 0.7% step until `memory relabel`."""
    loc = tmp_path / "mem"
    with open_memory(loc) as m:
        root = m.cases.add(Case.from_attempt(signature=MM, code="r", correct=True, speedup=3.6, hardware="h"))
        step = Case.from_attempt(
            signature=MM, code="s", correct=True, speedup=3.626, parent=root, hardware="h"
        )
        win = Case.from_attempt(signature=MM, code="w", correct=True, speedup=3.8, parent=root, hardware="h")
        assert (step.outcome, win.outcome) == ("tie", "effective")
        m.cases.add_many([step.model_copy(update={"outcome": "partial"}), win])  # as written before ties
    assert main(["memory", "relabel", "--memory", str(loc), "--dry-run"]) == 0
    assert "would relabel 1 of 3 cases\n  partial -> tie: 1" in capsys.readouterr().out
    with open_memory(loc) as m:
        assert m.cases.get(step.id).outcome == "partial"  # a dry run writes nothing
    assert main(["memory", "relabel", "--memory", str(loc), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "dry_run": False,
        "changed": 1,
        "moves": {"partial -> tie": 1},
    }
    with open_memory(loc) as m:
        got = m.cases.get(step.id)
        assert got.outcome == "tie" and m.cases.count_where({"outcome": "partial"}) == 0
        assert got.downstream == pytest.approx(step.downstream) and got.code == "s"
        assert m.cases.relabel() == []  # labelled as a case written now would be: nothing left to change
