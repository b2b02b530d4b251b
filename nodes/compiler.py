"""The compiler node: compile feedback and correctness for one candidate.

First the static check (read with `ast` in this process, never executed): the source parses, defines
ModelNew, defines and launches a Triton kernel, does not reach the reference or fall back to torch in a
try/except. Then a worker process of the evaluation pool imports, compiles and runs it against the
reference (on a GPU the same worker call then times it, see `times_while_verifying`): compile errors,
runtime errors, wrong shapes and mismatches come back as a structured EvalResult. On a CPU run that
writes for a GPU target (--target), a verified kernel is also compiled for that GPU without one
(hardware.compile.feedback); a kernel the GPU backend rejects (out of resources, unsupported construct)
fails as a compile_error. Correct candidates go on to the profiler, the rest straight to the reflector.

A program the coder blocked (it repeats a failed program of the run, or uses a design closed for the
task: nodes/repeats.py) is not judged: it fails at the parse stage with the failure it repeats named, and
costs no evaluation.

Each worker evaluation is appended to the run's evaluation log before the step finishes; a step re-run
after a crash reuses the logged result instead of evaluating the same code again.
"""

from __future__ import annotations

from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.judge.static_check import static_check
from kernelwright.hardware.result import EvalResult
from kernelwright.nodes import resources
from kernelwright.nodes.evaluations import EvaluationEntry, EvaluationLog, Phase, code_sha
from kernelwright.nodes.records import Branch, CostLedger, RunInfo
from kernelwright.nodes.repeats import BLOCKED, blocked_in_flight, blocked_result_extra, judge_once
from kernelwright.nodes.run_context import Context

SAME_PROGRAM = "same_program_as"
"""EvalResult.extra key: the node whose evaluation of the identical program was reused."""


def eval_config(ctx: Context, run: RunInfo, *, time: bool, second_shape: bool = True) -> EvalConfig:
    """Verification checks every input shape; with time=True the same worker call then times the
    candidate on the full shape (a separate timing-only run passes second_shape=False)."""
    return EvalConfig(
        device="cuda" if run.device.startswith("cuda") else "cpu",
        time=time,
        second_shape=second_shape,
        seed=ctx.seed,
        precision="tf32" if ctx.allow_tf32 else "strict",
        timeout=ctx.eval_timeout_s,
    )


def times_while_verifying(branch: Branch, ctx: Context) -> bool:
    """On a GPU one worker call verifies and then times a candidate: the profiler reuses that result
    instead of loading, compiling and verifying the same program a second time."""
    return branch.run.timing_meaningful and ctx.timing_source is None


def evaluate_logged(branch: Branch, ctx: Context, phase: Phase) -> tuple[EvalResult, bool]:
    """Evaluate the branch's candidate in a worker, or reuse a logged result; (result, was it fresh).

    "verify" checks every shape (and times too where `times_while_verifying`); "time" is a timing run
    that re-checks the timed shape only."""
    assert branch.candidate is not None and branch.candidate.code is not None
    code = branch.candidate.code
    run = branch.run
    log = EvaluationLog(run.run_dir)
    sha = code_sha(code)
    logged = log.find_program(run.run_id, branch.job.node_id, phase, sha)
    if logged is not None:
        other, earlier = logged
        if other == branch.job.node_id:
            return earlier, False
        result = earlier.model_copy(deep=True)
        result.extra[SAME_PROGRAM] = other
        result.extra.setdefault("notes", []).append(
            f"the same program as {other}: its evaluation is reused, the program was not run again"
        )
        log.append(
            EvaluationEntry(
                run_id=run.run_id, node_id=branch.job.node_id, phase=phase, code_sha256=sha, result=result
            )
        )
        return result, False
    pool = resources.worker_pool(eval_config(ctx, run, time=False).device, ctx.workers)
    timed = phase == "time" or (phase == "verify" and times_while_verifying(branch, ctx))
    result = pool.evaluate(branch.task, code, eval_config(ctx, run, time=timed, second_shape=phase != "time"))
    log.append(
        EvaluationEntry(
            run_id=run.run_id, node_id=branch.job.node_id, phase=phase, code_sha256=sha, result=result
        )
    )
    return result, True


def eval_cost(result: EvalResult, run: RunInfo) -> CostLedger:
    """Cost of one evaluation. A result reused from the log after a crash is counted too: the step that
    first paid for it never reached the checkpoint, so its cost never reached the state. A result
    reused from another node's identical program cost nothing."""
    if result.extra.get(SAME_PROGRAM):
        return CostLedger()
    gpu = result.wall_s if run.device.startswith("cuda") else 0.0
    return CostLedger(evaluations=1, eval_s=result.wall_s, gpu_s=gpu)


def compile_for_gpu_target(branch: Branch, ctx: Context) -> EvalResult:
    """A CPU run writing for a GPU: compile the verified kernel's launches for that GPU, without one.

    The interpreter cannot say whether a kernel fits the target (registers, shared memory) or whether
    Triton's GPU backend accepts it; `compile_for_target` compiles every launch for the target's
    architecture in subprocesses. A kernel that does not compile there is a compile_error, like on
    the device; for one that does, the per-kernel summary (registers, spills) joins the feedback.
    """
    from kernelwright.hardware.compile.feedback import compile_for_target

    assert branch.candidate is not None and branch.candidate.code is not None and branch.result is not None
    run = branch.run
    log = EvaluationLog(run.run_dir)
    sha = code_sha(branch.candidate.code)
    cached = log.find(run.run_id, branch.job.node_id, "target_compile", sha)
    if cached is not None:
        return cached
    report = compile_for_target(
        branch.candidate.code, branch.task, run.target, timeout_s=ctx.eval_timeout_s or 240.0, shapes="full"
    )
    result = branch.result.model_copy(deep=True)
    result.extra["target_compile"] = report.summary()
    result.extra["target_compile_s"] = report.wall_s
    if not report.ok and report.error_kind == "compile_error":
        result.correct = False
        result.stage = "compile"
        result.error_kind = "compile_error"
        result.error = (
            f"verified on the interpreter, but does not compile for {run.target}:\n{report.summary()}"
        )
    log.append(
        EvaluationEntry(
            run_id=run.run_id,
            node_id=branch.job.node_id,
            phase="target_compile",
            code_sha256=sha,
            result=result,
        )
    )
    return result


def blocked_result(branch: Branch) -> EvalResult:
    """The verdict on a program the coder blocked, without judging it (see the module docstring)."""
    assert branch.candidate is not None
    candidate = branch.candidate
    failed = next((f for f in branch.job.failed_programs if f.node_id == candidate.repeat_of), None)
    error = candidate.blocked or "not judged"
    if failed is not None:
        error += f"; {failed.node_id} failed with {failed.error_kind}:\n{failed.error}"
    return EvalResult(
        stage="parse",
        error_kind="static_check",
        error=error,
        target=branch.run.target,
        device=branch.run.device,
        extra=blocked_result_extra(failed, candidate.blocked or "")
        if failed is not None
        else {BLOCKED: error},
    )


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
    if candidate.blocked:
        return Command(goto=Send("reflector", branch.model_copy(update={"result": blocked_result(branch)})))
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
    verdict = judge_once(branch.run.run_id, branch.run.run_dir, branch.job.node_id, candidate.code,
                         lambda: evaluate_logged(branch, ctx, "verify")[0])  # fmt: skip
    if not isinstance(verdict, EvalResult):  # a copy of a failed program another branch was judging
        branch = blocked_in_flight(branch, verdict)
        return Command(goto=Send("reflector", branch.model_copy(update={"result": blocked_result(branch)})))
    result = verdict
    cost = eval_cost(result, branch.run)
    eval_s = branch.eval_s + result.wall_s
    if (
        result.correct
        and ctx.compile_check
        and branch.run.device == "cpu"
        and branch.run.target_arch != "cpu"
    ):
        result = compile_for_gpu_target(branch.model_copy(update={"result": result}), ctx)
        extra_s = float(result.extra.get("target_compile_s", 0.0))
        eval_s += extra_s
        cost = cost + CostLedger(eval_s=extra_s)
    nxt = branch.model_copy(update={"result": result, "eval_s": eval_s})
    return Command(
        update={"cost": cost},
        goto=Send("profiler" if result.correct else "reflector", nxt),
    )
