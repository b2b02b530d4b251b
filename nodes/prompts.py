"""Every prompt the optimize graph sends, in one place.

The coder's user message is built by the context manager (nodes/context_builder.py) from XML-tagged
sections (providers/protocol.py); this module supplies the system prompt, the wording of each request
kind, the feedback text shown for an evaluated kernel, and the reflector's rule-drafting prompt.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from kernelwright.hardware.result import EvalResult
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
similar tasks and how they turned out; <docs> reference notes. Accumulate in fp32, mask every load and
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


def request_text(kind: str) -> str:
    """The instruction for one request kind (large_step, small_step or repair)."""
    try:
        return REQUEST_TEXT[kind]
    except KeyError:
        raise ValueError(f"unknown request kind {kind!r}; known: {', '.join(REQUEST_TEXT)}") from None


def render_request(kind: str) -> str:
    """The `<request kind=...>` section."""
    return render_section("request", request_text(kind), kind=kind)


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
