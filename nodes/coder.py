"""The coder node: asks the chat model for one kernel and parses one ModelNew program from the answer.

An answer without a usable program (no code block, no ModelNew) becomes a failed candidate with the
reason, which the compiler turns into a parse-stage failure; it never stops the run. The answer is kept
with the candidate (report.html and `kernelwright show` print it). A provider that keeps failing with
transient errors is retried for `Context.llm_retry_s` seconds (providers.invoke_with_retry); after that
the run stops with `ProviderUnavailable`, and the checkpoint lets it resume.
"""

from __future__ import annotations

import re
import time
from typing import Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from kernelwright.nodes import resources
from kernelwright.nodes.records import Branch, Candidate, CostLedger, Usage
from kernelwright.nodes.run_context import Context
from kernelwright.providers.chat import invoke_with_retry, parse_program, usage_of
from kernelwright.providers.protocol import header_line, message_text


def idea_of(answer: str) -> str:
    """The first line of prose outside code blocks, shortened: what the model said it would do."""
    outside = re.sub(r"```.*?(```|$)", "", answer, flags=re.S)
    for line in outside.splitlines():
        line = line.strip().lstrip("#*- ").strip()
        if len(line) > 3:
            return line[:200]
    return ""


def provider_name(ctx: Context) -> str:
    """How a one-line error names the model: its spec, and the server for an OpenAI-compatible one."""
    if ctx.chat_model is not None:
        return f"the chat model {type(ctx.chat_model).__name__}"
    return f"the model {ctx.model}" + (f" at {ctx.base_url}" if ctx.base_url else "")


def coder(branch: Branch, runtime: Runtime[Context]) -> Command[Literal["compiler"]]:
    branch = Branch.model_validate(branch)
    if branch.prompt is None:
        raise ValueError(f"branch {branch.job.node_id} reached the coder without a prompt")
    ctx = runtime.context
    model = resources.chat_model(ctx)
    messages = [SystemMessage(branch.prompt.system), HumanMessage(branch.prompt.user)]
    started = time.monotonic()
    message = invoke_with_retry(
        lambda: model.invoke(messages), total_s=ctx.llm_retry_s, what=provider_name(ctx)
    )
    seconds = time.monotonic() - started
    tokens_in, tokens_out = usage_of(message)
    text = message_text(message)
    code, error = parse_program(message)
    unsupported = (getattr(message, "response_metadata", None) or {}).get("unsupported")
    candidate = Candidate(
        node_id=branch.job.node_id,
        code=code,
        error=error,
        meta=header_line(code),
        idea=idea_of(text),
        answer=text,
        answer_chars=len(text),
        usage=Usage(llm_calls=1, tokens_in=tokens_in, tokens_out=tokens_out),
        seconds=round(seconds, 3),
        unsupported=unsupported if isinstance(unsupported, str) and unsupported else None,
    )
    return Command(
        update={"cost": CostLedger(llm_calls=1, tokens_in=tokens_in, tokens_out=tokens_out)},
        goto=Send("compiler", branch.model_copy(update={"candidate": candidate})),
    )
