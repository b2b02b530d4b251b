"""`langgraph dev` serves the optimize graph from langgraph.json; a run through langgraph_sdk works.

The server is started on a free loopback port with tracing, analytics, the browser and reloading off,
and stopped (its whole process group) at the end. The run uses the offline writer on the bundled ReLU
task with a budget of two candidates, memory and run directory in tmp.
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

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ROOT / ".venv" / "bin" / "langgraph"
RELU = str(ROOT / "tasks" / "level1" / "01_relu.py")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def server(tmp_path):
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
    )
    for var in ("OPENAI_BASE_URL", "KERNELWRIGHT_BASE_URL"):
        env.pop(var, None)
    log = (tmp_path / "langgraph-dev.log").open("w")
    proc = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", str(port),
         "--config", str(ROOT / "langgraph.json")],
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


def test_run_the_graph_through_the_sdk(server, tmp_path):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server, api_key=None, timeout=600)
    assistants = client.assistants.search(graph_id="optimize")
    assert assistants and assistants[0]["name"] == "kernelwright-optimize"
    schemas = client.assistants.get_schemas(assistants[0]["assistant_id"])
    assert set(schemas["input_schema"]["properties"]) == {"task_path", "task_source", "task_name"}
    assert "budget" in json.dumps(schemas.get("context_schema") or {})

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
    assert state["next"] == []
