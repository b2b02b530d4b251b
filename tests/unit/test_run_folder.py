"""One run, one folder (nodes/run_folder.py, Context.default_run_dir) and the Context schema that
LangGraph Studio's panel shows."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from pydantic import TypeAdapter

from kernelwright.graphs.run_files import check_new_run_folder
from kernelwright.nodes.run_context import Context
from kernelwright.nodes.run_folder import RUN_ID_FILE, RunFolderTaken, claim, claim_run_folder, folder_owner


def _uuid7_like(ms: int, tail: int) -> str:
    """A uuid7 as Studio makes thread ids: 48 bits of milliseconds first, random bits after."""
    return str(uuid.UUID(int=(ms << 80) | (0x7 << 76) | (0x8 << 60) | tail))


def test_threads_started_in_the_same_minute_get_their_own_default_folders(tmp_path):
    ctx = Context(runs_root=str(tmp_path))
    a, b = _uuid7_like(1_764_800_000_000, 1), _uuid7_like(1_764_800_000_500, 2)
    assert a.replace("-", "")[:8] == b.replace("-", "")[:8]  # the ids Studio gives threads in one minute
    assert ctx.default_run_dir("09_softmax", a) != ctx.default_run_dir("09_softmax", b)
    assert ctx.default_run_dir("09_softmax", a) == ctx.default_run_dir("09_softmax", a)  # resumable


def test_a_folder_is_claimed_by_one_run(tmp_path):
    folder = tmp_path / "run"
    assert folder_owner(folder) is None
    assert claim(folder, "run-a") and (folder / RUN_ID_FILE).read_text().strip() == "run-a"
    assert claim(folder, "run-a")  # the same run again (a resume)
    assert not claim(folder, "run-b")
    with pytest.raises(RunFolderTaken, match="already holds run run-a"):
        claim_run_folder(folder, "run-b", named=True)
    moved = claim_run_folder(folder, "run-b", named=False)
    assert moved.name == "run-2" and folder_owner(moved) == "run-b" and folder_owner(folder) == "run-a"


def test_runs_claiming_one_folder_at_once_get_one_each(tmp_path):
    got: list[str] = []
    lock = threading.Lock()

    def start(run_id: str) -> None:
        folder = claim_run_folder(tmp_path / "task-1234abcd", run_id, named=False)
        with lock:
            got.append(folder.name)

    threads = [threading.Thread(target=start, args=(f"r{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8


def test_folders_written_before_the_claim_file_hold_their_run(tmp_path):
    cli = tmp_path / "cli"
    cli.mkdir()
    (cli / "run.json").write_text(json.dumps({"thread_id": "abc", "input": {}, "context": {}}))
    assert folder_owner(cli) == "abc" and claim(cli, "abc") and not claim(tmp_path / "cli", "xyz")
    old = tmp_path / "old"
    old.mkdir()
    (old / "evaluations.jsonl").write_text("{}\n")
    assert folder_owner(old) == "an earlier run" and not claim(old, "new")
    with pytest.raises(RunFolderTaken, match="already holds an earlier run"):
        check_new_run_folder(old)
    # a run.json whose run never reached a checkpoint holds nothing: a new run may take the folder
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "run.json").write_text(json.dumps({"thread_id": "gone", "input": {}, "context": {}}))
    (stale / RUN_ID_FILE).write_text("gone\n")
    check_new_run_folder(stale)
    assert not (stale / RUN_ID_FILE).exists()


def test_studio_shows_each_setting_with_its_description_and_default(monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_BUDGET", "5")
    schema = TypeAdapter(Context).json_schema()
    props = schema["properties"]
    assert "chat_model" not in props and "timing_source" not in props and "required" not in schema
    assert props["budget"]["default"] == 5 and "KERNELWRIGHT_BUDGET" in props["budget"]["description"]
    assert props["device"]["default"] == "auto" and props["memory"]["default"] is None
    assert all(p.get("description") for p in props.values()), [
        k for k, p in props.items() if not p.get("description")
    ]
    assert set(props) == set(Context().to_json())
