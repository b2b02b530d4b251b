"""The profiler node: times a verified candidate against the reference, where timing means something.

On a GPU the worker times candidate and eager reference paired and alternating (and the torch.compile
baseline, cached per task) in the same call that verified the candidate, so the profiler usually only
reads that result, and re-verifies the outputs on the way; the speedup, its confidence interval
and the fraction of the roofline floor reached come from that. On the CPU interpreter timing is not
meaningful: the profiler records that, reports no speedup, and the search ranks by correctness alone.
No speedup is ever made up.

`Context.timing_source` is a test-only seam: given, it supplies (runtime_ms, eager_ms) for a candidate
and the result is marked `origin="test"`, so tests of "the fastest correct kernel wins" can run on CPU.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from kernelwright.hardware.roofline import fraction_of_floor
from kernelwright.nodes.compiler import eval_cost, evaluate_logged
from kernelwright.nodes.records import Branch, CostLedger, Timing
from kernelwright.nodes.run_context import Context


def profiler(branch: Branch, runtime: Runtime[Context]) -> Command[Literal["reflector"]]:
    branch = Branch.model_validate(branch)
    ctx = runtime.context
    run = branch.run
    assert branch.candidate is not None and branch.candidate.code is not None and branch.result is not None
    floor = run.roofline_floor_ms
    if ctx.timing_source is not None:
        got = ctx.timing_source(branch.task.name, branch.candidate.code, branch.result)
        if got is not None:
            runtime_ms, eager_ms = float(got[0]), float(got[1])
            timing = Timing(
                origin="test",
                runtime_ms=runtime_ms,
                eager_ms=eager_ms,
                speedup_vs_eager=eager_ms / runtime_ms,
                fraction_of_floor=fraction_of_floor(floor, runtime_ms),
                note="timings from the test-only timing_source, not measured",
            )
            return Command(goto=Send("reflector", branch.model_copy(update={"timing": timing})))
    if not run.timing_meaningful:
        timing = Timing(origin="none", note=branch.result.timing_note or run.timing_note)
        return Command(goto=Send("reflector", branch.model_copy(update={"timing": timing})))

    update: dict[str, Any]
    if branch.result.timing_meaningful and branch.result.runtime_ms is not None:
        # the compiler's worker call verified and timed it already: nothing to run again
        timed, cost, update = branch.result, CostLedger(), {}
    else:
        timed, _ = evaluate_logged(branch, ctx, "time")
        cost = eval_cost(timed, run)
        update = {"eval_s": branch.eval_s + timed.wall_s}
    if not timed.correct:
        # it passed once and failed when run again for timing (a race, uninitialised memory): not correct
        update["result"] = timed
        update["timing"] = Timing(origin="none", note="failed verification during the timing run")
        return Command(update={"cost": cost}, goto=Send("reflector", branch.model_copy(update=update)))
    if not timed.timing_meaningful or timed.runtime_ms is None or timed.speedup_vs_eager is None:
        update["result"] = timed
        update["timing"] = Timing(
            origin="none", note=timed.timing_note or "the timing run reported no timing"
        )
        return Command(update={"cost": cost}, goto=Send("reflector", branch.model_copy(update=update)))
    update["result"] = timed
    update["timing"] = Timing(
        origin="measured",
        runtime_ms=timed.runtime_ms,
        runtime_p20_ms=timed.runtime_p20_ms,
        runtime_p80_ms=timed.runtime_p80_ms,
        eager_ms=timed.eager_ms,
        compile_ms=timed.compile_ms,
        speedup_vs_eager=timed.speedup_vs_eager,
        speedup_vs_compile=timed.speedup_vs_compile,
        speedup_ci=timed.speedup_vs_eager_ci,
        fraction_of_floor=fraction_of_floor(floor, timed.runtime_ms),
        note=timed.timing_note or "",
    )
    return Command(update={"cost": cost}, goto=Send("reflector", branch.model_copy(update=update)))
