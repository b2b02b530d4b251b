"""The reflector node: scores an attempt, writes it to memory, and learns a rule from a failure.

For every attempt it:
1. classifies it (correct / wrong output / failed) and computes the search reward;
2. writes a Case (code, feedback, outcome, hardware, toolchain) with a lineage edge to the parent's case;
3. records which rules were in the attempt's context and whether it failed (the rules' measured effect);
4. for a failure, drafts one "You cannot ..." rule and merges it into the rule book with its evidence.
   With an LLM provider the model drafts it (structured output, `RuleDraft`); with the offline writer,
   or when the model's draft is unusable, the rule is built from the kernel's metadata line and the
   normalised error signature, e.g. "You cannot use design=tiled with BLOCK=4096,num_warps=16 on
   NVIDIA H200: compile_error: out of resources ...".

No failure repeated (nodes/repeats.py): a failure that is its design's second with one error kind and
message closes the design for the task (the coder's prompts say so from then on), and a rule is learned
from it that forbids the design itself: "You cannot use design=rows for norm on NVIDIA H200: two of its
programs failed the same way (...)". A program the coder blocked before the judge (it repeated a failed
one) writes no case and no rule exposure (nothing ran); it learns the closing rule when it closes a design.

Nothing is learned from an attempt that says nothing about its kernel (`not_the_kernels_fault`): a
timeout (on the CPU interpreter a large task alone can run past the limit), a failure of the evaluation
machinery (harness_error, a worker killed from outside), or the offline writer having no program for
the task. Such an attempt writes no case, no rule and no rule exposure; its reflection says why. (A bf16
kernel with tl.dot that mismatched on the CPU interpreter used to be on this list: Triton 3.6's interpreter
multiplied bf16 bit patterns. The judge's fork server now makes it multiply values, see
hardware/candidate/interpreter_fixes.py, so such a mismatch is the kernel's.)

Memory writes are made idempotent for resume: the case id is derived from the run and node, and a
journal in the run directory (reflections.jsonl) records finished reflections, so a step re-run after a
crash reuses what was written instead of writing it twice.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from langgraph.types import Command

from kernelwright.hardware.result import EvalResult
from kernelwright.nodes import resources
from kernelwright.nodes.prompts import (
    RULE_SYSTEM_PROMPT,
    RuleDraft,
    SameRule,
    render_feedback,
    rule_prompt,
    same_rule_prompt,
)
from kernelwright.nodes.records import Attempt, Branch, ClosedDesign, CostLedger, Reflection, Status, Timing
from kernelwright.nodes.repeats import closes_design, failed_of
from kernelwright.nodes.run_context import Context
from kernelwright.nodes.search import reward_for
from kernelwright.providers.chat import is_llm, usage_of
from kernelwright.providers.protocol import KernelHeader, beside_torch, kept_as_torch

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


JOURNAL = "reflections.jsonl"
SIGNATURE_CHARS = 160
_journal_lock = threading.Lock()


def classify(result: EvalResult) -> Status:
    """correct; wrong (ran, wrong shape or values); failed (did not parse, compile or run)."""
    if result.correct:
        return "correct"
    if result.error_kind in ("mismatch", "shape_mismatch"):
        return "wrong"
    return "failed"


def not_the_kernels_fault(result: EvalResult, code: str | None, offline_writer: bool) -> str | None:
    """Why this failure teaches nothing about the kernel, or None when it does."""
    kind = result.error_kind
    if kind == "harness_error":
        return "the evaluation machinery failed (harness_error), not the kernel"
    if kind == "timeout":
        return (
            "a timeout says nothing certain about the kernel (under the CPU interpreter the task's size "
            "alone can run past the limit)"
        )
    if kind == "crash" and "SIGKILL" in (result.error or ""):
        return "the worker was killed from outside (SIGKILL: the machine ran out of memory, or an operator)"
    if code is None and offline_writer:
        return "the offline writer has no program for this task"
    return None


def case_id_for(run_id: str, node_id: str) -> str:
    return f"case-{run_id[:16]}-{node_id}"


def _journal_find(run_dir: str, run_id: str, node_id: str) -> Reflection | None:
    path = Path(run_dir) / JOURNAL
    if not path.exists():
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if data.get("run_id") == run_id and data.get("node_id") == node_id:
            return Reflection.model_validate(data.get("reflection", {}))
    return None


def _journal_append(run_dir: str, run_id: str, node_id: str, reflection: Reflection) -> None:
    path = Path(run_dir) / JOURNAL
    line = (
        json.dumps({"run_id": run_id, "node_id": node_id, "reflection": reflection.model_dump(mode="json")})
        + "\n"
    )
    with _journal_lock, path.open("a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def _config_text(config: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


# A kernel line of the compile feedback (hardware.compile.feedback.KernelCompileReport.summary) that ran
# out of shared memory, and the launch constants that size its buffers: tiles and pipeline stages.
_OVER_SMEM = re.compile(r"\[([^\]]*)\][^\n]*EXCEEDS shared memory limit")
_SMEM_KEY = re.compile(r"BLOCK_[A-Z0-9_]+|num_stages")


def _smem_pairs(error: str | None) -> dict[str, str] | None:
    """The tile and stage constants of the first kernel the feedback says exceeds the target's shared
    memory, or None. What failed is that kernel's buffers, which its tiles and stages size: not its
    warps, tile order or hints, and not the primary kernel's config where another kernel of the program
    ran out (a SwiGLU's second product once failed under its first product's header)."""
    m = _OVER_SMEM.search(error or "")
    if m is None:
        return None
    consts = dict(p.strip().split("=", 1) for p in m.group(1).split(",") if "=" in p)
    keys = sorted((k for k in consts if _SMEM_KEY.fullmatch(k)), key=lambda k: k == "num_stages")
    return {k: consts[k] for k in keys} or None  # tiles, then stages, as a header lists them


def judge_same_rule(judge: BaseChatModel, a: str, b: str) -> bool:
    """Ask a chat model whether two rules are duplicates (the RuleBook's `judge`): structured output
    when the model supports it, else the first yes/no word of its answer."""
    prompt = same_rule_prompt(a, b)
    try:
        structured = judge.with_structured_output(SameRule)
    except NotImplementedError:
        structured = None
    if structured is not None:
        out: Any = structured.invoke(prompt)
        if isinstance(out, SameRule):
            return out.same
        if isinstance(out, dict) and "same" in out:
            return bool(out["same"])
    msg = judge.invoke(prompt)
    text = msg.content if isinstance(msg.content, str) else str(msg.content)
    m = re.search(r"\b(yes|no)\b", text.lower())
    if not m:
        raise ValueError(f"rule judge answered neither yes nor no: {text[:80]!r}")
    return m.group(1) == "yes"


def kept_torch_call(code: str) -> str | None:
    """The first op the program says it kept in torch (`providers.protocol.kept_as_torch`: "kept as torch:
    conv2d") that it really calls (`conv2d(`), or None."""
    return next((n for n in kept_as_torch(code) if n and re.search(rf"\b{n}\(", code)), None)


def signature_rule(code: str | None, result: EvalResult, target: str) -> str:
    """A rule from the kernel's metadata line and the normalised error, for when no LLM drafts one."""
    from kernelwright.memory.records import error_signature

    sig = error_signature(result.error_kind, result.error)
    if len(sig) > SIGNATURE_CHARS:  # the head names the error; the rest is detail the evidence keeps
        sig = sig[:SIGNATURE_CHARS].rsplit(" ", 1)[0] + " ..."
    if code is None:
        return f"You cannot answer without exactly one fenced python block defining ModelNew ({sig})"
    header = KernelHeader.parse(code)
    if header is not None and header.design:
        what = f"use design={header.design}"
        config = _smem_pairs(result.error) or header.config
        if config:
            what += f" with {_config_text(config)}"
        if header.family:
            what += f" for {header.family}"
        kept = kept_torch_call(code)
        if kept:
            # the header names the Triton part of a program that left an op to torch (cuDNN + a fused
            # epilogue): what failed may be either part, so the rule is about that kind of program only
            what += f" {beside_torch(kept)}"
    else:
        what = "write the kernel this way"
    return f"You cannot {what} on {target}: {sig}"


def draft_rule(
    model: Any, code: str, feedback: str, target: str, op_families: list[str]
) -> tuple[str | None, int, int, str]:
    """(rule text or None, tokens in, tokens out, note) from an LLM's structured answer."""
    from kernelwright.memory.records import check_rule_text

    messages = [
        SystemMessage(RULE_SYSTEM_PROMPT),
        HumanMessage(rule_prompt(code=code, feedback=feedback, target=target, op_families=op_families)),
    ]
    try:
        out = model.with_structured_output(RuleDraft, include_raw=True).invoke(messages)
    except Exception as exc:  # a rule is still made from the error signature; the note says why
        return None, 0, 0, f"the model could not draft a rule ({type(exc).__name__}: {str(exc)[:160]})"
    tin, tout = usage_of(out["raw"]) if isinstance(out, dict) and out.get("raw") is not None else (0, 0)
    parsed = out.get("parsed") if isinstance(out, dict) else out
    if parsed is None:
        err = out.get("parsing_error") if isinstance(out, dict) else None
        return None, tin, tout, f"the model's rule could not be parsed: {str(err)[:160]}"
    text = parsed.rule if isinstance(parsed, RuleDraft) else str(getattr(parsed, "rule", "") or "")
    try:
        return check_rule_text(text), tin, tout, ""
    except ValueError as exc:
        return None, tin, tout, f"the model's rule was unusable: {exc}"


def closing_rule(closure: ClosedDesign, target: str) -> str:
    """The rule a closed design teaches: the design itself, with no config, cannot be used (see above)."""
    sig = closure.signature
    if len(sig) > SIGNATURE_CHARS:
        sig = sig[:SIGNATURE_CHARS].rsplit(" ", 1)[0] + " ..."
    fam = f" for {closure.family}" if closure.family else ""
    return f"You cannot use design={closure.design}{fam} on {target}: two of its programs failed the same way ({sig})"


def closures_of(branch: Branch, status: Status) -> list[ClosedDesign]:
    """The designs this attempt closes: its failure is its design's second identical one, or the coder
    caught a repeat of an earlier failure while asking (Candidate.closed)."""
    assert branch.candidate is not None and branch.result is not None
    job = branch.job
    out: list[ClosedDesign] = []
    already = {c.design for c in job.closed_designs}
    by_node = {f.node_id: f for f in job.failed_programs}
    for nid in branch.candidate.closed:
        f = by_node.get(nid)
        if f is not None and f.design and f.design not in already:
            out.append(ClosedDesign(design=f.design, family=f.family, error_kind=f.error_kind,
                                    signature=f.signature, nodes=[nid, job.node_id]))  # fmt: skip
            already.add(f.design)
    mine = failed_of(job.node_id, status, branch.candidate.code, branch.result)
    if mine is not None:
        closure = closes_design(mine, job.failed_programs, [*job.closed_designs, *out])
        if closure is not None:
            out.append(closure)
    return out


def learn_closures(
    memory: Any, branch: Branch, closures: list[ClosedDesign], cid: str
) -> tuple[list[str], list[str]]:
    """Merge the closing rule of each closed design into the rule book; (rule ids, rule texts)."""
    from kernelwright.memory.records import RuleCandidate

    run, task = branch.run, branch.task
    errors = {f.node_id: f.error for f in branch.job.failed_programs}
    ids, texts = [], []
    for closure in closures:
        update = memory.rules.add(
            RuleCandidate(
                text=closing_rule(closure, run.target_display or run.target),
                error_kind=closure.error_kind or None,
                error=next((errors[n] for n in closure.nodes if errors.get(n)), closure.signature),
                case_id=cid,
                op_families=task.signature.op_families,
                hardware=run.target,
                versions=run.versions,
            )
        )
        ids.append(update.rule.id)
        texts.append(update.rule.text)
    return ids, texts


def reflect_to_memory(
    branch: Branch, ctx: Context, status: Status, feedback: str, timing: Timing
) -> tuple[Reflection, CostLedger]:
    """Write the case, the rule exposure and (for a failure) the rule; returns what was written."""
    from kernelwright.memory.records import Case, RuleCandidate

    run, job, task = branch.run, branch.job, branch.task
    assert branch.result is not None and branch.candidate is not None
    known = _journal_find(run.run_dir, run.run_id, job.node_id)
    if known is not None:
        return known, CostLedger()
    if status != "correct":
        why = not_the_kernels_fault(
            branch.result, branch.candidate.code, not is_llm(resources.chat_model(ctx))
        )
        if why is not None:
            reflection = Reflection(note=f"nothing learned: {why}")
            _journal_append(run.run_dir, run.run_id, job.node_id, reflection)
            return reflection, CostLedger()
    memory = resources.run_memory(ctx, run.run_dir)
    if memory is None:
        reflection = Reflection(note="nothing learned: memory is off for this run")
        _journal_append(run.run_dir, run.run_id, job.node_id, reflection)
        return reflection, CostLedger()
    cid = case_id_for(run.run_id, job.node_id)
    closures = closures_of(branch, status)
    closed_names = ", ".join(c.design for c in closures) or None
    if branch.candidate.blocked:  # nothing ran: no case, no exposure; a closed design still teaches
        ids, texts = learn_closures(memory, branch, closures, cid) if ctx.rules else ([], [])
        reflection = Reflection(
            rule_ids=ids,
            rule_texts=texts,
            rule_source="signature" if ids else "none",
            note=f"{branch.candidate.blocked}"
            + (f"; closes design {closed_names} for this task" if closed_names else ""),
            closed_design=closed_names,
        )
        _journal_append(run.run_dir, run.run_id, job.node_id, reflection)
        return reflection, CostLedger()
    rule_ids_in_context = branch.context.rule_ids if branch.context else []
    code = branch.candidate.code
    if memory.cases.get(cid) is None:
        case = Case.from_attempt(
            signature=task.signature,
            code=code or "",
            result=branch.result,
            correct=status == "correct",
            speedup=timing.speedup_vs_eager if timing.origin == "measured" else None,
            speedup_ci=timing.speedup_ci if timing.origin == "measured" else None,
            fraction_of_floor=timing.fraction_of_floor if timing.origin == "measured" else None,
            parent_speedup=job.parent_speedup,
            parent_speedup_ci=job.parent_speedup_ci,
            hardware=run.target,
            compute_capability=run.compute_capability,
            versions=run.versions,
            task_name=task.name,
            action=job.action,
            idea=branch.candidate.idea or f"{job.action}: {job.decision.reason}",
            feedback=feedback,
            run_id=run.run_id,
            rule_ids=rule_ids_in_context,
        )
        case.id = cid
        case.parent_id = job.parent_case_id
        memory.cases.add(case)
    memory.rules.record_rule_exposure(
        rule_ids_in_context,
        status != "correct",
        op_families=task.signature.op_families,
        hardware=run.target,
        case_id=cid,
        run_id=run.run_id,
    )
    reflection = Reflection(
        case_id=cid,
        note="" if ctx.rules else "no rule: rules are off for this run",
        closed_design=closed_names,
    )
    cost = CostLedger()
    if status != "correct" and ctx.rules:
        text: str | None = None
        note = ""
        source: Literal["llm", "signature"] = "signature"
        model = resources.chat_model(ctx)
        if ctx.llm_rules and is_llm(model) and code is not None:
            text, tin, tout, note = draft_rule(
                model, code, feedback, run.target_display or run.target, task.signature.op_families
            )
            cost = CostLedger(llm_calls=1, tokens_in=tin, tokens_out=tout)
            source = "llm" if text else "signature"
        if text is None:
            text = signature_rule(code, branch.result, run.target_display or run.target)
        # With an LLM configured, it also judges whether the rule repeats one already in the book.
        judge = (lambda a, b: judge_same_rule(model, a, b)) if ctx.llm_rules and is_llm(model) else None
        update = memory.rules.add(
            RuleCandidate(
                text=text,
                error_kind=branch.result.error_kind,
                error=branch.result.error or "",
                case_id=cid,
                op_families=task.signature.op_families,
                hardware=run.target,
                versions=run.versions,
            ),
            judge=judge,
        )
        reflection = Reflection(
            case_id=cid,
            rule_ids=[update.rule.id],
            rule_texts=[update.rule.text],
            rule_source=source,
            closed_design=closed_names,
            note="; ".join(
                x
                for x in (
                    note,
                    f"merged into an existing rule ({update.matched_by})" if update.merged else "new rule",
                )
                if x
            ),
        )
    if closures and ctx.rules:
        ids, texts = learn_closures(memory, branch, closures, cid)
        reflection = reflection.model_copy(
            update={
                "rule_ids": [*reflection.rule_ids, *ids],
                "rule_texts": [*reflection.rule_texts, *texts],
                "rule_source": reflection.rule_source if reflection.rule_ids else "signature",
                "note": "; ".join(
                    x for x in (reflection.note, f"closes design {closed_names} for this task") if x
                ),
            }
        )
    _journal_append(run.run_dir, run.run_id, job.node_id, reflection)
    return reflection, cost


def reflector(branch: Branch, runtime: Runtime[Context]) -> Command[Literal["planner"]]:
    branch = Branch.model_validate(branch)
    ctx = runtime.context
    job = branch.job
    assert branch.result is not None and branch.candidate is not None
    result = branch.result
    status = classify(result)
    timing = branch.timing or Timing(origin="none", note=branch.run.timing_note)
    speedup = timing.speedup_vs_eager if status == "correct" else None
    feedback = render_feedback(
        result,
        speedup=speedup,
        speedup_vs_compile=timing.speedup_vs_compile,
        runtime_ms=timing.runtime_ms,
        fraction_of_floor=timing.fraction_of_floor,
        timing_note=timing.note,
    )
    reflection, cost = reflect_to_memory(branch, ctx, status, feedback, timing)
    attempt = Attempt(
        seq=job.decision.seq,
        node_id=job.node_id,
        parent=job.decision.parent,
        action=job.action,
        reason=job.decision.reason,
        candidate=branch.candidate,
        result=result,
        status=status,
        timing=timing,
        reward=reward_for(status, speedup),
        feedback=feedback,
        context=branch.context,
        reflection=reflection,
        eval_s=branch.eval_s,
    )
    return Command(update={"attempts": [attempt], "cost": cost}, goto="planner")
