"""Chat models for the coder and the reflector: `load_chat_model(spec)` is the one way to get one.

The prompt protocol shared with the context manager is in providers/protocol.py (the tagged sections,
the fenced answer, and `KernelHeader`, the `# kernelwright:` line every kernel starts with); the
built-in deterministic writer in providers/offline/.

The names below load their submodule on first use (PEP 562): the memory reads only the protocol, and
does not import LangChain through the chat models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelwright import lazy_exports

if TYPE_CHECKING:
    from kernelwright.providers.chat import (
        WAIT_LOGGER,
        ProviderError,
        ProviderUnavailable,
        WaitReporter,
        invoke_with_retry,
        is_llm,
        load_chat_model,
        parse_program,
        probe_server,
        resolve_base_url,
        usage_of,
    )
    from kernelwright.providers.protocol import KernelHeader, header_line, message_text

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `providers`.
if __name__ != "kernelwright.providers":
    raise ImportError(f"import kernelwright.providers, not {__name__}: the package has one import name")

_EXPORTS = {
    "chat": (
        "WAIT_LOGGER",
        "ProviderError",
        "ProviderUnavailable",
        "invoke_with_retry",
        "is_llm",
        "load_chat_model",
        "parse_program",
        "probe_server",
        "resolve_base_url",
        "usage_of",
        "WaitReporter",
    ),
    "protocol": ("KernelHeader", "header_line", "message_text"),
}

__all__ = [
    "WAIT_LOGGER",
    "KernelHeader",
    "ProviderError",
    "ProviderUnavailable",
    "header_line",
    "invoke_with_retry",
    "is_llm",
    "load_chat_model",
    "message_text",
    "parse_program",
    "probe_server",
    "resolve_base_url",
    "usage_of",
    "WaitReporter",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
