"""One way to get a chat model: `load_chat_model(spec)`, and the token counting every caller shares.

Specs:
- "offline": the built-in deterministic kernel writer (providers/offline), no network;
  "offline:ignore-target-limits" the same writer writing as for an H100/H200 whatever the target (it
  fails where the target has less shared memory, for measuring what learned rules prevent);
- "openai:<model>": ChatOpenAI against api.openai.com (OPENAI_API_KEY required);
- any other "provider:model": LangChain's init_chat_model (the provider's package and key required);
- with a base URL (argument, KERNELWRIGHT_BASE_URL or OPENAI_BASE_URL): ChatOpenAI against an
  OpenAI-compatible server (vLLM, SGLang, Ollama, ...); the spec is the served model name, with or
  without an "openai:" prefix, and the key comes from OPENAI_API_KEY ("EMPTY" when unset, as local
  servers expect).

Problems are found at start, not halfway through a run: a missing key, a missing provider package or
a server that does not answer raises `ProviderError` with one line saying what to do. There is never
a silent fallback to the offline writer. Transient failures (timeouts, HTTP 408/409/429 and 5xx,
dropped connections) are retried with exponential backoff by the OpenAI client (`max_retries`) and,
in a run, by `invoke_with_retry`: backoff that honours `Retry-After`, for a total time rather than a
count, then one `ProviderUnavailable` line.

No wait is silent: each retry is announced ("... HTTP 500, retry 4 in 8 s ...") and a model whose answer
is slow in coming says so after 10, 30 and 60 s and then every minute (`WaitReporter`). These lines are
log records of the `kernelwright.wait` logger (the CLI prints them on stderr; Studio and Python programs
get them as log records) and, inside a graph run, custom stream events too; never prints to stdout.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

import httpx
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import SecretStr

from kernelwright.providers.protocol import extract_code, message_text

OFFLINE_SPECS = ("offline", "offline:ignore-target-limits")
"""Specs of the built-in writer (no network, no key)."""
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_RETRIES = 4
PROBE_TIMEOUT_S = 5.0
DEFAULT_RETRY_S = 120.0
MAX_BACKOFF_S = 30.0
T = TypeVar("T")

WAIT_LOGGER = "kernelwright.wait"
"""The logger of every line that says what a long wait is waiting for: a model that fails and is retried
or is slow to answer (`kernelwright.wait.model`), a memory server that does not answer
(`kernelwright.wait.memory`, memory/http_retry.py)."""
_wait_log = logging.getLogger(f"{WAIT_LOGGER}.model")
SLOW_NOTICES_S = (10.0, 30.0, 60.0)
"""When a model's answer is late, the seconds after which to say so; then every SLOW_REPEAT_S."""
SLOW_REPEAT_S = 60.0


def seconds(x: float) -> str:
    """A wait as a person reads it: tenths below 10 s ("0.4 s"), whole seconds above ("40 s")."""
    return f"{x:.1f} s" if round(x, 1) < 10 else f"{x:.0f} s"


def stream_writer() -> Callable[[Any], None] | None:
    """The running graph's custom stream writer, or None outside a graph run."""
    try:
        from langgraph.config import get_stream_writer

        return get_stream_writer()
    except Exception:  # outside a runnable context there is no writer: the log record is enough
        return None


def announce_wait(log: logging.Logger, level: int, message: str, **fields: Any) -> None:
    """One wait line: a log record, and a custom stream event `{"wait": {...}}` inside a graph run."""
    log.log(level, message)
    writer = stream_writer()
    if writer is not None:
        try:
            writer({"wait": {"message": message, **fields}})
        except Exception:  # a stream that cannot take the event does not stop the call it describes
            log.debug("could not stream a wait event", exc_info=True)


class ProviderError(RuntimeError):
    """A chat model cannot be used as configured; the message is one line that says why."""


class ProviderUnavailable(ProviderError):
    """The provider kept failing with transient errors for longer than the retry time allows.

    `run_dir` is the run that stopped, when the caller knows it (for the `--resume` hint)."""

    def __init__(self, message: str, run_dir: str | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK error carries (openai, httpx), if any."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return int(status) if isinstance(status, int) else None


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: timeouts, dropped connections, HTTP 408, 409, 429 and 5xx."""
    status = status_of(exc)
    if status is not None:
        return status in (408, 409, 429) or status >= 500
    if isinstance(exc, TimeoutError | ConnectionError | httpx.TransportError):
        return True
    # the openai SDK's APITimeoutError / APIConnectionError carry no status
    return type(exc).__name__ in ("APITimeoutError", "APIConnectionError")


def retry_after_s(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds the server asked to wait (`retry-after-ms`, or `Retry-After` in seconds or as a date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def describe_failure(exc: BaseException) -> str:
    """One line: the HTTP status and the first line of the message."""
    status = status_of(exc)
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    head = f"HTTP {status}" if status is not None else type(exc).__name__
    return f"{head}: {first}" if first else head


def invoke_with_retry(
    call: Callable[[], T],
    *,
    total_s: float,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`call()`, retried on transient failures with exponential backoff (1, 2, 4 ... 30 s, jittered) or
    the server's `Retry-After`, while the next try would start within `total_s` of the first.

    Then `ProviderUnavailable` with one line naming `what`, the tries and the last error. A failure that
    is not transient (a rejected request) becomes a `ProviderError` at once. Each retry is announced on
    WAIT_LOGGER before its wait, and an answer after retries says how long it took."""
    started = clock()
    tries = 0
    while True:
        tries += 1
        try:
            answer = call()
            if tries > 1:
                elapsed = clock() - started
                announce_wait(
                    _wait_log, logging.INFO, f"{what} answered after {tries - 1} {'retry' if tries == 2 else 'retries'} ({seconds(elapsed)})",
                    what=what, retries=tries - 1, elapsed_s=round(elapsed, 1),
                )  # fmt: skip
            return answer
        except Exception as exc:
            if not is_transient(exc):
                if status_of(exc) is not None or type(exc).__module__.startswith("openai"):
                    raise ProviderError(f"{what} refused the request: {describe_failure(exc)}") from exc
                raise
            asked = retry_after_s(exc)
            backoff = min(MAX_BACKOFF_S, 2.0 ** (tries - 1)) * random.uniform(0.5, 1.0)
            delay = asked if asked is not None else backoff
            elapsed = clock() - started
            if elapsed + delay > total_s:
                raise ProviderUnavailable(
                    f"{what} kept failing for {elapsed:.0f} s ({tries} tries, retry time {total_s:g} s): "
                    f"{describe_failure(exc)}"
                ) from exc
            announce_wait(
                _wait_log,
                logging.WARNING,
                f"{what}: {describe_failure(exc)}; retry {tries} in {seconds(delay)} "
                f"({seconds(total_s - elapsed)} of the {total_s:g} s retry time left)",
                what=what, error=describe_failure(exc), retry=tries, delay_s=round(delay, 1),
                elapsed_s=round(elapsed, 1), retry_time_s=total_s,
            )  # fmt: skip
            sleep(delay)


@dataclass
class _Call:
    started: float
    notices: int = 0
    next_at: float = 0.0


class WaitReporter(BaseCallbackHandler):
    """Says when a chat model's answers are slow in coming: a callback on the model (every call: the
    coder's, the rule judge's) that, while requests are in flight, logs "no answer yet after N s" after
    SLOW_NOTICES_S and then every SLOW_REPEAT_S (one line for all requests then waiting), and, for a
    request that was reported late, how long its answer took. A background thread keeps the time; the
    call itself is not touched."""

    run_inline = True
    raise_error = False

    def __init__(self, what: str, timeout_s: float | None = None) -> None:
        self.what = what
        self.timeout_s = timeout_s
        self._calls: dict[UUID, _Call] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._watcher: threading.Thread | None = None

    @staticmethod
    def notice_at(notices: int) -> float:
        """Seconds after a call's start at which its notice number `notices` (0, 1, ...) is due."""
        if notices < len(SLOW_NOTICES_S):
            return SLOW_NOTICES_S[notices]
        return SLOW_NOTICES_S[-1] + SLOW_REPEAT_S * (notices - len(SLOW_NOTICES_S) + 1)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._calls)

    # -- callbacks ---------------------------------------------------------------------------------
    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._begin(run_id)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._begin(run_id)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, failed=False)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, failed=True)

    # -- bookkeeping -------------------------------------------------------------------------------
    def _begin(self, run_id: UUID) -> None:
        now = time.monotonic()
        with self._lock:
            self._calls[run_id] = _Call(started=now, next_at=now + self.notice_at(0))
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="kernelwright-wait", daemon=True)
                self._watcher.start()
        self._wake.set()

    def _end(self, run_id: UUID, *, failed: bool) -> None:
        with self._lock:
            call = self._calls.pop(run_id, None)
        self._wake.set()
        if call is not None and call.notices and not failed:
            took = time.monotonic() - call.started
            _wait_log.info(f"{self.what} answered after {seconds(took)}")

    def _watch(self) -> None:
        while True:
            self._wake.clear()
            with self._lock:
                if not self._calls:
                    self._watcher = None
                    return
                now = time.monotonic()
                due = [c for c in self._calls.values() if now >= c.next_at]
                for c in due:
                    c.notices += 1
                    c.next_at = c.started + self.notice_at(c.notices)
                waiting = len(self._calls)
                oldest = max(now - c.started for c in self._calls.values())
                next_at = min(c.next_at for c in self._calls.values())
            if due:
                several = f" ({waiting} requests waiting)" if waiting > 1 else ""
                limit = f"; a request times out after {self.timeout_s:g} s" if self.timeout_s else ""
                _wait_log.info(f"{self.what}: no answer yet after {seconds(oldest)}{several}{limit}")
            self._wake.wait(max(0.05, next_at - time.monotonic()))


def resolve_base_url(base_url: str | None = None) -> str | None:
    """The OpenAI-compatible server to use, from the argument or the environment."""
    url = base_url or os.environ.get("KERNELWRIGHT_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    return url.rstrip("/") if url else None


def probe_server(
    base_url: str, api_key: str, model: str | None = None, *, timeout: float = PROBE_TIMEOUT_S
) -> list[str]:
    """GET {base_url}/models: the served model ids. Raises ProviderError when the server cannot be used."""
    url = f"{base_url.rstrip('/')}/models"
    try:
        resp = httpx.get(url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ProviderError(f"cannot reach the OpenAI-compatible server at {base_url}: {exc}") from exc
    if resp.status_code in (401, 403):
        raise ProviderError(
            f"the server at {base_url} refused the API key (HTTP {resp.status_code}); set OPENAI_API_KEY"
        )
    if resp.status_code == 404:
        return []  # some servers do not list models; the first request will tell
    if resp.status_code >= 400:
        raise ProviderError(f"the server at {base_url} answered GET /models with HTTP {resp.status_code}")
    try:
        ids = [str(m.get("id")) for m in resp.json().get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError) as exc:
        raise ProviderError(f"the server at {base_url} did not answer GET /models with a model list") from exc
    if model and ids and model not in ids:
        raise ProviderError(
            f"the server at {base_url} does not serve model {model!r}; it serves: {', '.join(ids)}"
        )
    return ids


def load_chat_model(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_retries: int = DEFAULT_RETRIES,
    probe: bool = True,
    **kwargs: Any,
) -> BaseChatModel:
    """A chat model for `spec` (see the module docstring); `probe=False` skips the server check.

    Other keyword arguments go to the model's constructor (for "offline", only `seed` is used).
    """
    spec = (spec or "").strip()
    if not spec:
        raise ProviderError(
            "no model given: use --model offline, openai:<model>, provider:model or a served name"
        )
    if spec in OFFLINE_SPECS:
        from kernelwright.providers.offline import OfflineKernelWriter

        return OfflineKernelWriter(
            seed=int(kwargs.get("seed", 0)), ignore_target_limits=spec == "offline:ignore-target-limits"
        )
    url = resolve_base_url(base_url)
    if url:
        from langchain_openai import ChatOpenAI

        model = spec.removeprefix("openai:")
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        if probe:
            probe_server(url, key, model)
        return ChatOpenAI(
            model=model,
            base_url=url,
            api_key=SecretStr(key),
            timeout=timeout,
            max_retries=max_retries,
            callbacks=[WaitReporter(f"the model {model} at {url}", timeout)],
            **kwargs,
        )
    if spec.startswith("openai:"):
        from langchain_openai import ChatOpenAI

        openai_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not openai_key:
            raise ProviderError(
                f"model {spec!r} needs OPENAI_API_KEY in the environment (or --base-url for a local server)"
            )
        return ChatOpenAI(
            model=spec.split(":", 1)[1],
            api_key=SecretStr(openai_key),
            timeout=timeout,
            max_retries=max_retries,
            callbacks=[WaitReporter(f"the model {spec}", timeout)],
            **kwargs,
        )
    if ":" not in spec:
        raise ProviderError(
            f"unknown model spec {spec!r}: use offline, openai:<model>, provider:model, or a served model name "
            "with --base-url"
        )
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ProviderError(
            f"model {spec!r} needs the langchain package for init_chat_model: pip install langchain"
        ) from exc
    try:
        model_obj = init_chat_model(spec, timeout=timeout, max_retries=max_retries, **kwargs)
    except ImportError as exc:
        raise ProviderError(f"model {spec!r}: {str(exc).splitlines()[0]}") from exc
    except Exception as exc:  # provider constructors raise their own types for missing keys
        raise ProviderError(
            f"cannot create model {spec!r}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from exc
    if not isinstance(model_obj, BaseChatModel):
        raise ProviderError(f"model {spec!r} did not resolve to a chat model")
    reporter = WaitReporter(f"the model {spec}", timeout)
    if isinstance(model_obj.callbacks, BaseCallbackManager):
        model_obj.callbacks.add_handler(reporter)
    else:
        model_obj.callbacks = [*(model_obj.callbacks or []), reporter]
    return model_obj


def is_llm(model: BaseChatModel) -> bool:
    """False for the built-in offline writer (which cannot draft rules), True for any other chat model."""
    return (
        not bool(getattr(model, "is_offline_writer", False)) and type(model).__name__ != "OfflineKernelWriter"
    )


def usage_of(message: BaseMessage) -> tuple[int, int]:
    """(input tokens, output tokens) a chat model reported for one answer; (0, 0) when it reported none."""
    usage = getattr(message, "usage_metadata", None)
    if usage:
        return int(usage.get("input_tokens", 0) or 0), int(usage.get("output_tokens", 0) or 0)
    meta = getattr(message, "response_metadata", None) or {}
    tu = meta.get("token_usage") or meta.get("usage") or {}
    if isinstance(tu, dict):
        return int(tu.get("prompt_tokens", 0) or 0), int(tu.get("completion_tokens", 0) or 0)
    return 0, 0


def parse_program(message: AIMessage | BaseMessage) -> tuple[str | None, str | None]:
    """(code, None) for an answer holding one ModelNew module, else (None, why not)."""
    text = message_text(message)
    if not text.strip():
        return None, "empty answer"
    code = extract_code(text)
    if code is None:
        return None, "no fenced ```python code block in the answer"
    if "ModelNew" not in code:
        return None, "the code block does not define ModelNew"
    return code, None
