"""`langgraph dev` serves the optimize graph from langgraph.json, as Studio sees it, through langgraph_sdk.

The server is started on a free loopback port with tracing, analytics and the browser off, HOME in tmp
(so default run directories and memory land there), and stopped (its whole process group) at the end.
Runs use the offline writer on bundled tasks with budgets of one or two candidates.

- a run works, its final state still shows the task_path it was given, Studio's panel shows each setting
  with its description and default (and no Python-only ones), and the graph Studio draws has every route;
- a run interrupted with a candidate in flight continues when the same task is sent again;
- two threads started in the same minute on one task write two run folders; a thread given a folder that
  holds another run is refused;
- a second task on a used thread starts a new run with that task's result, never the old one;
- with reloading on (as `langgraph dev` runs by default), runs with default run directories do not make
  the server reload, and a run queued behind another is not cancelled.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ROOT / ".venv" / "bin" / "langgraph"
RELU = str(ROOT / "tasks" / "level1" / "01_relu.py")
SILU = str(ROOT / "tasks" / "level1" / "03_silu.py")
RELOAD_SIGNS = ("Reloading", "WatchFiles detected changes", "Shutting down")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(tmp_path: Path, *, reload: bool, jobs: int | None = None):
    if not LANGGRAPH.exists():
        pytest.fail(f"{LANGGRAPH} not found: install the dev extras (langgraph-cli[inmem])")
    port = free_port()
    env = dict(os.environ)
    env.update(
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGSMITH_API_KEY="",
        BROWSER="true",
        HOME=str(tmp_path / "home"),
    )
    for var in ("KERNELWRIGHT_RUNS", "KERNELWRIGHT_RUN_DIR", "KERNELWRIGHT_MEMORY"):
        env.pop(var, None)
    for var in ("OPENAI_BASE_URL", "KERNELWRIGHT_BASE_URL"):
        env.pop(var, None)
    log = (tmp_path / "langgraph-dev.log").open("w")
    proc = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", *([] if reload else ["--no-reload"]), "--host", "127.0.0.1",
         "--port", str(port), "--config", str(ROOT / "langgraph.json"),
         *(["--n-jobs-per-worker", str(jobs)] if jobs else [])],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail("langgraph dev exited:\n" + (tmp_path / "langgraph-dev.log").read_text()[-3000:])
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("langgraph dev did not answer in 180 s")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server for the module's tests, as a team's server serves many runs: (url, its HOME folder).
    Each test gives its runs their own memory and run folders. A team's server runs several jobs at once
    (`langgraph dev` alone runs one at a time here)."""
    tmp = tmp_path_factory.mktemp("langgraph-dev")
    for url in start_server(tmp, reload=False, jobs=4):
        yield url, tmp / "home"


@pytest.fixture
def server(served):
    return served[0]


@pytest.fixture
def reloading_server(tmp_path):
    yield from start_server(tmp_path, reload=True)


def server_log(tmp_path: Path) -> str:
    return (tmp_path / "langgraph-dev.log").read_text()


def test_run_the_graph_through_the_sdk(server, tmp_path):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, api_key=None, timeout=600)
    assistants = client.assistants.search(graph_id="optimize")
    assert assistants and assistants[0]["name"] == "kernelwright-optimize"
    schemas = client.assistants.get_schemas(assistants[0]["assistant_id"])
    assert set(schemas["input_schema"]["properties"]) == {"task_path", "task_source", "task_name"}
    panel = schemas["context_schema"]["properties"]
    assert panel["budget"]["default"] == 8 and "candidate kernels" in panel["budget"]["description"]
    assert panel["device"]["default"] == "auto" and "chat_model" not in panel and "timing_source" not in panel
    assert all(p.get("description") for p in panel.values())

    thread = client.threads.create()
    run_dir = tmp_path / "run"
    values = client.runs.wait(
        thread["thread_id"],
        "optimize",
        input={"task_path": RELU},
        context={
            "model": "offline",
            "budget": 2,
            "device": "cpu",
            "workers": 1,
            "memory": str(tmp_path / "memory"),
            "run_dir": str(run_dir),
        },
    )
    assert isinstance(values, dict) and "__error__" not in values, values
    result = values["result"]
    assert result["task"] == "01_relu" and result["run_id"] == thread["thread_id"]
    assert len(values["attempts"]) == 2
    assert result["search"]["nodes"] == 2
    assert result["device"] == "cpu" and result["timing_meaningful"] is False
    assert result["cost"]["evaluations"] >= 1
    assert (run_dir / "result.json").exists() and (run_dir / "report.html").exists()
    if result["correct"]:
        assert (run_dir / "kernel.py").exists()
    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == [] and state["values"]["task_path"] == RELU


def test_two_runs_on_two_threads_at_once_each_get_their_own_result(server, tmp_path):
    """A team's server: runs on separate threads proceed at the same time, share one memory, and each
    ends with its own task's result in its own run directory."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, api_key=None, timeout=600)
    softmax = str(Path(RELU).parent / "09_softmax.py")
    runs = []
    for name, task in (("relu", RELU), ("softmax", softmax)):
        thread = client.threads.create()
        context = {"model": "offline", "budget": 2, "device": "cpu", "workers": 1,
                   "memory": str(tmp_path / "memory"), "run_dir": str(tmp_path / name)}  # fmt: skip
        run = client.runs.create(thread["thread_id"], "optimize", input={"task_path": task}, context=context)
        runs.append((name, thread["thread_id"], run["run_id"]))
    spans = []
    for name, thread_id, run_id in runs:
        client.runs.join(thread_id, run_id)
        values = client.threads.get_state(thread_id)["values"]
        run = client.runs.get(thread_id, run_id)
        assert "result" in values, (  # the run's status first: a long message is cut short in the report
            name,
            run.get("status"),
            {k: str(v)[:300] for k, v in run.items() if k != "status"},
            {k: str(v)[:300] for k, v in values.items()},
        )
        result = values["result"]
        assert result["task"] == {"relu": "01_relu", "softmax": "09_softmax"}[name], result
        assert result["run_id"] == thread_id and result["search"]["nodes"] == 2, result["stop_reason"]
        assert (tmp_path / name / "result.json").exists()
        spans.append((result["started_at"], result["finished_at"]))
    (a0, a1), (b0, b1) = spans
    assert a0 < b1 and b0 < a1, spans  # the two runs overlapped in time


def test_studio_draws_every_route(server):
    from langgraph_sdk import get_sync_client

    from kernelwright.graphs.optimize import graph

    client = get_sync_client(url=server, api_key=None)
    assistant = client.assistants.search(graph_id="optimize")[0]
    drawn = client.assistants.get_graph(assistant["assistant_id"])
    edges = {(e["source"], e["target"]) for e in drawn["edges"]}
    assert edges == {(e.source, e.target) for e in graph.get_graph().edges}
    assert ("compiler", "profiler") in edges and ("reflector", "planner") in edges and len(edges) == 10


@pytest.mark.slow  # ~14 s; the same rule without the server: tests/kernels/test_graph_threads.py
def test_a_new_task_on_a_used_thread_is_a_new_run(served, tmp_path):
    from langgraph_sdk import get_sync_client

    server, home = served
    client = get_sync_client(url=server, api_key=None, timeout=600)
    thread = client.threads.create()["thread_id"]
    context = {"model": "offline", "budget": 1, "device": "cpu", "memory": str(tmp_path / "memory")}
    first = client.runs.wait(thread, "optimize", input={"task_path": RELU}, context=context)
    second = client.runs.wait(thread, "optimize", input={"task_path": SILU}, context=context)
    assert "__error__" not in first and "__error__" not in second, (first, second)
    assert first["result"]["task"] == "01_relu" and second["result"]["task"] == "03_silu"
    assert first["result"]["run_id"] == thread and second["result"]["run_id"] != thread
    assert [a["node_id"] for a in second["attempts"]] == ["n1"]  # the old run's attempts are gone
    assert (
        "03_silu" in second["attempts"][0]["candidate"]["code"] or second["attempts"][0]["candidate"]["code"]
    )
    # the same task again on the finished thread: a new run too, not the stored answer
    third = client.runs.wait(thread, "optimize", input={"task_path": SILU}, context=context)
    assert third["result"]["task"] == "03_silu"
    assert third["result"]["run_id"] not in (thread, second["result"]["run_id"])
    assert Path(third["result"]["run_dir"]).is_relative_to(home / ".kernelwright" / "runs")


@pytest.mark.slow  # ~14 s: a second server (reloading) and two queued runs
def test_runs_with_default_directories_do_not_reload_the_server(reloading_server, tmp_path):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=reloading_server, api_key=None, timeout=600)
    context = {"model": "offline", "budget": 1, "device": "cpu", "memory": str(tmp_path / "memory")}
    thread = client.threads.create()["thread_id"]
    # two runs on one thread: the second waits in the queue while the first writes its kernel.py
    first = client.runs.create(thread, "optimize", input={"task_path": RELU}, context=context)
    second = client.runs.create(
        thread, "optimize", input={"task_path": SILU}, context=context, multitask_strategy="enqueue"
    )
    client.runs.join(thread, first["run_id"])
    values = client.runs.join(thread, second["run_id"])
    runs = {r["run_id"]: r for r in client.runs.list(thread)}
    assert runs[first["run_id"]]["status"] == "success" and runs[second["run_id"]]["status"] == "success"
    assert values["result"]["task"] == "03_silu"
    time.sleep(2)  # a reload would follow the last write within the watcher's debounce
    log = server_log(tmp_path)
    assert not [line for line in log.splitlines() if any(s in line for s in RELOAD_SIGNS)], log[-3000:]
    kernels = sorted((tmp_path / "home" / ".kernelwright" / "runs").glob("*/kernel.py"))
    assert [k.parent.name.split("-")[0] for k in kernels] == ["01_relu", "03_silu"]


def _uuid7_like(ms: int, tail: int) -> str:
    """A thread id as Studio makes them (uuid7): 48 bits of milliseconds first, random bits after."""
    import uuid

    return str(uuid.UUID(int=(ms << 80) | (0x7 << 76) | (0x8 << 60) | tail))


def test_an_interrupted_run_continues_when_its_task_is_sent_again(server, tmp_path):
    """Studio's interrupt while a candidate is in flight (the model is answering), then the same task
    sent again: the run continues to its result, in the folder it started in."""
    from langgraph_sdk import get_sync_client

    from tests.fakes.chat import fenced
    from tests.fakes.kernels import relu_kernel
    from tests.fakes.openai_server import FakeOpenAIServer

    code = fenced(relu_kernel("ok"))
    client = get_sync_client(url=server, api_key=None, timeout=600)
    with FakeOpenAIServer([{"sleep": 30.0, "content": code}], default=lambda body: {"content": code}) as fake:
        context = {"model": "fake-coder", "base_url": fake.base_url, "budget": 2, "device": "cpu",
                   "llm_rules": False, "memory": str(tmp_path / "memory"), "llm_timeout_s": 60}  # fmt: skip
        thread = client.threads.create()["thread_id"]
        run = client.runs.create(thread, "optimize", input={"task_path": RELU}, context=context)
        deadline = time.monotonic() + 120
        while not fake.chat_requests:  # the first candidate's coder is waiting for the model
            assert time.monotonic() < deadline, client.runs.get(thread, run["run_id"])
            time.sleep(0.2)
        client.runs.cancel(thread, run["run_id"], wait=True, action="interrupt")
        stopped = client.threads.get_state(thread)["values"]
        assert stopped.get("result") is None and len(stopped["jobs"]) == 1 and not stopped.get("attempts")
        values = client.runs.wait(thread, "optimize", input={"task_path": RELU}, context=context)
    assert isinstance(values, dict) and "__error__" not in values, values
    result = values["result"]
    assert result is not None and result["run_id"] == thread and result["stop_reason"], values.get(
        "stop_reason"
    )
    assert [a["node_id"] for a in values["attempts"]] == ["n1", "n2"] and result["correct"]
    assert result["run_dir"] == stopped["run"]["run_dir"]
    assert json.loads((Path(result["run_dir"]) / "result.json").read_text())["run_id"] == thread
    assert client.threads.get_state(thread)["next"] == []


def test_threads_started_in_the_same_minute_write_their_own_folders(served, tmp_path):
    """Studio's thread ids begin with a timestamp: two threads on one task must not share a run folder,
    and a thread given (run_dir) a folder that holds another run is refused, the folder untouched."""
    from langgraph_sdk import get_sync_client

    server, home = served
    client = get_sync_client(url=server, api_key=None, timeout=600)
    now = int(time.time() * 1000)
    context = {"model": "offline", "budget": 1, "device": "cpu", "memory": str(tmp_path / "memory")}
    runs = []
    for tail in (1, 2):
        thread = client.threads.create(thread_id=_uuid7_like(now, tail))["thread_id"]
        runs.append(
            (thread, client.runs.create(thread, "optimize", input={"task_path": RELU}, context=context))
        )
    assert runs[0][0][:8] == runs[1][0][:8]
    folders = []
    for thread, run in runs:
        values = client.runs.join(thread, run["run_id"])
        assert "__error__" not in values, values
        folder = Path(values["result"]["run_dir"])
        assert json.loads((folder / "result.json").read_text())["run_id"] == thread
        logged = {
            json.loads(line)["run_id"] for line in (folder / "evaluations.jsonl").read_text().splitlines()
        }
        assert logged == {thread}
        folders.append(folder)
    assert folders[0] != folders[1] and all(f.parent == home / ".kernelwright" / "runs" for f in folders)
    before = {p.name: p.read_bytes() for p in folders[0].iterdir() if p.is_file()}
    thread = client.threads.create()["thread_id"]
    with pytest.raises(Exception, match="RunFolderTaken: .* already holds run "):
        client.runs.wait(
            thread, "optimize", input={"task_path": RELU}, context={**context, "run_dir": str(folders[0])}
        )
    assert {p.name: p.read_bytes() for p in folders[0].iterdir() if p.is_file()} == before
