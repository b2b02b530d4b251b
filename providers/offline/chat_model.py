"""`OfflineKernelWriter`: the built-in writer as a LangChain chat model, so the graph is the same for
every provider. No network, no API key; deterministic for a given prompt and seed.
"""

from __future__ import annotations

import math
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from kernelwright.providers.offline.kinds.kind import without_target_limits
from kernelwright.providers.offline.writer import write_program
from kernelwright.providers.protocol import message_text


def estimate_tokens(text: str) -> int:
    """Token count estimated as characters / 4 (the writer has no tokenizer of its own)."""
    return math.ceil(len(text) / 4)


class OfflineKernelWriter(BaseChatModel):
    """Writes Triton kernels for KernelBench-format tasks from the prompt's sections, with no LLM.

    `seed` makes the choices that have no other reason (which knob a small step moves) reproducible:
    the same prompt and seed always give the same program.
    """

    seed: int = 0
    ignore_target_limits: bool = False
    """Write as for an H100/H200 whatever the <target> says (kind.without_target_limits): the spec
    "offline:ignore-target-limits". Such a writer fails on a GPU with less shared memory until rules
    learned from those failures steer it; for measuring what rules prevent, not for real runs."""
    is_offline_writer: bool = True

    @property
    def _llm_type(self) -> str:
        return "kernelwright-offline"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"seed": self.seed, "ignore_target_limits": self.ignore_target_limits}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        human = [m for m in messages if isinstance(m, HumanMessage)]
        prompt = message_text(human[-1]) if human else (message_text(messages[-1]) if messages else "")
        if self.ignore_target_limits:
            prompt = without_target_limits(prompt)
        answer = write_program(prompt, seed=self.seed)
        text = answer.text
        seen = "".join(message_text(m) for m in messages)
        usage = {
            "input_tokens": estimate_tokens(seen),
            "output_tokens": estimate_tokens(text),
            "total_tokens": estimate_tokens(seen) + estimate_tokens(text),
        }
        meta: dict[str, Any] = {
            "model_name": self._llm_type,
            "token_usage_estimated": "characters / 4",
            "wrote_program": answer.code is not None,
        }
        if answer.unsupported:
            meta["unsupported"] = answer.unsupported
        if answer.meta is not None:
            meta.update(family=answer.meta.family, design=answer.meta.design, config=answer.meta.config)
        message = AIMessage(content=text, usage_metadata=usage, response_metadata=meta)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)], llm_output={"token_usage": usage})
