"""One job's request and state in the judge (hardware.judge.job): the pool's message validated on arrival,
stage changes told to the pool with their deadline, and a candidate's reply ending the job with the
right verdict."""

import pytest
from pydantic import ValidationError

from kernelwright.hardware.config import EvalConfig
from kernelwright.hardware.judge.job import JobRequest, JobState, Stop, TimeBudget
from kernelwright.hardware.result import EvalResult


def _message(**changes):
    message = {"job_id": 7, "task_name": "relu", "task_source": "src", "candidate_source": "cand",
               "config": EvalConfig(seed=3).model_dump(mode="json"), "torch_ops_remaining": ["relu"]}  # fmt: skip
    message.update(changes)
    return message


def _job(sent: list) -> JobState:
    request = JobRequest.model_validate(_message())
    return JobState(request, EvalResult(stage="compile"), sent.append, TimeBudget(2.0))


def test_the_pools_message_becomes_a_typed_request():
    request = JobRequest.model_validate(_message())
    assert request.config.seed == 3 and request.job_id == 7 and request.torch_ops_remaining == ["relu"]
    with pytest.raises(ValidationError):  # a key the judge does not know is refused, not ignored
        JobRequest.model_validate(_message(extra_key=1))
    with pytest.raises(ValidationError):
        JobRequest.model_validate({k: v for k, v in _message().items() if k != "task_source"})


def test_a_stage_change_is_told_to_the_pool_and_sets_its_deadline():
    sent: list = []
    job = _job(sent)
    job.stage("correctness")
    assert sent == [("stage", 7, "correctness")]
    limit = job.cfg.stage_timeout("correctness")
    assert job.stage_name == "correctness" and limit - 1.0 < job.remaining() <= limit


def test_a_reply_that_reports_a_failure_ends_the_job_with_it_but_never_blames_the_harness():
    job = _job([])
    with pytest.raises(Stop):
        job.check_reply(
            {"op": "failed", "stage": "correctness", "kind": "harness_error", "text": "x"}, "called"
        )
    assert (job.result.correct, job.result.stage, job.result.error_kind) == (
        False,
        "correctness",
        "runtime_error",
    )
    job = _job([])
    with pytest.raises(Stop):
        job.check_reply({"op": "failed", "stage": "verdict", "kind": "made_up", "text": "y"}, "called")
    assert (job.result.stage, job.result.error_kind) == ("run", "runtime_error")


def test_a_reply_other_than_the_one_due_is_forbidden():
    job = _job([])
    job.check_reply({"op": "called"}, "called")  # the one due: nothing happens
    with pytest.raises(Stop):
        job.check_reply({"op": "timed"}, "called")
    assert job.result.error_kind == "forbidden" and "'timed' where 'called' was due" in (
        job.result.error or ""
    )


def test_the_float64_budget_is_spent_down_to_zero():
    budget = TimeBudget(1.0)
    budget.spend(0.4)
    assert budget.seconds == pytest.approx(0.6)
    budget.spend(5.0)
    assert budget.seconds == 0.0
