"""One way to get a chat model: `load_chat_model(spec)`, and the token counting every caller shares.

Specs:
- "offline": the built-in deterministic kernel writer (providers/offline), no network;
- "openai:<model>": ChatOpenAI against api.openai.com (OPENAI_API_KEY required);
- any other "provider:model": LangChain's init_chat_model (the provider's package and key required);
- with a base URL (argument, KERNELWRIGHT_BASE_URL or OPENAI_BASE_URL): ChatOpenAI against an
  OpenAI-compatible server (vLLM, SGLang, Ollama, ...); the spec is the served model name, with or
  without an "openai:" prefix, and the key comes from OPENAI_API_KEY ("EMPTY" when unset, as local
  servers expect).

Problems are found at start, not halfway through a run: a missing key, a missing provider package or
a server that does not answer raises `ProviderError` with one line saying what to do. There is never
a silent fallback to the offline writer. Transient failures (timeouts, HTTP 429 and 5xx, dropped
connections) are retried with exponential backoff by the OpenAI client (`max_retries`).
"""

from __future__ import annotations

import os
from typing import Any

import httpx
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import SecretStr

from providers.protocol import extract_code, message_text

DEFAULT_TIMEOUT_S = 180.0
DEFAULT_RETRIES = 4
PROBE_TIMEOUT_S = 5.0


class ProviderError(RuntimeError):
    """A chat model cannot be used as configured; the message is one line that says why."""


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
    if spec == "offline":
        from providers.offline import OfflineKernelWriter

        return OfflineKernelWriter(seed=int(kwargs.get("seed", 0)))
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
