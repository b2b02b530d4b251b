"""The coder node: asks the chat model for one kernel and parses one ModelNew program from the answer.

An answer without a usable program (no code block, no ModelNew) becomes a failed candidate with the
reason, which the compiler turns into a parse-stage failure; it never stops the run. A provider error
that survives the client's retries does stop the run, with the error; the checkpoint lets it resume.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from nodes import resources
from nodes.records import Branch, Candidate, CostLedger, Usage
from providers.chat import parse_program, usage_of
from providers.protocol import message_text

if TYPE_CHECKING:
    from graphs.context import Context

META_PREFIX = "# kernelwright:"


def metadata_line(code: str | None) -> str | None:
    """The kernel's `# kernelwright: ...` line, when its first non-empty line is one."""
    for line in (code or "").splitlines():
        if line.strip():
            return line.strip() if line.strip().startswith(META_PREFIX) else None
    return None


def idea_of(answer: str) -> str:
    """The first line of prose outside code blocks, shortened: what the model said it would do."""
    outside = re.sub(r"```.*?(```|$)", "", answer, flags=re.S)
    for line in outside.splitlines():
        line = line.strip().lstrip("#*- ").strip()
        if len(line) > 3:
            return line[:200]
    return ""


def coder(branch: Branch, runtime: Runtime[Context]) -> Command[Literal["compiler"]]:
    branch = Branch.model_validate(branch)
    if branch.prompt is None:
        raise ValueError(f"branch {branch.job.node_id} reached the coder without a prompt")
    model = resources.chat_model(runtime.context)
    started = time.monotonic()
    message = model.invoke([SystemMessage(branch.prompt.system), HumanMessage(branch.prompt.user)])
    seconds = time.monotonic() - started
    tokens_in, tokens_out = usage_of(message)
    text = message_text(message)
    code, error = parse_program(message)
    candidate = Candidate(
        node_id=branch.job.node_id,
        code=code,
        error=error,
        meta=metadata_line(code),
        idea=idea_of(text),
        answer_chars=len(text),
        usage=Usage(llm_calls=1, tokens_in=tokens_in, tokens_out=tokens_out),
        seconds=round(seconds, 3),
    )
    return Command(
        update={"cost": CostLedger(llm_calls=1, tokens_in=tokens_in, tokens_out=tokens_out)},
        goto=Send("compiler", branch.model_copy(update={"candidate": candidate})),
    )
