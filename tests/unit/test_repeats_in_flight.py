"""The no-repeat guard across branches (nodes/repeats.judge_once): a copy of a program another branch is
judging waits for that verdict; a failed first copy blocks it, a correct one or a failure another config
can fix lets it be judged. Real threads, as LangGraph runs parallel branches."""

from __future__ import annotations

import threading
import time
import uuid

from kernelwright.hardware.result import EvalResult
from kernelwright.nodes.records import FailedProgram
from kernelwright.nodes.repeats import judge_once
from tests.fakes.kernels import relu_compile_error, relu_kernel

BROKEN = relu_compile_error("broken")


def _race(first_code: str, copy_code: str, verdict: EvalResult) -> tuple[list[str], object, object]:
    """The first copy's judge holds until the copy has asked; returns (judge calls, both outcomes)."""
    run = uuid.uuid4().hex
    calls: list[str] = []
    first_started, copy_asked = threading.Event(), threading.Event()
    out: dict[str, object] = {}

    def judge(node: str) -> EvalResult:
        calls.append(node)
        if node == "n1":
            first_started.set()
            assert copy_asked.wait(10)
            time.sleep(0.3)  # the copy is waiting now (had it come later, the outcome must be the same)
        return verdict

    def first() -> None:
        out["n1"] = judge_once(run, "/runs/a", "n1", first_code, lambda: judge("n1"))

    t = threading.Thread(target=first)
    t.start()
    assert first_started.wait(10)
    copy_asked.set()  # the copy asks while the first copy is still being judged
    out["n2"] = judge_once(run, "/runs/a", "n2", copy_code, lambda: judge("n2"))
    t.join(10)
    return calls, out["n1"], out["n2"]


def test_a_copy_of_a_failing_program_in_flight_is_not_judged() -> None:
    failed = EvalResult(correct=False, error_kind="compile_error", error="no attribute 'no_such_function'")
    calls, first, copy = _race(BROKEN, BROKEN.replace("BLOCK=1024", "BLOCK=256"), failed)
    assert calls == ["n1"]
    assert first is failed
    assert isinstance(copy, FailedProgram) and copy.node_id == "n1" and copy.error_kind == "compile_error"


def test_a_copy_is_judged_when_the_first_was_correct_or_another_config_can_fix_it() -> None:
    ok = EvalResult(correct=True)
    calls, _, copy = _race(relu_kernel("flat"), relu_kernel("flat", 256), ok)
    assert calls == ["n1", "n2"] and copy is ok
    oom = EvalResult(correct=False, error_kind="compile_error", error="out of resources: shared memory")
    calls, _, copy = _race(BROKEN, BROKEN.replace("BLOCK=1024", "BLOCK=256"), oom)
    assert calls == ["n1", "n2"] and copy is oom
    # the very same program as one that ran out of resources is blocked: its config is the same
    calls, _, copy = _race(BROKEN, BROKEN, oom)
    assert calls == ["n1"] and isinstance(copy, FailedProgram)


def test_runs_do_not_share_their_programs() -> None:
    failed = EvalResult(correct=False, error_kind="compile_error", error="no attribute")
    assert judge_once("r", "/runs/a", "n1", BROKEN, lambda: failed) is failed
    assert isinstance(judge_once("r", "/runs/a", "n2", BROKEN, lambda: failed), FailedProgram)
    # the same run id in another folder is another run (tests reuse thread ids); the node itself is not
    # its own repeat (a step re-run after a crash)
    assert judge_once("r", "/runs/b", "n2", BROKEN, lambda: failed) is failed
    assert judge_once("r", "/runs/a", "n1", BROKEN, lambda: failed) is failed
