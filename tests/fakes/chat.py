"""A scripted LangChain chat model: each call returns the next scripted answer.

Script items are strings (the answer text), AIMessages, exceptions (raised) or callables that get the
messages and return one of those. `rules` scripts the answers to `with_structured_output` calls the
same way (dicts or callables returning dicts). Usage metadata is reported (about 4 characters a token)
so token counting can be checked. Thread-safe: parallel branches may call it at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import PrivateAttr


def _text_of(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)


def fenced(code: str, prose: str = "Here is the kernel.") -> str:
    """An answer the way an LLM writes it: prose, then one fenced python block."""
    return f"{prose}\n\n```python\n{code.strip()}\n```\n"


class ScriptedChatModel(BaseChatModel):
    script: list[Any]
    rules: list[Any] = []
    loop: bool = False
    """Start the script over when it runs out (otherwise running out is an error)."""

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _next: int = PrivateAttr(default=0)
    _next_rule: int = PrivateAttr(default=0)
    _prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _rule_prompts: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        """Messages of every code call, in call order."""
        return list(self._prompts)

    @property
    def rule_prompts(self) -> list[list[BaseMessage]]:
        return list(self._rule_prompts)

    @property
    def calls(self) -> int:
        return len(self._prompts)

    def _take(self, items: list[Any], attr: str, messages: list[BaseMessage]) -> Any:
        with self._lock:
            i = getattr(self, attr)
            if i >= len(items):
                if not self.loop or not items:
                    raise RuntimeError(f"scripted model ran out of answers after {i} calls")
                i = i % len(items)
            setattr(self, attr, getattr(self, attr) + 1)
        item = items[i]
        if callable(item) and not isinstance(item, type):
            item = item(messages)
        if isinstance(item, BaseException):
            raise item
        return item

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self._prompts.append(list(messages))
        item = self._take(self.script, "_next", messages)
        msg = item if isinstance(item, AIMessage) else AIMessage(content=str(item))
        if msg.usage_metadata is None:
            tin = max(1, len(_text_of(messages)) // 4)
            tout = max(1, len(str(msg.content)) // 4)
            msg.usage_metadata = {"input_tokens": tin, "output_tokens": tout, "total_tokens": tin + tout}
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:
        def answer(value: Any) -> Any:
            messages = value if isinstance(value, list) else [value]
            with self._lock:
                self._rule_prompts.append(list(messages))
            item = self._take(self.rules, "_next_rule", messages)
            parsed = schema(**item) if isinstance(item, dict) else item
            if not include_raw:
                return parsed
            raw = AIMessage(
                content=str(item),
                usage_metadata={"input_tokens": 50, "output_tokens": 20, "total_tokens": 70},
            )
            return {"raw": raw, "parsed": parsed, "parsing_error": None}

        return RunnableLambda(answer)


ScriptItem = str | AIMessage | BaseException | Callable[[list[BaseMessage]], Any]
