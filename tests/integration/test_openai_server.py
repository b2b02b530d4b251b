"""ChatOpenAI against a real local HTTP server speaking the OpenAI chat-completions protocol.

The server (tests/fakes/openai_server.py) listens on 127.0.0.1 on a free port and answers from a
script: a good kernel, a broken kernel and malformed output drive a whole graph run; 429/500 and a slow
answer show the retries; a closed port, a wrong key and an unknown model are clear errors at start.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kernelwright.cli.main import main as cli_main
from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import builder, run_optimize, serializer
from kernelwright.memory import open_memory
from kernelwright.nodes import resources
from kernelwright.providers import ProviderError, load_chat_model
from tests.fakes.chat import fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel
from tests.fakes.openai_server import FakeOpenAIServer

RELU = str(Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py")


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    yield
    resources.close_all()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_a_whole_run_through_chat_openai(tmp_path):
    rule = {"rule": "You cannot call functions that triton.language does not define", "reason": "no such API"}
    script = [
        {"content": fenced(relu_kernel("served"), "A flat elementwise kernel.")},
        {"content": fenced(relu_compile_error("served-broken"), "Try a new API.")},
        {"content": "Sorry, I cannot help with that."},
    ]
    with FakeOpenAIServer(script, model="fake-coder", structured=lambda body: rule) as server:
        ctx = Context(
            model="fake-coder",
            base_url=server.base_url,
            budget=3,
            device="cpu",
            workers=1,
            memory=str(tmp_path / "memory"),
            run_dir=str(tmp_path / "run"),
            llm_rules=True,
            llm_timeout_s=30,
            llm_retry_s=5,
            p_large=1.0,  # after the first kernel, a large step from it: the order of the script is fixed
        )
        app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
        config: dict[str, Any] = {"configurable": {"thread_id": "served"}}
        app.invoke({"task_path": RELU}, config=config, context=ctx)
        state = app.get_state(config).values
        chat = server.chat_requests
        structured = [r for r in server.requests if "response_format" in r or "tools" in r]
        statuses = list(server.statuses)

    attempts = state["attempts"]
    assert [a.status for a in attempts] == ["correct", "failed", "failed"]
    assert attempts[0].candidate.idea == "A flat elementwise kernel."
    assert attempts[1].result.error_kind == "compile_error"
    assert attempts[2].result.stage == "parse" and "no fenced" in (attempts[2].result.error or "")
    assert [a.action for a in attempts] == ["large_step", "large_step", "repair"]
    # every code request carried the system prompt and the XML-tagged user prompt
    assert len(chat) == 3 and all(r["model"] == "fake-coder" for r in chat)
    assert chat[0]["messages"][0]["role"] == "system" and "ModelNew" in chat[0]["messages"][0]["content"]
    assert '<request kind="large_step">' in chat[0]["messages"][1]["content"]
    assert '<request kind="repair">' in chat[2]["messages"][1]["content"]
    assert "tl.no_such_function" in chat[2]["messages"][1]["content"]
    # the compile failure's rule was drafted by the model through structured output
    assert len(structured) == 1
    assert attempts[1].reflection.rule_source == "llm"
    assert attempts[1].reflection.rule_texts == [rule["rule"]]
    assert attempts[2].reflection.rule_source == "signature"  # no code to reflect on
    assert statuses == [200] * 4
    # calls and tokens as the server reported them
    cost = state["cost"]
    assert cost.llm_calls == 4
    assert cost.tokens_in > 0 and cost.tokens_out > 0
    assert sum(a.candidate.usage.tokens_in for a in attempts) > 0
    mem = open_memory(ctx.memory)
    try:
        assert [r.text for r in mem.rules.all()].count(rule["rule"]) == 1
        assert mem.cases.count() == 3
    finally:
        mem.close()


def test_429_and_500_are_retried_with_backoff():
    script = [{"status": 429}, {"status": 500}, {"status": 503}, {"content": "ok"}]
    with FakeOpenAIServer(script) as server:
        model = load_chat_model("fake-coder", base_url=server.base_url, max_retries=3, timeout=10)
        t0 = time.monotonic()
        msg = model.invoke("hi")
        waited = time.monotonic() - t0
        assert msg.content == "ok"
        assert server.statuses == [429, 500, 503, 200]
    assert waited > 0.5  # backed off between attempts


def test_retries_give_up_with_the_error():
    with FakeOpenAIServer([{"status": 500}] * 3) as server:
        model = load_chat_model("fake-coder", base_url=server.base_url, max_retries=1, timeout=10)
        with pytest.raises(Exception, match="(?i)500|server"):
            model.invoke("hi")
        assert server.statuses == [500, 500]


def test_a_timeout_is_retried():
    with FakeOpenAIServer([{"sleep": 3.0, "content": "late"}, {"content": "on time"}]) as server:
        model = load_chat_model("fake-coder", base_url=server.base_url, max_retries=2, timeout=1.0)
        assert model.invoke("hi").content == "on time"
        assert len(server.requests) == 2


def test_unreachable_server_wrong_model_and_wrong_key_fail_at_start(tmp_path, monkeypatch, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(ProviderError, match="cannot reach"):
        load_chat_model("fake-coder", base_url=url)
    with FakeOpenAIServer([], model="served") as server:
        with pytest.raises(ProviderError, match="does not serve model 'other'.*served"):
            load_chat_model("other", base_url=server.base_url)
    with FakeOpenAIServer([], api_key="sk-right") as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        with pytest.raises(ProviderError, match="refused the API key"):
            load_chat_model("fake-coder", base_url=server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-right")
        assert load_chat_model("fake-coder", base_url=server.base_url) is not None
    # the same through the run API and the CLI: an error before any work, never the offline writer
    ctx = Context(model="fake-coder", base_url=url, device="cpu", memory=str(tmp_path / "m"), budget=1)
    with pytest.raises(ProviderError):
        run_optimize(RELU, ctx, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints.sqlite").exists()
    code = cli_main(
        ["optimize", RELU, "--model", "fake-coder", "--base-url", url, "--memory", str(tmp_path / "m")]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach the OpenAI-compatible server" in err[0]


def test_retry_after_is_honoured_and_the_retry_time_is_a_total():
    from kernelwright.providers.chat import ProviderUnavailable, invoke_with_retry

    script = [{"status": 429, "headers": {"Retry-After": "1.5"}}, {"content": "after the wait"}]
    with FakeOpenAIServer(script) as server:
        model = load_chat_model("fake-coder", base_url=server.base_url, max_retries=0, timeout=10)
        t0 = time.monotonic()
        msg = invoke_with_retry(lambda: model.invoke("hi"), total_s=30, what="the model")
        assert msg.content == "after the wait" and time.monotonic() - t0 >= 1.5
    with FakeOpenAIServer([], default=lambda body: {"status": 500}) as server:
        model = load_chat_model("fake-coder", base_url=server.base_url, max_retries=0, timeout=10)
        t0 = time.monotonic()
        with pytest.raises(ProviderUnavailable, match=r"kept failing for \d+ s \(\d+ tries.*HTTP 500"):
            invoke_with_retry(lambda: model.invoke("hi"), total_s=4, what="the model")
        waited = time.monotonic() - t0
        tries = len(server.requests)
    assert 1.0 <= waited <= 4.5 and 2 <= tries <= 5  # backed off (1, 2 s ...) within the total time


def test_a_provider_that_keeps_failing_ends_in_one_line_and_a_resumable_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELWRIGHT_LLM_RETRY_S", "3")
    out = tmp_path / "run"
    with FakeOpenAIServer([], default=lambda body: {"status": 500}) as server:
        args = ["optimize", RELU, "--model", "fake-coder", "--base-url", server.base_url, "--device", "cpu",
                "--budget", "2", "--memory", str(tmp_path / "m"), "--out", str(out)]  # fmt: skip
        t0 = time.monotonic()
        code = cli_main(args)
        took = time.monotonic() - t0
        assert len(server.chat_requests) >= 2
        url, requests = server.base_url, len(server.chat_requests)
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 3, err
    # every retry said so while it waited; then one line says the run stopped and how to resume it
    assert len(err) >= 2 and "kept failing" in err[-1] and "HTTP 500" in err[-1]
    assert f"--resume {out}" in err[-1] and took < 30
    waits = err[:-1]
    assert len(waits) == requests - 1, err
    for n, line in enumerate(waits, 1):
        assert line.startswith(f"the model fake-coder at {url}: HTTP 500"), line
        assert f"; retry {n} in " in line and "of the 3 s retry time left" in line, line
    assert "retry" not in captured.out
    # the run is checkpointed: resuming against a server that answers finishes it
    with FakeOpenAIServer([], default=lambda body: {"content": fenced(relu_kernel())}) as server:
        saved = json.loads((out / "run.json").read_text())
        saved["context"]["base_url"] = server.base_url
        (out / "run.json").write_text(json.dumps(saved))
        assert cli_main(["optimize", "--resume", str(out)]) == 0
    assert json.loads((out / "result.json").read_text())["correct"] is True


# --- no silent waits ----------------------------------------------------------------------------------


@pytest.fixture
def waits(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> pytest.LogCaptureFixture:
    """caplog, with the wait lines reaching it also after the CLI (which prints them itself) has run."""
    monkeypatch.setattr(logging.getLogger("kernelwright.wait"), "propagate", True)
    caplog.set_level(logging.INFO, logger="kernelwright.wait")
    return caplog


def _wait_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("kernelwright.wait")]


def test_each_retry_is_announced_before_its_wait_and_the_answer_after_retries(waits):
    from kernelwright.providers.chat import invoke_with_retry

    caplog = waits
    fail = {"status": 500, "headers": {"retry-after-ms": "150"}}
    busy = {"status": 503, "headers": {"retry-after": "1"}}
    with FakeOpenAIServer([fail, fail, busy, {"content": "ok"}]) as server:
        model = load_chat_model("fake-coder", base_url=server.base_url, max_retries=0, timeout=10)
        msg = invoke_with_retry(lambda: model.invoke("hi"), total_s=30, what="the model")
        assert msg.content == "ok" and server.statuses == [500, 500, 503, 200]
    lines = _wait_lines(caplog)
    assert len(lines) == 4, lines
    assert (
        lines[0].startswith("the model: HTTP 500")
        and "; retry 1 in 0.1 s (30 s of the 30 s retry time left)" in lines[0]
    )
    assert lines[1].startswith("the model: HTTP 500") and "; retry 2 in 0.1 s" in lines[1]
    assert lines[2].startswith("the model: HTTP 503") and "; retry 3 in 1.0 s (" in lines[2]
    assert re.fullmatch(r"the model answered after 3 retries \(\d+\.\d s\)", lines[3]), lines[3]
    retry_records = [r for r in caplog.records if "; retry" in r.getMessage()]
    assert all(r.levelno == logging.WARNING for r in retry_records)


def test_a_slow_answer_is_reported_while_it_is_awaited(waits, monkeypatch):
    from kernelwright.providers import chat

    caplog = waits
    monkeypatch.setattr(chat, "SLOW_NOTICES_S", (0.4, 0.8))
    monkeypatch.setattr(chat, "SLOW_REPEAT_S", 0.4)
    with FakeOpenAIServer([{"sleep": 1.5, "content": "late"}, {"content": "quick"}]) as server:
        model = load_chat_model("fake-coder", base_url=server.base_url, max_retries=0, timeout=10)
        t0 = time.monotonic()
        assert model.invoke("hi").content == "late"
        late = time.monotonic() - t0
        during = _wait_lines(caplog)
        assert model.invoke("hi").content == "quick"
        time.sleep(0.6)  # a quick answer is never reported late, not even after it came
        url = server.base_url
    lines = _wait_lines(caplog)
    assert lines == during, lines
    slow = [line for line in lines if "no answer yet" in line]
    # notices at 0.4, 0.8 and 1.2 s of a 1.5 s wait (a loaded machine may run the last one late)
    assert 2 <= len(slow) <= 3 and late >= 1.5, lines
    prefix = f"the model fake-coder at {url}: no answer yet after "
    assert all(line.startswith(prefix) and line.endswith("a request times out after 10 s") for line in slow)
    assert re.fullmatch(rf"the model fake-coder at {re.escape(url)} answered after 1\.\d s", lines[-1])


def test_a_graph_run_streams_its_retries_as_custom_events(tmp_path):
    fail = {"status": 502, "headers": {"retry-after-ms": "100"}}
    with FakeOpenAIServer([fail, {"content": fenced(relu_kernel("served"))}]) as server:
        url = server.base_url
        ctx = Context(
            model="fake-coder", base_url=url, budget=1, device="cpu", workers=1, memory="off",
            run_dir=str(tmp_path / "run"), llm_timeout_s=30, llm_retry_s=10,
        )  # fmt: skip
        app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
        config: dict[str, Any] = {"configurable": {"thread_id": "waits"}}
        events = list(app.stream({"task_path": RELU}, config=config, context=ctx, stream_mode="custom"))
    waits = [e["wait"] for e in events if isinstance(e, dict) and "wait" in e]
    assert len(waits) == 2, events
    assert waits[0]["retry"] == 1 and waits[0]["error"].startswith("HTTP 502") and waits[0]["delay_s"] == 0.1
    assert waits[0]["message"].startswith(f"the model fake-coder at {url}: HTTP 502")
    assert re.fullmatch(
        rf"the model fake-coder at {re.escape(url)} answered after 1 retry \(\d+\.\d s\)", waits[1]["message"]
    )
    first = app.get_state(config).values["attempts"][0]
    assert first.status == "correct", (first.result.error_kind, first.result.error)
