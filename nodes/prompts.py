"""Every prompt text kernelwright sends to a chat model, in one place.

The coder's user message is built by the context manager (nodes/context_builder.py) from XML-tagged
sections (providers/protocol.py); this module supplies the words: the system prompt, the request of
each kind and the answer format, the precision line of <target>, how a rule, a case (<experience>) and a
cut design read, the feedback text shown for an evaluated kernel, the reflector's rule-drafting prompt
and the prompt that asks a judge whether two rules are the same (memory's RuleBook takes the judge as a
plain callable, so memory/ holds no prompt text and does not import nodes/).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kernelwright.hardware.result import EvalResult
from kernelwright.memory.records import Case, ratio_to_reference
from kernelwright.providers.protocol import render_section

SYSTEM_PROMPT = """\
You write Triton kernels that replace PyTorch reference programs.

Answer with exactly one fenced ```python block holding a complete, self-contained Python module that:
- imports torch, triton and triton.language as tl (nothing from the task or from kernelwright);
- defines class ModelNew(torch.nn.Module) with the same constructor arguments and the same forward
  signature as the reference Model, returning the same outputs (shapes, dtypes, values within tolerance);
- does the work in one or more @triton.jit kernels launched from forward; it must not call the reference
  Model, must not compute the main operation with torch, and must not wrap a launch in try/except to fall
  back to torch;
- starts with one metadata comment line:
  # kernelwright: family=<op family> design=<short design name> config=<key=value,key=value>
  naming the design and its launch configuration (block sizes, num_warps, ...).

Read the sections of the request: <task> is the reference program; <target> the hardware and the
precision mode (strict: fp32 tl.dot with input_precision="ieee" or "tf32x3", never plain TF32; tf32: TF32
allowed, input_precision="tf32" is fine); <parent> and
<feedback> the kernel you build on and what its evaluation said; <designs> representative kernels found
so far; <tried> the metadata lines of the kernels already written in this run (do not write one of them
again); <rules> things that are known not to work here (obey every one); <experience> earlier attempts on
similar tasks and how they turned out (outcome: effective or partial, faster than its parent; tie, within
the timing's noise of it, no evidence either way; ineffective or negative, slower; failed); <docs>
reference notes. Accumulate in fp32, mask every load and
store that can go out of bounds, and size blocks with triton.next_power_of_2 where shapes vary."""

REQUEST_TEXT = {
    "large_step": (
        "Write a new kernel for the task with a design of your own choosing. If <designs> shows kernels "
        "found so far, do not copy one: take what worked from them and try a different decomposition, "
        "tiling, fusion or launch configuration that could be faster on this target."
    ),
    "small_step": (
        "Improve the kernel in <parent> with one targeted change that should make it faster on this target "
        "(block sizes, num_warps, num_stages, memory access pattern, fusing a step, fewer launches). Keep "
        "everything else as it is; the result must stay correct."
    ),
    "repair": (
        "The kernel in <parent> failed; <feedback> says how. Fix that error with the smallest change that "
        "makes the kernel compile, run and match the reference. Do not fall back to PyTorch for the main "
        "operation."
    ),
}


ANSWER_FORMAT = "Answer with one ```python block holding the complete module that defines ModelNew."
"""The last line of every <request> section."""


def request_text(kind: str) -> str:
    """The instruction for one request kind (large_step, small_step or repair)."""
    try:
        return REQUEST_TEXT[kind]
    except KeyError:
        raise ValueError(f"unknown request kind {kind!r}; known: {', '.join(REQUEST_TEXT)}") from None


def render_request(kind: str, text: str | None = None) -> str:
    """The `<request kind=...>` section: the request (`text`, else the kind's own) and the answer format."""
    body = (text or request_text(kind)).strip() + "\n" + ANSWER_FORMAT
    return render_section("request", body, kind=kind)


PRECISION_LINES = {
    "strict": "precision: strict (fp32 outputs checked at fp32 tolerance; no TF32: fp32 tl.dot must use "
    'input_precision="ieee" or "tf32x3", or split each fp32 tile into three bf16 parts and sum the six '
    "bf16 products that reach 2^-24)",
    "tf32": "precision: tf32 (TF32 allowed for fp32 matmuls and convolutions: tl.dot may use "
    'input_precision="tf32"; fp32 outputs checked at TF32 tolerance)',
    "reduced": "precision: reduced (TF32 allowed for fp32 matmuls and convolutions; fp32 outputs checked "
    "at a bf16/fp16-level tolerance)",
}


def precision_line(precision: str) -> str:
    """The <target> line that states the precision mode the kernel is checked at."""
    try:
        return PRECISION_LINES[precision]
    except KeyError:
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISION_LINES)}") from None


# --- how context items read (<designs>, <rules>, <experience>) -----------------------------------------


def tagged(tag: str, body: str, **attrs: Any) -> str:
    """A tagged element inside a section (<design>, <case>), in the same form render_section uses."""
    attr = "".join(f' {k}="{_attr(v)}"' for k, v in attrs.items())
    return f"<{tag}{attr}>\n{body.strip()}\n</{tag}>"


def _attr(v: Any) -> str:
    return str(v).replace('"', "'").replace("\n", " ")


def fmt_speedup(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "n/a"


def rule_line(text: str) -> str:
    """One rule as <rules> lists it."""
    return f"- {text}"


def doc_line(title: str, text: str) -> str:
    """One documentation note as <docs> lists it."""
    return f"- {title}: {text}"


def design_outline(header: str | None, code_lines: int) -> str:
    """A design cut to its header line (when it has one) for room."""
    head = [header] if header else []
    return "\n".join([*head, f"# ({code_lines - len(head)} lines of this kernel left out for room)"])


def cut_code(code: str, max_chars: int) -> str:
    """Code cut to about `max_chars` at a line end, saying how much was left out."""
    if len(code) <= max_chars:
        return code.rstrip()
    head = code[:max_chars]
    head = head[: head.rfind("\n")] if "\n" in head else head
    return f"{head.rstrip()}\n# ... ({len(code) - len(head)} more characters not shown)"


def case_text(case: Case, code_chars: int, cross: bool) -> str:
    """The body of one <case>: the task, the action, the design, how it went, and its code."""
    sig = case.signature
    shapes = ";".join("x".join(map(str, s)) for s in sig.input_shapes)
    meta = [
        f"task: {case.task_name or '?'} ({'+'.join(sig.op_families) or '?'}; in {shapes or '?'};"
        f" {','.join(sorted(set(sig.input_dtypes))) or '?'})",
    ]
    if sig.ops:
        meta.append(f"ops: {' '.join(sig.ops)}")
    meta.append(f"action: {case.action or '?'}; idea: {case.idea or '-'}")
    if case.kernel_header:
        meta.append(f"design: {case.kernel_header.removeprefix('#').strip()}")
    if case.step_ratio is not None and case.correct:
        against = "the reference" if ratio_to_reference(case.parent_speedup) else "parent"
        meta.append(f"step ratio vs {against}: {case.step_ratio:.2f}")
    if not case.correct:
        meta.append(f"failed: {case.error_kind or '?'}: {(case.feedback or '').strip()[-300:]}")
    if cross:
        meta.append(
            f"correct on {case.hardware or 'other hardware'}; shown for what compiles and is correct, "
            "its speed does not carry over to this hardware"
        )
    code = cut_code(case.code, code_chars) if case.code else "(no code)"
    return "\n".join(meta) + "\ncode:\n" + code


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "n/a" if x is None else format(x, spec)


def render_feedback(
    result: EvalResult,
    *,
    speedup: float | None = None,
    speedup_vs_compile: float | None = None,
    runtime_ms: float | None = None,
    fraction_of_floor: float | None = None,
    timing_note: str = "",
) -> str:
    """The feedback text for one evaluated kernel, as the next step's <feedback> shows it."""
    lines = []
    if not result.correct:
        lines.append(f"FAILED at stage {result.stage}: {result.error_kind or 'unknown error'}")
        if result.max_abs_error is not None:
            lines.append(
                f"max abs error {_fmt(result.max_abs_error)}, max rel error {_fmt(result.max_rel_error)}"
                + (
                    f" (tolerance atol={result.tolerance.atol:g} rtol={result.tolerance.rtol:g})"
                    if result.tolerance
                    else ""
                )
            )
        if result.mismatched is not None:
            lines.append(f"{result.mismatched} elements outside tolerance")
        if result.error:
            tail = "\n".join(result.error.strip().splitlines()[-15:])
            lines.append(f"error:\n{tail}")
        return "\n".join(lines)
    lines.append("correct: matches the reference within tolerance")
    if speedup is not None:
        lines.append(
            f"runtime {_fmt(runtime_ms, '.4g')} ms, {speedup:.3f}x vs eager PyTorch"
            + (f", {speedup_vs_compile:.3f}x vs torch.compile" if speedup_vs_compile is not None else "")
        )
        if fraction_of_floor is not None:
            lines.append(f"{fraction_of_floor:.0%} of the roofline floor")
    else:
        lines.append(timing_note or "timing not meaningful on this device; judged on correctness only")
    if result.extra.get("target_compile"):
        lines.append(str(result.extra["target_compile"]))
    if result.torch_ops_remaining:
        lines.append("torch ops still in the kernel: " + ", ".join(result.torch_ops_remaining))
    return "\n".join(lines)


RULE_SYSTEM_PROMPT = """\
You turn one failed attempt at writing a Triton kernel into one validity rule for future attempts.
The rule is one sentence that starts with "You cannot", names the smallest action that caused the
failure (an API, a construct, a launch configuration, a data layout) and, where it matters, the hardware
or condition under which it fails. It must be general enough to help on other tasks and specific enough
to be checkable. Do not describe the task; do not give advice; state what cannot be done."""


class RuleDraft(BaseModel):
    """What the reflector asks an LLM for when a kernel fails."""

    rule: str = Field(description='one sentence starting "You cannot ..."')
    reason: str = Field(default="", description="one sentence: why this caused the failure")


def rule_prompt(*, code: str, feedback: str, target: str, op_families: list[str]) -> str:
    """The user message for drafting a rule from one failure."""
    return (
        f"<target>{target}</target>\n"
        f"<op_families>{', '.join(op_families) or 'unknown'}</op_families>\n"
        f"<kernel>\n{code.strip()[:6000]}\n</kernel>\n"
        f"<failure>\n{feedback.strip()[:3000]}\n</failure>\n"
        'Write the one rule ("You cannot ...") this failure teaches.'
    )


class SameRule(BaseModel):
    """The rule judge's answer."""

    same: bool = Field(description="true when both rules prohibit the same action for the same reason")


def same_rule_prompt(a: str, b: str) -> str:
    """The question put to a judge: are two rules one rule reworded?"""
    return (
        "Two validity rules for writing Triton GPU kernels are given. Do they prohibit the same action "
        "(a reworded duplicate), rather than two different actions?\n"
        f"Rule A: {a}\nRule B: {b}\nAnswer yes or no."
    )


# --- no failure repeated (nodes/repeats.py) --------------------------------------------------------------


def closed_design_rule(design: str, family: str, error_kind: str) -> str:
    """The rule line a design closed for the task reads as in <rules>. It names the design and no KEY=VALUE
    pair, so the offline writer reads it as forbidding every config of the design (providers/offline
    policy.design_forbidden); an LLM reads the sentence. The error's text is not in it: its words could
    name other designs or configs."""
    fam = f" for {family}" if family else ""
    return (
        f"You cannot use design={design}{fam} on this task again: two of its programs failed the same way "
        f"({error_kind or 'error'})"
    )


def with_rules(user: str, lines: list[str]) -> str:
    """The user prompt with rule lines added to its <rules> section (one is made when it has none)."""
    new = [rule_line(t) for t in lines if rule_line(t) not in user]
    if not new:
        return user
    if "</rules>" in user:
        head, tail = user.split("</rules>", 1)
        return head.rstrip("\n") + "\n" + "\n".join(new) + "\n</rules>" + tail
    return user.rstrip("\n") + "\n" + render_section("rules", "\n".join(new)) + "\n"


def repeat_request(node_id: str, up_to_config: bool, error_kind: str, error: str, closed: str | None) -> str:
    """What the coder adds to a prompt whose answer repeated a failed program: the failure, named."""
    same = "the same program as" + (" (up to its block sizes and launch settings)" if up_to_config else "")
    tail = "\n".join(error.strip().splitlines()[-6:])
    lines = [
        f"Your answer was {same} {node_id}, which already failed on this task with {error_kind or 'an error'}:",
        tail,
        ("Another block size or launch setting does not fix this. " if up_to_config else "")
        + "Change the construct the error names, or write another design.",
    ]
    if closed:
        lines.append(f"Design {closed} is closed for this task: do not write it again.")
    return "\n".join(x for x in lines if x)


def closed_request(design: str) -> str:
    """What the coder adds to a prompt whose answer used a design closed for the task."""
    return f"Your answer uses design={design}, which is closed for this task (see <rules>): write another design."
