"""`kernelwright bench` as a user runs it: real coordinator and worker processes, the offline writer at
budget 1-3 on tiny tasks (CPU, Triton interpreter), a real Chroma memory in tmp.

The module's bench is interrupted (SIGTERM) once its first two tasks are recorded, then resumed (the resumed
coordinator runs in the test process, which has imported what it needs, its worker a process): finished
tasks are not run again (their run directories are byte-for-byte unchanged and each has one row in
tasks.jsonl), a task that cannot be judged (harness_error) or does not load stays recorded as such, and
the three report files are written, the HTML rendering in headless Chromium. Slow tests kill the
coordinator (SIGKILL) mid-task, kill a worker, share the queue between two workers, and stop on a model
provider that keeps failing.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from kernelwright.bench.folder import LEDGER_FILE
from kernelwright.cli.main import main as cli_main
from kernelwright.nodes import resources
from tests import browser

ROOT = Path(__file__).resolve().parents[2]
KW = ROOT / ".venv" / "bin" / "kernelwright"
CANDIDATES = ROOT / "tests" / "kernels" / "candidates"

RANDOM_TASK = '''"""A different output on every call, whatever the RNG's seed: no candidate can be verified by value
(a harness_error)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.relu(x) + self.calls


def get_inputs():
    return [torch.randn(7, 123, 301)]


def get_small_inputs():
    return [torch.randn(5, 33, 77)]


def get_init_inputs():
    return []
'''


def _env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("KERNELWRIGHT_") and k != "OPENAI_BASE_URL"
    }
    env.update(LANGSMITH_TRACING="false", PYTHONUNBUFFERED="1", COLUMNS="200")
    return env


def make_suite(folder: Path, names: dict[str, str]) -> Path:
    """names: file stem -> "relu", "scale", "random" or "broken"."""
    folder.mkdir(parents=True)
    for stem, kind in names.items():
        target = folder / f"{stem}.py"
        if kind == "relu":
            shutil.copy(CANDIDATES / "task_relu.py", target)
        elif kind == "scale":
            shutil.copy(CANDIDATES / "task_scale.py", target)
        elif kind == "random":
            target.write_text(RANDOM_TASK)
        else:
            target.write_text("import torch\n\n\ndef get_inputs():\n    return []\n")
    return folder


def start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([str(KW), "bench", *args], stdout=out, stderr=subprocess.STDOUT, env=_env())


def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KW), "bench", *args], capture_output=True, text=True, timeout=timeout, env=_env()
    )


def run_here(*args: str) -> subprocess.CompletedProcess[str]:
    """`kernelwright bench ARGS` with its coordinator in this process, as the command's entry point calls it
    (its workers are processes as ever): this process has already imported what a coordinator takes seconds
    to import."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as env:
        for name in [k for k in os.environ if k not in _env()]:
            env.delenv(name)
        for name, value in _env().items():
            env.setenv(name, value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli_main(["bench", *args])
            finally:
                resources.close_all()
    return subprocess.CompletedProcess(["kernelwright", "bench", *args], code, out.getvalue(), err.getvalue())


def ledger(bench: Path) -> list[dict]:
    path = bench / LEDGER_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(condition, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the bench ended (status {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of a run directory: its bytes and modification time."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def workers_of(bench: Path) -> list[int]:
    """Live worker processes of this bench (their command line names the bench folder)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if b"kernelwright.bench.worker" in cmd and str(bench).encode() in cmd and state != "Z":
            pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """A bench of four tasks interrupted after two, then resumed: (bench folder, what each step saw)."""
    tmp = tmp_path_factory.mktemp("bench")
    suite = make_suite(
        tmp / "suite", {"01_random": "random", "02_relu": "relu", "03_broken": "broken", "04_scale": "scale"}
    )
    out, memory = tmp / "out", tmp / "memory"
    proc = start(str(suite), "--budget", "1", "--device", "cpu", "--memory", str(memory), "--out", str(out),
                 log=tmp / "first.log")  # fmt: skip
    try:
        wait_for(lambda: len(ledger(out)) >= 2, 300, "two tasks were recorded", proc)
        proc.send_signal(
            signal.SIGTERM
        )  # as a scheduler or `timeout` stops it; Ctrl-C (SIGINT) takes the same path
        first_status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    seen = {
        "first_status": first_status,
        "first_output": (tmp / "first.log").read_text(),
        "first_ledger": ledger(out),
        "partial_suite": json.loads((out / "suite.json").read_text()),
        "workers_after_interrupt": workers_of(out),
    }
    seen["before"] = {
        r["id"]: snapshot(out / r["run_dir"]) for r in seen["first_ledger"] if r["status"] != "load_error"
    }
    seen["resumed"] = run_here("--resume", str(out))
    seen["again"] = run_here("--resume", str(out))
    return out, seen


def test_an_interrupted_bench_stops_its_workers_and_says_how_to_continue(bench):
    out, seen = bench
    assert seen["first_status"] == 130, seen["first_output"]
    assert f"interrupted; continue with kernelwright bench --resume {out}" in seen["first_output"]
    assert seen["workers_after_interrupt"] == []
    # progress: a line per finished task, with what is done, running, failed and queued, and the time left
    assert "[1/4] suite/01_random: harness error (1 evaluations" in seen["first_output"]
    assert re.search(r"\| \d/4 done, \d running, 1 failed, \d queued; ~\d+ s left", seen["first_output"])
    partial = seen["partial_suite"]
    assert partial["bench"]["finished"] is False and partial["bench"]["tasks_total"] == 4
    recorded = {r["id"] for r in seen["first_ledger"]}
    assert {"suite/01_random", "suite/02_relu"} <= recorded
    assert [t["status"] != "pending" for t in partial["tasks"]] == [
        t["id"] in recorded for t in partial["tasks"]
    ]


def test_resume_runs_only_the_unfinished_tasks(bench):
    out, seen = bench
    resumed = seen["resumed"]
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # one task does not load
    n_before = len(seen["first_ledger"])
    assert f"4 tasks, {n_before} finished earlier, {4 - n_before} to run" in resumed.stdout
    rows = ledger(out)
    # every task recorded exactly once: nothing finished was run again, nothing final retried
    assert Counter(r["id"] for r in rows) == {
        f"suite/{n}": 1 for n in ("01_random", "02_relu", "03_broken", "04_scale")
    }
    assert rows[:n_before] == seen["first_ledger"]
    for ident, files in seen["before"].items():
        run_dir = out / "runs" / ident
        assert snapshot(run_dir) == files, f"{ident} was touched by the resume"
    status = {r["id"]: r["status"] for r in rows}
    assert status == {"suite/01_random": "harness_error", "suite/02_relu": "correct", "suite/03_broken": "load_error",
                      "suite/04_scale": "correct"}  # fmt: skip
    # the resumed task ran once, in its own run directory, and its row says what result.json says
    scale = next(r for r in rows if r["id"] == "suite/04_scale")
    result = json.loads((out / scale["run_dir"] / "result.json").read_text())
    assert (
        scale["evaluations"] == result["cost"]["evaluations"] == 1 and scale["verdict"] == result["verdict"]
    )
    assert len((out / scale["run_dir"] / "evaluations.jsonl").read_text().splitlines()) == 1
    # a bench with nothing left does nothing
    again = seen["again"]
    assert again.returncode == 1 and "nothing left to do" in again.stdout and ledger(out) == rows
    assert "did not load: suite/03_broken" in again.stdout


def test_bench_writes_suite_json_md_and_html(bench):
    out, _ = bench
    data = json.loads((out / "suite.json").read_text())
    b = data["bench"]
    assert b["finished"] is True and (b["tasks_total"], b["tasks_finished"]) == (4, 4)
    assert (
        b["settings"]["budget"] == 1
        and b["settings"]["model"] == "offline"
        and b["timing_meaningful"] is False
    )
    assert "not meaningful" in b["timing_note"] and b["elapsed_s"] > 0
    o = data["overall"]
    assert (o["tasks"], o["correct"], o["failed"]) == (4, 2, 2) and o["fast_p"]["vs_eager"] is None
    tasks = {t["id"]: t for t in data["tasks"]}
    relu = tasks["suite/02_relu"]
    assert relu["family"] == "pointwise" and relu["correct"] and relu["design"].startswith("family=pointwise")
    assert relu["speedup_vs_eager"] is None and relu["worker"] == "cpu" and relu["wall_s"] > 0
    assert relu["attempts"][0]["status"] == "correct"
    # --unseen is on by default (2); a task whose sizes are not module constants says none could be made
    assert b["settings"]["unseen"] == 2 and relu["holds_unseen"] is None
    assert relu["unseen_note"] == "no size constant of 8 or more to change"
    assert (relu["candidates"], relu["repeats"], relu["blocked"]) == (1, 0, 0)
    assert "the harness could not judge this task" in tasks["suite/01_random"]["verdict"]
    assert "no Model class" in tasks["suite/03_broken"]["error"]
    md = (out / "suite.md").read_text()
    assert "| suite/04_scale | pointwise | correct |" in md and "Note: timings are not meaningful" in md


def test_the_cpu_bench_report_renders_in_chromium(bench):
    out, _ = bench
    dom = browser.dump_dom(out / "suite.html")
    assert "4/4 tasks finished, correct 2/4, 2 could not be judged or run" in dom
    assert len(re.findall(r'<tr class="task"', dom)) == 4
    assert "harness error" in dom and "load error" in dom
    plot = re.search(r'<svg[^>]*id="fastp-overall".*?</svg>', dom, re.S)
    assert plot and "not timed: CPU" in plot.group(0) and "curve-eager" not in plot.group(0)
    assert "fastp-family-" not in dom and "Per-family fast_p curves need timings" in dom
    assert (
        'href="runs/suite/02_relu/report.html"' in dom and (out / "runs/suite/02_relu/report.html").is_file()
    )


def test_bad_input_is_one_line_and_nothing_is_made(tmp_path, capsys):
    suite = make_suite(tmp_path / "suite", {"01_relu": "relu"})
    (tmp_path / "empty").mkdir()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("")
    cases = [
        ([str(tmp_path / "nowhere")], "no such folder or task file"),
        ([str(tmp_path / "empty")], "no task files (*.py) in this folder"),
        ([], "give one or more folders of tasks (or --resume DIR)"),
        ([str(suite), "--gpus", "0,x"], "--gpus: expected all or GPU indices such as 0,1"),
        ([str(suite), "--device", "cpu", "--gpus", "0"], "the bench runs on the CPU (--device cpu)"),
        ([str(suite), "--out", str(busy)], "the folder is not empty"),
        (["--resume", str(tmp_path / "nowhere")], "no such bench folder"),
        (["--resume", str(tmp_path / "empty")], "not a bench folder (no bench.json)"),
        (["--resume", str(tmp_path / "empty"), "--budget", "3"], "only --gpus may be given (got --budget)"),
    ]
    for args, expected in cases:
        try:
            code = cli_main(
                ["bench", *args, "--memory", str(tmp_path / "m")]
                if "--resume" not in args
                else ["bench", *args]
            )
        except SystemExit as exc:  # argparse's own errors
            code = exc.code
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and expected in err[0], (args, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "empty", "suite"]
    resources.close_all()


def test_a_bench_folder_is_run_by_one_process_at_a_time(tmp_path, capsys):
    import fcntl

    from kernelwright.bench.folder import create, discover
    from kernelwright.graphs.context import Context

    suite = make_suite(tmp_path / "suite", {"01_relu": "relu"})
    out = tmp_path / "out"
    create(out, [str(suite)], discover([str(suite)]), Context(model="offline", budget=1, device="cpu",
                                                                   memory=str(tmp_path / "m")))  # fmt: skip
    with open(out / "bench.lock", "a+") as held:  # as the bench running there holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("kernelwright bench (pid 4242)\n")
        held.flush()
        code = cli_main(["bench", "--resume", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is being run by kernelwright bench (pid 4242)" in err[0], err
    assert not (out / "tasks.jsonl").exists() and not (out / "runs").exists()
    resources.close_all()


# -- slow: crashes and several workers ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_coordinator_loses_nothing_and_the_task_in_flight_continues(tmp_path):
    """SIGKILL the coordinator while a task is mid-search: its worker dies with it; --resume continues that
    task from its checkpoints, evaluating no candidate twice."""
    suite = make_suite(tmp_path / "suite", {"01_relu": "relu", "02_scale": "scale"})
    out = tmp_path / "out"
    proc = start(str(suite), "--budget", "3", "--device", "cpu", "--memory", str(tmp_path / "m"), "--out", str(out),
                 log=tmp_path / "first.log")  # fmt: skip
    evals = out / "runs" / "suite" / "02_scale" / "evaluations.jsonl"
    try:
        wait_for(
            lambda: evals.exists() and len(evals.read_text().splitlines()) >= 1,
            300,
            "02_scale evaluated",
            proc,
        )
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: not workers_of(out), 30, "the worker to die with the coordinator")
    assert [r["id"] for r in ledger(out)] == ["suite/01_relu"]
    before = evals.read_text().splitlines()
    assert 1 <= len(before) < 3
    done = run("--resume", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    after = evals.read_text().splitlines()
    assert after[: len(before)] == before
    nodes = [json.loads(line)["node_id"] for line in after]
    assert len(nodes) == len(set(nodes)) == 3  # every candidate evaluated once, across both sessions
    rows = ledger(out)
    assert [r["id"] for r in rows] == ["suite/01_relu", "suite/02_scale"] and rows[1]["evaluations"] == 3


@pytest.mark.slow
def test_a_dead_worker_is_recorded_replaced_and_its_task_resumed(tmp_path):
    suite = make_suite(tmp_path / "suite", {"01_relu": "relu", "02_scale": "scale"})
    out = tmp_path / "out"
    proc = start(str(suite), "--budget", "2", "--device", "cpu", "--memory", str(tmp_path / "m"), "--out", str(out),
                 log=tmp_path / "first.log")  # fmt: skip
    try:
        evals = out / "runs" / "suite" / "01_relu" / "evaluations.jsonl"
        wait_for(lambda: evals.exists() and workers_of(out), 300, "01_relu evaluated", proc)
        os.kill(workers_of(out)[0], signal.SIGKILL)
        code = proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = (tmp_path / "first.log").read_text()
    assert code == 1 and "its worker ended unexpectedly; starting another" in text, text
    rows = {r["id"]: r for r in ledger(out)}
    assert (
        rows["suite/01_relu"]["status"] == "error" and "killed by signal 9" in rows["suite/01_relu"]["error"]
    )
    assert rows["suite/02_scale"]["status"] == "correct"  # the replacement worker went on with the queue
    done = run("--resume", str(out))
    assert done.returncode == 0 and "1 to run" in done.stdout, done.stdout + done.stderr
    relu_rows = [r for r in ledger(out) if r["id"] == "suite/01_relu"]
    assert [r["status"] for r in relu_rows] == ["error", "correct"]
    nodes = [
        json.loads(x)["node_id"]
        for x in (out / "runs/suite/01_relu/evaluations.jsonl").read_text().splitlines()
    ]
    assert len(nodes) == len(set(nodes)) == 2  # continued from its run directory, nothing evaluated twice


@pytest.mark.slow
def test_two_workers_share_the_queue(tmp_path):
    """Two worker processes (CPU ones here, as two GPUs would be) take tasks from one queue: each task runs
    once, both workers get work."""
    from rich.console import Console

    from kernelwright.bench.coordinator import Slot, run_bench
    from kernelwright.bench.folder import create, discover
    from kernelwright.graphs.context import Context

    suite = make_suite(tmp_path / "suite", {f"{i:02d}_t": "relu" if i % 2 else "scale" for i in range(1, 5)})
    out = tmp_path / "out"
    create(out, [str(suite)], discover([str(suite)]), Context(model="offline", budget=1, device="cpu",
                                                                   memory=str(tmp_path / "m")))  # fmt: skip
    lines: list[str] = []
    code = run_bench(
        out, [Slot("gpu 0", ""), Slot("gpu 1", "")], Console(file=open(os.devnull, "w")), lines.append
    )
    assert code == 0, lines
    rows = ledger(out)
    assert sorted(r["id"] for r in rows) == [f"suite/{i:02d}_t" for i in range(1, 5)]
    assert {r["worker"] for r in rows} == {"gpu 0", "gpu 1"} and all(r["status"] == "correct" for r in rows)
    assert json.loads((out / "suite.json").read_text())["bench"]["finished"] is True


@pytest.mark.slow
@pytest.mark.integration  # also starts a scripted model server on loopback
def test_a_failing_model_provider_stops_the_bench_resumably(tmp_path):
    """The provider keeps failing: no new task starts, nothing is recorded as an outcome, exit status 3 names
    the --resume; resumed once the provider answers, the task runs in its run directory."""
    from tests.fakes.chat import fenced
    from tests.fakes.kernels import relu_kernel
    from tests.fakes.openai_server import FakeOpenAIServer

    suite = make_suite(tmp_path / "suite", {"01_relu": "relu", "02_scale": "scale"})
    out = tmp_path / "out"
    answers = {"down": True}

    def answer(body: dict) -> dict:
        return {"status": 503} if answers["down"] else {"content": fenced(relu_kernel("served"))}

    with FakeOpenAIServer([], default=answer) as server:
        args = [str(suite), "--model", "fake-coder", "--base-url", server.base_url, "--budget", "1", "--device", "cpu",
                "--memory", str(tmp_path / "m"), "--out", str(out)]  # fmt: skip
        env = {**_env(), "KERNELWRIGHT_LLM_RETRY_S": "0"}
        first = subprocess.run(
            [str(KW), "bench", *args], capture_output=True, text=True, timeout=300, env=env
        )
        assert first.returncode == 3, first.stdout + first.stderr
        assert f"continue with kernelwright bench --resume {out}" in first.stdout
        assert (
            ledger(out) == [] and json.loads((out / "suite.json").read_text())["bench"]["tasks_finished"] == 0
        )
        answers["down"] = False
        done = run("--resume", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["id"]: r for r in ledger(out)}
    assert rows["suite/01_relu"]["status"] == "correct" and rows["suite/01_relu"]["llm_calls"] >= 1
    assert set(rows) == {"suite/01_relu", "suite/02_scale"}
