"""The coder node: asks the chat model for one kernel and parses one ModelNew program from the answer.

An answer without a usable program (no code block, no ModelNew) becomes a failed candidate with the
reason, which the compiler turns into a parse-stage failure; it never stops the run. The answer is kept
with the candidate (report.html and `kernelwright show` print it). A provider that keeps failing with
transient errors is retried for `Context.llm_retry_s` seconds (providers.invoke_with_retry); after that
the run stops with `ProviderUnavailable`, and the checkpoint lets it resume.

No failure is repeated (nodes/repeats.py): the designs closed for the task are added to the prompt's
<rules>; a program that repeats a failed one (the same up to its config) or uses a closed design is not
handed to the judge. The coder asks again, naming the failure, at most `REPEAT_ASKS` times; a program that
still repeats goes on as blocked (the compiler records it as failed without judging it). The repeat of a
failure is that failure's second occurrence, so it closes its design for the asks that follow.
"""

from __future__ import annotations

import functools
import re
import time
from typing import Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from kernelwright.nodes import resources
from kernelwright.nodes.prompts import closed_design_rule, closed_request, repeat_request, with_rules
from kernelwright.nodes.records import (
    Branch,
    Candidate,
    ContextItem,
    CostLedger,
    FailedProgram,
    Prompt,
    Usage,
)
from kernelwright.nodes.repeats import header_design, repeated
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


REPEAT_ASKS = 2
"""How often the writer is asked again when its program repeats a failure or uses a closed design."""


def _repeat(
    code: str | None, branch: Branch, closed: dict[str, str]
) -> tuple[str, str, FailedProgram | None] | None:
    """(why it must not be judged, the text that asks again, the failed program whose design the repeat
    closes) or None."""
    job = branch.job
    hit = repeated(code, job.failed_programs)
    if hit is not None:
        failed, up_to_config = hit
        closes = failed if failed.design and failed.design not in closed else None
        why = f"the same program as {failed.node_id}" + (" up to its config" if up_to_config else "")
        ask = repeat_request(
            failed.node_id, up_to_config, failed.error_kind, failed.error, closes.design if closes else None
        )
        return why, ask, closes
    design, _ = header_design(code)
    if design and design in closed:
        return f"design {design} is closed for this task", closed_request(design), None
    return None


def coder(branch: Branch, runtime: Runtime[Context]) -> Command[Literal["compiler"]]:
    branch = Branch.model_validate(branch)
    if branch.prompt is None:
        raise ValueError(f"branch {branch.job.node_id} reached the coder without a prompt")
    ctx = runtime.context
    model = resources.chat_model(ctx)
    job = branch.job
    closed = {c.design: closed_design_rule(c.design, c.family, c.error_kind) for c in job.closed_designs}
    user = with_rules(branch.prompt.user, list(closed.values()))
    started = time.monotonic()
    asks, tokens_in, tokens_out, extra = 0, 0, 0, ""
    closed_by: list[str] = []
    while True:
        messages = [SystemMessage(branch.prompt.system), HumanMessage(user + extra)]
        message = invoke_with_retry(
            functools.partial(model.invoke, messages), total_s=ctx.llm_retry_s, what=provider_name(ctx)
        )
        t_in, t_out = usage_of(message)
        tokens_in, tokens_out = tokens_in + t_in, tokens_out + t_out
        text = message_text(message)
        code, error = parse_program(message)
        repeat = _repeat(code, branch, closed)
        if repeat is None or asks >= REPEAT_ASKS:
            break
        asks += 1
        why, ask, closes = repeat
        if closes is not None:  # the failure's second occurrence: its design is closed from here on
            closed[closes.design] = closed_design_rule(closes.design, closes.family, closes.error_kind)
            closed_by.append(closes.node_id)
            user = with_rules(user, [closed[closes.design]])
        extra = "\n\n" + ask + "\n"
    seconds = time.monotonic() - started
    unsupported = (getattr(message, "response_metadata", None) or {}).get("unsupported")
    hit = repeated(code, job.failed_programs) if repeat is not None else None
    candidate = Candidate(
        node_id=job.node_id,
        code=code,
        error=error,
        meta=header_line(code),
        idea=idea_of(text),
        answer=text,
        answer_chars=len(text),
        usage=Usage(llm_calls=1 + asks, tokens_in=tokens_in, tokens_out=tokens_out),
        seconds=round(seconds, 3),
        unsupported=unsupported if isinstance(unsupported, str) and unsupported else None,
        repeat_asks=asks,
        blocked=f"not judged: {repeat[0]} after {asks} more ask(s)" if repeat is not None else None,
        repeat_of=hit[0].node_id if hit is not None else None,
        closed=closed_by,
    )
    context = branch.context
    if context is not None and closed:
        context = context.model_copy(deep=True)
        context.injected += [
            ContextItem(kind="closed_design", id=d, tier="hot", text=t, reason="closed for this task")
            for d, t in closed.items()
        ]
    return Command(
        update={"cost": CostLedger(llm_calls=1 + asks, tokens_in=tokens_in, tokens_out=tokens_out)},
        goto=Send(
            "compiler",
            branch.model_copy(
                update={
                    "candidate": candidate,
                    "prompt": Prompt(system=branch.prompt.system, user=user + extra),
                    "context": context,
                }
            ),
        ),
    )
