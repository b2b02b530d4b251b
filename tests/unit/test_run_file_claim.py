"""run.json is written only by the run that claimed its folder (graphs/run_files.write_run_file): two runs
started into one folder at once, in two processes, both find it free; one claims it and writes run.json,
the other is refused and writes nothing."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

from kernelwright.graphs.run_files import RUN_FILE, RunFile, check_new_run_folder, write_run_file
from kernelwright.nodes.run_folder import RUN_ID_FILE, RunFolderTaken


def _start_run(folder: str, run_id: str, barrier, results) -> None:
    check_new_run_folder(folder)  # both find the folder free (as run_optimize checks before its model)
    barrier.wait()  # then both write at once
    try:
        write_run_file(
            folder, RunFile(thread_id=run_id, input={"task_path": "t.py"}, context={"who": run_id})
        )
        results.put((run_id, "wrote"))
    except RunFolderTaken as exc:
        results.put((run_id, f"refused: {exc}"))


def test_two_runs_racing_into_one_folder_one_writes_the_other_is_refused(tmp_path):
    ctx = mp.get_context("spawn")  # separate processes, as two `kernelwright optimize` would be
    for attempt in range(2):  # two races, each in a fresh folder
        folder = tmp_path / f"run{attempt}"
        folder.mkdir()
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [
            ctx.Process(target=_start_run, args=(str(folder), f"run-{who}", barrier, results)) for who in "ab"
        ]
        for p in procs:
            p.start()
        got = dict(results.get(timeout=60) for _ in procs)
        for p in procs:
            p.join(30)
        winners = [r for r, what in got.items() if what == "wrote"]
        assert len(winners) == 1, got
        loser = next(r for r in got if r != winners[0])
        assert got[loser].startswith("refused: ") and f"already holds run {winners[0]}" in got[loser], got
        assert (folder / RUN_ID_FILE).read_text().strip() == winners[0]
        written = json.loads((folder / RUN_FILE).read_text())
        assert written["thread_id"] == winners[0] and written["context"] == {"who": winners[0]}
        assert sorted(p.name for p in Path(folder).iterdir()) == [RUN_ID_FILE, RUN_FILE]  # no temp file left


def test_a_run_that_never_started_leaves_the_folder_to_the_next(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    write_run_file(folder, RunFile(thread_id="stale", input={}, context={}))  # stopped before its checkpoint
    check_new_run_folder(folder)
    write_run_file(folder, RunFile(thread_id="next", input={}, context={}))
    assert json.loads((folder / RUN_FILE).read_text())["thread_id"] == "next"
    assert (folder / RUN_ID_FILE).read_text().strip() == "next"
