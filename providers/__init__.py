"""Chat models for the coder and the reflector: `load_chat_model(spec)` is the one way to get one.

The prompt protocol shared with the context manager is in providers/protocol.py (the tagged sections,
the fenced answer, and `KernelHeader`, the `# kernelwright:` line every kernel starts with); the
built-in deterministic writer in providers/offline/.
"""

from kernelwright.providers.chat import (
    ProviderError,
    ProviderUnavailable,
    invoke_with_retry,
    is_llm,
    load_chat_model,
    parse_program,
    probe_server,
    resolve_base_url,
    usage_of,
)
from kernelwright.providers.protocol import KernelHeader, header_line, message_text

__all__ = [
    "KernelHeader",
    "ProviderError",
    "ProviderUnavailable",
    "invoke_with_retry",
    "message_text",
    "is_llm",
    "header_line",
    "load_chat_model",
    "parse_program",
    "probe_server",
    "resolve_base_url",
    "usage_of",
]
