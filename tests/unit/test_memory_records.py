"""Memory records without a store: labels, kernel metadata line, error signatures, embeddings, schema."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from kernelwright.hardware.result import EvalResult, Versions
from kernelwright.memory.embedding import hash_embed, make_embedder, text_similarity
from kernelwright.memory.records import (
    Case,
    Rule,
    RuleCandidate,
    capability_str,
    check_rule_text,
    error_signature,
    major_minor,
    outcome_label,
    step_ratio,
    step_ratio_interval,
)
from kernelwright.tasks.task import TaskSignature

SIG = TaskSignature(
    op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123], [123, 77]], input_dtypes=["float32"]
)


@pytest.mark.parametrize(
    ("speedup", "parent", "label"),
    [
        (1.05, None, "effective"),
        (1.049, None, "partial"),
        (1.02, None, "partial"),
        (1.019, None, "tie"),  # within the judge's noise of the reference
        (1.0, None, "tie"),
        (0.99, None, "tie"),
        (0.98, None, "ineffective"),
        (0.85, None, "ineffective"),
        (0.849, None, "negative"),
        (2.2, 2.0, "effective"),  # r = 1.1
        (2.0, 2.0, "tie"),
        (2.014, 2.0, "tie"),  # r = 1.007: a 0.7% "win"
        (2.06, 2.0, "partial"),  # r = 1.03
        (1.8, 2.0, "ineffective"),  # r = 0.9
        (1.2, 2.0, "negative"),  # r = 0.6: faster than eager, but a step back from the parent
    ],
)
def test_outcome_label_follows_the_step_ratio(speedup: float, parent: float | None, label: str) -> None:
    r = step_ratio(True, speedup, parent)
    assert outcome_label(True, r) == label


def test_a_step_whose_interval_holds_its_parent_is_a_tie() -> None:
    # r = 1.04 but the child's 95% interval reaches below the parent's speedup: no measured gain.
    r = step_ratio(True, 2.08, 2.0)
    assert outcome_label(True, r, step_ratio_interval((1.98, 2.2), 2.0)) == "tie"
    assert outcome_label(True, r, step_ratio_interval((2.06, 2.1), 2.0)) == "partial"
    # The parent's interval counts too: 2.06 is within the parent's own spread (1.95-2.07).
    assert step_ratio_interval((2.06, 2.1), 2.0, (1.95, 2.07)) == pytest.approx((2.06 / 2.07, 2.1 / 1.95))
    assert outcome_label(True, r, step_ratio_interval((2.06, 2.1), 2.0, (1.95, 2.07))) == "tie"
    # A parent without a speedup is the reference, exact; a clear win or loss keeps its label.
    assert step_ratio_interval((1.1, 1.3), None) == pytest.approx((1.1, 1.3))
    assert outcome_label(True, 1.2, (0.95, 1.4)) == "effective"
    assert outcome_label(True, 0.8, (0.7, 1.01)) == "negative"
    assert step_ratio_interval(None, 2.0) is None


def test_a_case_takes_its_interval_from_the_result_and_its_parent() -> None:
    res = EvalResult(correct=True, stage="done", timing_meaningful=True, runtime_ms=1.0,
                     speedup_vs_eager=2.03, speedup_vs_eager_ci=(2.02, 2.04))  # fmt: skip
    parent = Case.from_attempt(signature=SIG, code="p", correct=True, speedup=2.0, speedup_ci=(1.99, 2.01))
    child = Case.from_attempt(signature=SIG, code="c", result=res, parent=parent)
    assert child.speedup_ci == (2.02, 2.04) and child.step_ratio == pytest.approx(1.015)
    assert child.outcome == "tie"
    better = Case.from_attempt(signature=SIG, code="c", correct=True, speedup=2.07, speedup_ci=(2.06, 2.08),
                               parent=parent)  # fmt: skip
    assert better.outcome == "partial"
    wrong = Case.from_attempt(signature=SIG, code="w", correct=False, speedup=2.1, speedup_ci=(2.0, 2.2))
    assert wrong.speedup is None and wrong.speedup_ci is None and wrong.outcome == "failed"


def test_failed_and_unmeasured_attempts() -> None:
    assert step_ratio(False, 3.0, 1.0) == 0.0
    assert outcome_label(False, 0.0) == "failed"
    assert step_ratio(True, None, 1.0) is None
    assert outcome_label(True, None) == "unmeasured"
    # A parent without a speedup (failed, or unmeasured) is compared with the reference (speedup 1).
    assert step_ratio(True, 1.5, None) == pytest.approx(1.5)
    assert step_ratio(True, 1.5, 0.0) == pytest.approx(1.5)


def test_case_from_attempt_fills_labels_header_and_confidence() -> None:
    v = Versions(torch="2.13.0", triton="3.6.0")
    code = "# kernelwright: family=matmul design=tiled config=BLOCK_M=64\nimport triton\n"
    parent = Case.from_attempt(signature=SIG, code=code, correct=True, speedup=2.0, hardware="nvidia-h100")
    res = EvalResult(
        correct=True,
        stage="done",
        timing_meaningful=True,
        speedup_vs_eager=2.3,
        runtime_ms=2.0,
        runtime_ci_ms=(1.9, 2.1),
        versions=v,
        target="nvidia-h100",
    )
    case = Case.from_attempt(signature=SIG, code=code, result=res, parent=parent, compute_capability=90)
    assert case.parent_id == parent.id
    assert case.step_ratio == pytest.approx(1.15)
    assert case.outcome == "effective"
    assert case.hardware == "nvidia-h100"
    assert case.compute_capability == "9.0"
    assert (case.family, case.design, case.config) == ("matmul", "tiled", {"BLOCK_M": "64"})
    assert case.versions.triton == "3.6.0"
    assert case.confidence == pytest.approx(0.9)  # interval 0.2 ms wide on 2 ms
    assert case.downstream == pytest.approx(0.5 * 1.15)

    failed = EvalResult(correct=False, stage="compile", error_kind="compile_error", error="boom")
    bad = Case.from_attempt(signature=SIG, code="x", result=failed)
    assert (bad.outcome, bad.step_ratio, bad.downstream, bad.error_kind) == (
        "failed",
        0.0,
        0.0,
        "compile_error",
    )
    assert bad.feedback == "boom"


def test_a_case_keeps_how_near_the_roofline_a_correct_timed_kernel_was() -> None:
    """A whole-model run reads it to take a kernel at its roofline stop from memory without a search."""
    code = "# kernelwright: family=matmul design=tiled config=BLOCK_M=64\nimport triton\n"
    timed = Case.from_attempt(signature=SIG, code=code, correct=True, speedup=1.8, fraction_of_floor=0.93)
    assert timed.fraction_of_floor == pytest.approx(0.93)
    assert Case.model_validate_json(timed.model_dump_json()).fraction_of_floor == pytest.approx(0.93)
    wrong = Case.from_attempt(signature=SIG, code=code, correct=False, speedup=1.8, fraction_of_floor=0.93)
    assert wrong.fraction_of_floor is None  # an incorrect kernel's time says nothing of the floor
    untimed = Case.from_attempt(signature=SIG, code=code, correct=True, fraction_of_floor=0.93)
    assert untimed.fraction_of_floor is None
    older = timed.model_dump(mode="json")
    del older["fraction_of_floor"]  # a case written before the field existed
    assert Case.model_validate(older).fraction_of_floor is None

    untimed = EvalResult(correct=True, stage="done", timing_meaningful=False, speedup_vs_eager=5.0)
    cpu = Case.from_attempt(signature=SIG, code="x", result=untimed)
    assert cpu.outcome == "unmeasured" and cpu.speedup is None and cpu.confidence == 0.5


def test_records_ignore_unknown_keys_and_round_trip() -> None:
    case = Case.from_attempt(signature=SIG, code="x", correct=True, speedup=1.2)
    data = case.model_dump(mode="json")
    data["field_from_the_future"] = {"a": 1}
    data["signature"]["another_new_field"] = 3
    loaded = Case.from_dict(data)
    assert loaded == case
    assert Case.from_json(case.to_json()).to_json() == case.to_json()
    rule = Rule.from_dict({"text": "You cannot do x", "schema_version": 7, "new": True})
    assert rule.text == "You cannot do x" and rule.schema_version == 7


def test_rule_text_must_be_a_you_cannot_sentence() -> None:
    assert (
        check_rule_text("  - you cannot   use tl.dot on 8x8 blocks ") == "You cannot use tl.dot on 8x8 blocks"
    )
    with pytest.raises(ValueError, match="You cannot"):
        check_rule_text("Always use tl.dot")
    with pytest.raises(ValueError):
        RuleCandidate(text="Never do that")
    with pytest.raises(ValueError):
        Rule(text="You cannot")


def test_error_signature_ignores_numbers_paths_hex_and_names() -> None:
    a = (
        'Traceback (most recent call last):\n  File "/tmp/run_1/cand_17.py", line 42, in forward\n'
        "triton.compiler.errors.CompilationError: at 12:8:\n"
        "ValueError: Cannot make_shape_compatible: incompatible dimensions at index 0: 64 and 128 (ptr 0x7f3a2c)"
    )
    b = (
        'Traceback (most recent call last):\n  File "/home/u/runs/x/cand_3.py", line 7, in forward\n'
        "triton.compiler.errors.CompilationError: at 30:4:\n"
        "ValueError: Cannot make_shape_compatible: incompatible dimensions at index 1: 16 and 32 (ptr 0xdead)"
    )
    c = "RuntimeError: CUDA error: an illegal memory access was encountered"
    sa, sb, sc = (
        error_signature("compile_error", a),
        error_signature("compile_error", b),
        error_signature("crash", c),
    )
    assert sa == sb
    assert sa.startswith("compile_error: ")
    assert "64" not in sa and "/tmp" not in sa and "0x" not in sa
    assert sa != sc
    # Quoted identifiers and numbered names are placeholders, the words around them stay.
    s1 = error_signature("runtime_error", "NameError: name 'acc_12' is not defined")
    s2 = error_signature("runtime_error", "NameError: name 'offs_k' is not defined")
    assert s1 == s2 and "is not defined" in s1


def test_hashing_embedding_is_deterministic_normalised_and_lexical() -> None:
    v = hash_embed("matmul | aten.mm | in 5x123;123x77 | float32")
    assert v.shape == (256,) and v.dtype == np.float32
    assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
    assert not hash_embed("").any()
    # Same in another process (Python's own hash is salted per process; this must not depend on it).
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from kernelwright.memory.embedding import hash_embed; print(repr(hash_embed('tl.dot BLOCK_K').tolist()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert eval(out) == hash_embed("tl.dot BLOCK_K").tolist()
    near = text_similarity("matmul | aten.mm | in 128x64", "matmul | aten.mm | in 256x64")
    far = text_similarity("matmul | aten.mm | in 128x64", "softmax | aten._softmax | in 4096")
    assert near > 0.6 > far
    assert make_embedder("hashing-64").dim == 64
    with pytest.raises(ValueError, match="unknown embedding"):
        make_embedder("onnx-download-please")
    with pytest.raises(ValueError, match="sentence-transformers"):
        make_embedder("st:all-MiniLM-L6-v2")  # not installed here: a clear error, never a download


def test_small_helpers() -> None:
    assert capability_str(90) == "9.0"
    assert capability_str((8, 6)) == "8.6"
    assert capability_str("sm_100") == "10.0"
    assert capability_str(None) == ""
    assert major_minor("3.6.0+git1234") == "3.6"
    assert major_minor("") == ""
