"""load_chat_model's spec handling and errors, token counting and answer parsing (no network)."""

from __future__ import annotations

import re
import socket

import pytest
from langchain_core.messages import AIMessage

from kernelwright.providers import (
    ProviderError,
    is_llm,
    load_chat_model,
    parse_program,
    resolve_base_url,
    usage_of,
)
from tests.fakes.chat import ScriptedChatModel


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KERNELWRIGHT_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_empty_and_unknown_specs_are_clear_errors():
    with pytest.raises(ProviderError, match="no model given"):
        load_chat_model("  ")
    with pytest.raises(ProviderError, match="unknown model spec 'gpt4'"):
        load_chat_model("gpt4")


def test_openai_spec_needs_a_key(monkeypatch):
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        load_chat_model("openai:gpt-4.1-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = load_chat_model("openai:gpt-4.1-mini", timeout=12, max_retries=5)
    assert type(model).__name__ == "ChatOpenAI"
    assert model.model_name == "gpt-4.1-mini"  # type: ignore[attr-defined]
    assert model.max_retries == 5 and model.request_timeout == 12  # type: ignore[attr-defined]
    assert is_llm(model)


def test_other_providers_go_through_init_chat_model():
    # no langchain-<provider> package for this one here: a clear error, never the offline writer
    with pytest.raises(ProviderError, match="(?i)pip install"):
        load_chat_model("anthropic:claude-sonnet-4")


def test_unreachable_server_fails_at_load_not_later():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(ProviderError, match="cannot reach the OpenAI-compatible server"):
        load_chat_model("qwen-coder", base_url=url)


def test_base_url_from_the_environment(monkeypatch):
    assert resolve_base_url() is None
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert resolve_base_url() == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("KERNELWRIGHT_BASE_URL", "http://127.0.0.1:8/v1")
    assert resolve_base_url() == "http://127.0.0.1:8/v1"
    model = load_chat_model("openai:served-model", probe=False)
    assert type(model).__name__ == "ChatOpenAI"
    assert model.model_name == "served-model"  # type: ignore[attr-defined]
    assert str(model.openai_api_base) == "http://127.0.0.1:8/v1"  # type: ignore[attr-defined]
    assert model.openai_api_key.get_secret_value() == "EMPTY"  # type: ignore[attr-defined,union-attr]


def test_offline_is_the_built_in_writer():
    offline = pytest.importorskip("kernelwright.providers.offline")
    if not hasattr(offline, "OfflineKernelWriter"):
        pytest.skip("the offline writer is not in this tree")
    model = load_chat_model("offline")
    assert type(model).__name__ == "OfflineKernelWriter"
    assert not is_llm(model)


def test_an_offline_writer_that_ignores_the_targets_limits_writes_as_for_an_h200():
    """ "offline:ignore-target-limits" (for measuring what rules prevent) writes an fp16 GEMM's pipelined tiles
    for an H200's shared memory on an L4 too; the plain writer keeps them inside the L4's 99 KiB. (Hopper's
    Gluon GEMM, `WS`, follows the target's architecture, not a limit: an L4 never gets it.)"""
    from langchain_core.messages import HumanMessage

    from kernelwright.hardware.targets import get_target
    from kernelwright.providers.offline.choice.context import parse_meta
    from kernelwright.tasks import bundled_suite_dir
    from kernelwright.tasks.variant import dtype_variant
    from tests.fakes.writer import writer_prompt

    task = dtype_variant((bundled_suite_dir("level1") / "14_matmul_square.py").read_text(), "float16")

    def config(spec: str, target: str) -> dict:
        answer = load_chat_model(spec).invoke([HumanMessage(writer_prompt(task, target=target))])
        config = parse_meta(str(answer.content)).config
        return {k: v for k, v in config.items() if k not in ("WS", "WS_COOP")}

    l4, h200 = get_target("nvidia-l4").summary(), get_target("nvidia-h200").summary()
    assert "smem/block 99 KiB" in l4
    assert config("offline:ignore-target-limits", l4) == config("offline", h200)
    assert config("offline", l4) != config("offline", h200)
    assert not is_llm(load_chat_model("offline:ignore-target-limits"))


def test_usage_from_usage_metadata_or_response_metadata():
    m = AIMessage(content="x", usage_metadata={"input_tokens": 11, "output_tokens": 7, "total_tokens": 18})
    assert usage_of(m) == (11, 7)
    m2 = AIMessage(
        content="x", response_metadata={"token_usage": {"prompt_tokens": 5, "completion_tokens": 2}}
    )
    assert usage_of(m2) == (5, 2)
    assert usage_of(AIMessage(content="x")) == (0, 0)


def test_parse_program_reasons():
    good = "Plan: tile it.\n```python\nclass ModelNew:\n    pass\n```"
    assert parse_program(AIMessage(content=good)) == ("class ModelNew:\n    pass\n", None)
    assert parse_program(AIMessage(content="")) == (None, "empty answer")
    code, why = parse_program(AIMessage(content="just prose"))
    assert code is None and "no fenced" in (why or "")
    code, why = parse_program(AIMessage(content="```python\nx = 1\n```"))
    assert code is None and "does not define ModelNew" in (why or "")
    blocks = AIMessage(content=[{"type": "text", "text": "```python\nclass ModelNew: ...\n```"}])
    assert parse_program(blocks)[0] == "class ModelNew: ...\n"


def test_scripted_fake_counts_tokens_and_runs_out_loudly():
    fake = ScriptedChatModel(script=["one"])
    msg = fake.invoke("hello there")
    assert msg.content == "one" and usage_of(msg)[0] > 0
    with pytest.raises(RuntimeError, match="ran out"):
        fake.invoke("again")


# --- no silent waits ------------------------------------------------------------------------------------


class _Busy(Exception):
    status_code = 503


def test_each_retry_is_announced_and_giving_up_is_not_a_retry(caplog):
    import logging

    from kernelwright.providers import WAIT_LOGGER, ProviderUnavailable, invoke_with_retry

    caplog.set_level(logging.INFO, logger=WAIT_LOGGER)
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    def always_busy() -> str:
        raise _Busy("the server is busy")

    with pytest.raises(ProviderUnavailable, match="kept failing"):
        invoke_with_retry(always_busy, total_s=20, what="the model m", sleep=sleep, clock=lambda: now[0])
    lines = [r.getMessage() for r in caplog.records]
    assert lines and all(re.fullmatch(
        r"the model m: HTTP 503: the server is busy; retry \d in \d+(\.\d)? s \(\d+(\.\d)? s of the 20 s retry time left\)", x
    ) for x in lines), lines  # fmt: skip
    assert [int(re.search(r"retry (\d)", x).group(1)) for x in lines] == list(range(1, len(lines) + 1))
    assert now[0] <= 20  # every announced wait was waited, within the retry time


def test_network_models_carry_a_wait_reporter_whose_notices_thin_out():
    from kernelwright.providers import WaitReporter
    from kernelwright.providers.chat import seconds

    model = load_chat_model(
        "served", base_url=f"http://127.0.0.1:{closed_port()}/v1", probe=False, timeout=90
    )
    reporters = [c for c in model.callbacks or [] if isinstance(c, WaitReporter)]
    assert len(reporters) == 1 and reporters[0].timeout_s == 90 and "served" in reporters[0].what
    assert [WaitReporter.notice_at(n) for n in range(5)] == [10.0, 30.0, 60.0, 120.0, 180.0]
    assert not [c for c in getattr(load_chat_model("offline"), "callbacks", None) or []]
    assert (seconds(0.42), seconds(9.94), seconds(9.96), seconds(40.4)) == ("0.4 s", "9.9 s", "10 s", "40 s")
