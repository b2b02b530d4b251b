"""The compiler node: compile feedback and correctness for one candidate.

First the static check (read with `ast` in this process, never executed): the source parses, defines
ModelNew, defines and launches a Triton kernel, does not reach the reference or fall back to torch in a
try/except. Then a worker process of the evaluation pool imports, compiles and runs it against the
reference (no timing here): compile errors, runtime errors, wrong shapes and mismatches come back as a
structured EvalResult. Correct candidates go on to the profiler, the rest straight to the reflector.

Each worker evaluation is appended to the run's evaluation log before the step finishes; a step re-run
after a crash reuses the logged result instead of evaluating the same code again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from hardware.config import EvalConfig
from hardware.result import EvalResult
from hardware.static_check import static_check
from nodes import resources
from nodes.evaluations import EvaluationEntry, EvaluationLog, Phase, code_sha
from nodes.records import Branch, CostLedger, RunInfo

if TYPE_CHECKING:
    from graphs.context import Context


def eval_config(ctx: Context, run: RunInfo, *, time: bool) -> EvalConfig:
    return EvalConfig(
        device="cuda" if run.device.startswith("cuda") else "cpu",
        time=time,
        seed=ctx.seed,
        precision="tf32" if ctx.allow_tf32 else "strict",
        timeout=ctx.eval_timeout_s,
    )


def evaluate_logged(branch: Branch, ctx: Context, phase: Phase) -> tuple[EvalResult, bool]:
    """Evaluate the branch's candidate in a worker, or reuse a logged result; (result, was it fresh)."""
    assert branch.candidate is not None and branch.candidate.code is not None
    code = branch.candidate.code
    run = branch.run
    log = EvaluationLog(run.run_dir)
    sha = code_sha(code)
    cached = log.find(run.run_id, branch.job.node_id, phase, sha)
    if cached is not None:
        return cached, False
    pool = resources.worker_pool(eval_config(ctx, run, time=False).device, ctx.workers)
    result = pool.evaluate(branch.task, code, eval_config(ctx, run, time=phase == "time"))
    log.append(
        EvaluationEntry(
            run_id=run.run_id, node_id=branch.job.node_id, phase=phase, code_sha256=sha, result=result
        )
    )
    return result, True


def eval_cost(result: EvalResult, run: RunInfo) -> CostLedger:
    """Cost of one evaluation. A result reused from the log after a crash is counted too: the step that
    first paid for it never reached the checkpoint, so its cost never reached the state."""
    gpu = result.wall_s if run.device.startswith("cuda") else 0.0
    return CostLedger(evaluations=1, eval_s=result.wall_s, gpu_s=gpu)


def compiler(branch: Branch, runtime: Runtime[Context]) -> Command[Literal["profiler", "reflector"]]:
    branch = Branch.model_validate(branch)
    ctx = runtime.context
    candidate = branch.candidate
    if candidate is None:
        raise ValueError(f"branch {branch.job.node_id} reached the compiler without a candidate")
    if candidate.code is None:
        result = EvalResult(
            stage="parse",
            error_kind="static_check",
            error=f"no program in the model's answer: {candidate.error}",
            target=branch.run.target,
            device=branch.run.device,
        )
        return Command(goto=Send("reflector", branch.model_copy(update={"result": result})))
    report = static_check(candidate.code, branch.task.name)
    if not report.ok:
        result = EvalResult(
            stage="parse",
            error_kind=report.error_kind or "static_check",
            error=report.error,
            torch_ops_remaining=report.torch_ops_remaining,
            target=branch.run.target,
            device=branch.run.device,
        )
        return Command(goto=Send("reflector", branch.model_copy(update={"result": result})))
    result, _ = evaluate_logged(branch, ctx, "verify")
    nxt = branch.model_copy(update={"result": result, "eval_s": branch.eval_s + result.wall_s})
    return Command(
        update={"cost": eval_cost(result, branch.run)},
        goto=Send("profiler" if result.correct else "reflector", nxt),
    )
