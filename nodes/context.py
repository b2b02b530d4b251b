"""The context node: builds the coder's prompt for one expansion with the active context manager.

The user message comes from `build_context` (nodes/context_builder.py): the request, task, target,
parent kernel and feedback (hot), representative designs, relevant rules and ranked cases (warm),
cross-hardware cases and notes (cold), under the Context's token budget. The system prompt and the
wording of each request kind come from nodes/prompts.py. What was injected and what was cut travels
with the branch and ends up in the attempt's record and the report.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from kernelwright.hardware.targets import Target, detect_target, get_target
from kernelwright.nodes import resources
from kernelwright.nodes.context_builder import build_context
from kernelwright.nodes.prompts import SYSTEM_PROMPT, request_text
from kernelwright.nodes.records import Branch, Prompt, RunInfo
from kernelwright.nodes.run_context import Context


def run_target(run: RunInfo) -> Target:
    """The run's target profile (a bundled one by name, else detected again, e.g. an unknown GPU)."""
    try:
        return get_target(run.target)
    except ValueError:
        return detect_target(run.device)


def context(branch: Branch, runtime: Runtime[Context]) -> Command[Literal["coder"]]:
    branch = Branch.model_validate(branch)
    ctx = runtime.context
    job = branch.job
    memory = resources.run_memory(ctx, branch.run.run_dir)
    bundle = build_context(
        branch.task,
        job.action,
        request_text=request_text(job.action),
        parent_code=job.parent_code,
        feedback=job.parent_feedback,
        error_kind=job.parent_error_kind,
        target=run_target(branch.run),
        hardware=branch.run.target,
        versions=branch.run.versions,
        memory=memory,
        designs=job.designs,
        tried=job.tried,
        budget=ctx.context_tokens,
        exclude_case_ids=[job.parent_case_id] if job.parent_case_id else [],
        precision=ctx.precision,
        rules=ctx.rules,
    )
    prompt = Prompt(system=SYSTEM_PROMPT, user=bundle.prompt)
    return Command(
        goto=Send("coder", branch.model_copy(update={"prompt": prompt, "context": bundle.record()}))
    )
