"""The rule book on a real Chroma PersistentClient: merging, threshold, relevance, effect, pruning."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda

from kernelwright.hardware.result import Versions
from kernelwright.memory import RuleCandidate, open_memory
from kernelwright.nodes.prompts import SameRule
from kernelwright.nodes.reflector import judge_same_rule

V36 = Versions(torch="2.13.0", triton="3.6.0")
V35 = Versions(torch="2.12.0", triton="3.5.1")

DOT_ERR = (
    'File "/tmp/w/cand_{n}.py", line {n}\ntriton.compiler.errors.CompilationError: at {n}:8:\n'
    "AssertionError: All values in both first input shape ([constexpr[{a}], constexpr[{a}]]) and second "
    "input shape ([constexpr[{a}], constexpr[{a}]]) must be >= 16!"
)
NAME_ERR = "NameError: name '{v}' is not defined"
SMEM_ERR = "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: {n}, Hardware limit: 232448"


def dot_candidate(
    n: int, text: str = "You cannot use tl.dot with block dimensions below 16", **kw: Any
) -> RuleCandidate:
    base = dict(
        text=text,
        error_kind="compile_error",
        error=DOT_ERR.format(n=n, a=4 + n % 8),
        op_families=["matmul"],
        hardware="nvidia-h100",
        versions=V36,
        case_id=f"case-{n}",
    )
    base.update(kw)
    return RuleCandidate(**base)


class JudgeModel(BaseChatModel):
    """Answers yes/no with a rule; no tool calling, so structured output is not available."""

    decide: Callable[[str], bool]
    calls: list[str] = []
    fail: bool = False

    @property
    def _llm_type(self) -> str:
        return "judge-test"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        text = str(messages[-1].content)
        self.calls.append(text)
        if self.fail:
            raise ConnectionError("provider unreachable")
        answer = "Yes, they are the same." if self.decide(text) else "No."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])


class StructuredJudge(JudgeModel):
    def with_structured_output(self, schema: Any, **kw: Any) -> Any:  # type: ignore[override]
        return RunnableLambda(lambda prompt: SameRule(same=self.decide(str(prompt))))


@pytest.fixture
def mem(tmp_path: Path):  # noqa: ANN201
    m = open_memory(tmp_path / "mem")
    yield m
    m.close()


def test_same_error_merges_and_counts_evidence(mem) -> None:  # noqa: ANN001
    first = mem.rules.add(dot_candidate(1))
    assert not first.merged and first.rule.count == 1
    # Same failure, other numbers, path and shapes, reworded rule, other hardware: one rule.
    second = mem.rules.add(
        dot_candidate(
            2, text="You cannot call tl.dot when a block dimension is smaller than 16", hardware="nvidia-a100"
        )
    )
    third = mem.rules.add(dot_candidate(3, versions=V35))
    assert second.merged and second.matched_by in ("signature", "text")
    assert third.merged
    rule = mem.rules.get(first.rule.id)
    assert rule.count == 3
    assert rule.text == first.rule.text  # the first wording stays
    assert [e.case_id for e in rule.evidence] == ["case-1", "case-2", "case-3"]
    assert all("must be >= 16" in e.excerpt for e in rule.evidence)
    assert rule.hardware == ["nvidia-h100", "nvidia-a100"]
    assert rule.triton_versions == ["3.6", "3.5"]
    assert rule.error_kinds == ["compile_error"]
    assert rule.first_seen <= rule.last_seen
    assert mem.rules.count() == 1


def test_one_case_is_counted_once_when_its_writes_are_made_again(mem) -> None:  # noqa: ANN001
    """A run's step repeated (after the memory failed it part-way) writes its rule observation and its
    exposure again: the count and the exposures stay as after the first time."""
    for _ in range(2):
        mem.rules.add(dot_candidate(1))
        again = mem.rules.add(dot_candidate(2))
        mem.rules.record_rule_exposure([], failed=True, op_families=["matmul"], case_id="case-2")
    assert again.merged and again.note == "counted already for this case"
    assert [(r.count, [e.case_id for e in r.evidence]) for r in mem.rules.all()] == [
        (2, ["case-1", "case-2"])
    ]
    assert [e.id for e in mem.rules.exposures()] == ["exp-case-2"]
    mem.rules.add(dot_candidate(3, case_id=None))
    mem.rules.add(dot_candidate(3, case_id=None))  # no case to tell them apart: two observations
    assert mem.rules.all()[0].count == 4


def test_different_errors_stay_apart(mem) -> None:  # noqa: ANN001
    mem.rules.add(dot_candidate(1))
    name = mem.rules.add(
        RuleCandidate(
            text="You cannot use a variable inside a kernel before assigning it",
            error_kind="compile_error",
            error=NAME_ERR.format(v="acc"),
            op_families=["matmul"],
            versions=V36,
        )
    )
    smem = mem.rules.add(
        RuleCandidate(
            text="You cannot use BLOCK_K=256 with num_stages=4 for fp32 matmul",
            error_kind="compile_error",
            error=SMEM_ERR.format(n=262144),
            op_families=["matmul"],
            versions=V36,
        )
    )
    assert not name.merged and not smem.merged
    assert mem.rules.count() == 3
    again = mem.rules.add(
        RuleCandidate(
            text="You cannot read a kernel variable that was never assigned",
            error_kind="compile_error",
            error=NAME_ERR.format(v="offs_k2"),
            versions=V36,
        )
    )
    assert again.merged and again.rule.id == name.rule.id and again.matched_by == "signature"


MISMATCH = (
    "output 0 tensor[{a}, 64, 128] float32 on cuda:0: {n} of 524288 elements outside rtol=0.0001, atol=1e-05\n"
    "  first mismatches: [0, 0, {a}]: got 0.2499{n} expected 0.2496{n}"
)


def mismatch_candidate(n: int, action: str) -> RuleCandidate:
    return RuleCandidate(
        text=f"You cannot {action} on NVIDIA H200: mismatch: first mismatches: got <n> expected <n>",
        error_kind="mismatch",
        error=MISMATCH.format(n=n, a=n % 7 + 1),
        op_families=["pointwise"],
        hardware="nvidia-h200",
        versions=V36,
        case_id=f"case-m{n}",
    )


def test_rules_about_different_kernels_never_merge_on_alike_errors(mem) -> None:  # noqa: ANN001
    """A mismatch's signature masks its numbers, so mismatches of unrelated programs read alike: merged, the
    first rule's kernel (the default pointwise config) was forbidden on evidence from three other programs."""
    flat = "use design=flat with BLOCK=1024,num_warps=4 for pointwise"
    first = mem.rules.add(mismatch_candidate(1, flat))
    other = mem.rules.add(
        mismatch_candidate(2, "use design=row_registers with BLOCK_I=128,TILE=4096 for softmax")
    )
    other_config = mem.rules.add(
        mismatch_candidate(3, "use design=flat with BLOCK=512,num_warps=4 for pointwise")
    )
    same = mem.rules.add(mismatch_candidate(4, flat))
    # the same epilogue config in a program that kept its convolution in torch is another kind of program
    beside = mem.rules.add(mismatch_candidate(5, f"{flat} beside torch's conv2d"))
    assert not other.merged and not other_config.merged and not beside.merged
    assert same.merged and same.rule.id == first.rule.id
    assert sorted(r.count for r in mem.rules.all()) == [1, 1, 1, 2]


def test_judge_decides_when_given(mem) -> None:  # noqa: ANN001
    a = mem.rules.add(dot_candidate(1))
    # The judge says "no" even though the error signatures match: the judge wins.
    no = JudgeModel(decide=lambda prompt: False)
    b = mem.rules.add(
        dot_candidate(2, text="You cannot use tl.dot on fp8 inputs"), judge=partial(judge_same_rule, no)
    )
    assert not b.merged and no.calls
    # A structured judge merges rules whose errors differ.
    yes = StructuredJudge(decide=lambda prompt: prompt.count("grid") >= 2)  # both rules are about grids
    c = mem.rules.add(
        RuleCandidate(
            text="You cannot launch a zero-size grid",
            error_kind="runtime_error",
            error="ValueError: grid is empty",
            versions=V36,
        ),
        judge=partial(judge_same_rule, yes),
    )
    assert not c.merged
    d = mem.rules.add(
        RuleCandidate(
            text="You cannot launch with a zero-size grid axis",
            error_kind="runtime_error",
            error="RuntimeError: invalid grid",
            versions=V36,
        ),
        judge=partial(judge_same_rule, yes),
    )
    assert d.merged and d.matched_by == "judge" and d.rule.id == c.rule.id
    # A failing judge falls back to the signatures and says so.
    broken = JudgeModel(decide=lambda prompt: True, fail=True)
    reworded = "You cannot use tl.dot when a block dimension is below 16"
    e = mem.rules.add(dot_candidate(5, text=reworded), judge=partial(judge_same_rule, broken))
    assert e.merged and e.rule.id == a.rule.id and "judge failed" in e.note


def test_the_same_words_are_one_rule_and_no_judge_is_asked(mem) -> None:  # noqa: ANN001
    """Byte-identical rules were stored several times when the judge said "not the same": the same words
    (up to spacing, case and a final full stop) now merge before any judge is asked."""
    no = JudgeModel(decide=lambda prompt: False)
    judge = partial(judge_same_rule, no)
    text = "You cannot call tl.exp2 on an int32 tensor"
    first = mem.rules.add(
        RuleCandidate(text=text, error_kind="compile_error", error="TypeError: a", versions=V36)
    )
    again = [
        mem.rules.add(
            RuleCandidate(
                text=t,
                error_kind=kind,
                error=f"{kind}: {n}",
                versions=V36,
                case_id=f"case-{n}",
                op_families=["pointwise"],
            ),
            judge=judge,
        )
        for n, (t, kind) in enumerate(
            [
                (text, "compile_error"),
                ("  you cannot call tl.exp2 on an  int32 tensor. ", "runtime_error"),
                (text, "mismatch"),
            ]
        )
    ]
    assert all(u.merged and u.matched_by == "exact" and u.rule.id == first.rule.id for u in again)
    assert no.calls == []  # not one model call spent on "X" and "X"
    (rule,) = mem.rules.all()
    assert rule.count == 4 and rule.text == text and set(rule.op_families) == {"pointwise"}
    # A different rule still goes to the judge, which keeps it apart.
    other = mem.rules.add(
        RuleCandidate(
            text="You cannot call tl.exp2 on a float64 tensor",
            error_kind="compile_error",
            error="TypeError: b",
            versions=V36,
        ),
        judge=judge,
    )
    assert not other.merged and len(no.calls) == 1


def test_rules_stored_twice_in_the_same_words_are_offered_once(mem) -> None:  # noqa: ANN001
    """A memory written before exact duplicates were merged holds the same rule under several ids: a
    prompt gets it once (the best-ranked copy) and the other offered rules keep their places."""
    from kernelwright.memory.records import Rule

    text = "You cannot use tl.dot with block dimensions below 16"
    copies = [Rule(text=text, count=3 + i, op_families=["matmul"], triton_versions=["3.6"]) for i in range(4)]
    other = Rule(text="You cannot pass num_ctas to a triton.Config", count=3, op_families=["matmul"])
    mem.rules.put_raw([*copies, other])
    got = mem.rules.relevant("matmul | aten.mm", op_families=["matmul"], versions=V36, k=5)
    assert [r.rule.text for r in got].count(text) == 1 and len(got) == 2
    assert got[0].rule.id == copies[-1].id  # the copy seen most often ranks first and is the one kept


def test_threshold_and_relevance(mem) -> None:  # noqa: ANN001
    for n in range(3):
        mem.rules.add(dot_candidate(n))
    for n in range(2):  # below the threshold
        mem.rules.add(
            RuleCandidate(
                text="You cannot store to out_ptr without a mask on the last block",
                error_kind="mismatch",
                error=f"mismatch at index {n}: expected 1.0 got 0.0 (row tail not written)",
                op_families=["softmax"],
                versions=V36,
            )
        )
    for n in range(4):  # over the threshold but only seen with another Triton
        mem.rules.add(
            RuleCandidate(
                text="You cannot pass num_ctas to a triton.Config",
                error_kind="compile_error",
                error=f"TypeError: Config.__init__() got an unexpected keyword argument 'num_ctas' ({n})",
                op_families=["matmul"],
                versions=V35,
            )
        )
    q = "matmul | aten.mm | in 5x123;123x77 | float32"
    got = mem.rules.relevant(q, op_families=["matmul"], hardware="nvidia-h100", versions=V36)
    assert [r.rule.text for r in got] == ["You cannot use tl.dot with block dimensions below 16"]
    # Without a toolchain to match, the 3.5 rule is offered too; with threshold 1, all three.
    assert len(mem.rules.relevant(q, op_families=["matmul"])) == 2
    assert len(mem.rules.relevant(q, min_count=1)) == 3
    assert [r.count for r in mem.rules.all()] == [4, 3, 2]
    assert len(mem.rules.all(min_count=3)) == 2


def test_effect_and_prune(mem) -> None:  # noqa: ANN001
    helps = mem.rules.add(dot_candidate(1)).rule
    useless = mem.rules.add(
        RuleCandidate(
            text="You cannot use tl.where with a scalar condition",
            error_kind="compile_error",
            error="ValueError: condition must be a tensor",
            op_families=["matmul"],
            versions=V36,
        )
    ).rule
    old = mem.rules.add(
        RuleCandidate(
            text="You cannot use tl.math.pow on ints",
            error_kind="compile_error",
            error="pow int",
            versions=V35,
        )
    ).rule
    fams = ["matmul"]
    # Attempts with `helps` in context fail 1 in 10; without it 6 in 10. `useless` changes nothing.
    for i in range(10):
        mem.rules.record_rule_exposure([helps.id, useless.id], failed=i == 0, op_families=fams)
    for i in range(10):
        mem.rules.record_rule_exposure([], failed=i < 6, op_families=fams)
    for i in range(10):
        mem.rules.record_rule_exposure([useless.id], failed=i < 7, op_families=fams)
    mem.rules.record_rule_exposure([], failed=True, op_families=["softmax"])  # not comparable to matmul rules
    eff = mem.rules.effects()
    assert (eff[helps.id].with_attempts, eff[helps.id].with_failures) == (10, 1)
    assert (eff[helps.id].without_attempts, eff[helps.id].without_failures) == (20, 13)
    assert eff[useless.id].rate_with == pytest.approx(8 / 20)
    assert eff[useless.id].rate_without == pytest.approx(6 / 10)
    assert eff[helps.id].helps(min_samples=10) is True
    assert eff[helps.id].helps(min_samples=50) is None
    assert mem.rules.exposure_count() == 31

    # `useless` lowers the rate too here (0.4 < 0.6); make it hurt: more failures with it.
    for _ in range(20):
        mem.rules.record_rule_exposure([useless.id], failed=True, op_families=fams)
    dry = mem.rules.prune(installed=V36, min_samples=10, dry_run=True)
    assert {r.id for r in dry.removed} == {useless.id, old.id}
    assert mem.rules.count() == 3
    report = mem.rules.prune(installed=V36, min_samples=10)
    reasons = {r.id: r.reason for r in report.removed}
    assert "does not help" in reasons[useless.id]
    assert "triton 3.5" in reasons[old.id]
    assert report.kept == 1
    assert [r.id for r in mem.rules.all()] == [helps.id]
    # Not enough samples: nothing is judged.
    assert mem.rules.prune(installed=V36, min_samples=1000).removed == []


def test_a_rule_about_a_targets_limits_stays_on_that_target_and_validity_rules_travel(mem) -> None:  # noqa: ANN001
    for n in range(4):
        mem.rules.add(dot_candidate(n, hardware="nvidia-h100"))  # the compiler rejects it anywhere
        mem.rules.add(
            RuleCandidate(
                text="You cannot use BLOCK_K=256 with num_stages=4 in the matmul kernel",
                error_kind="compile_error",
                error=SMEM_ERR.format(n=262144 + n),
                op_families=["matmul"],
                hardware="nvidia-h100",
                versions=V36,
            )
        )
    limits = next(r for r in mem.rules.all() if "BLOCK_K=256" in r.text)
    dot = next(r for r in mem.rules.all() if "tl.dot" in r.text)
    assert limits.target_bound and not dot.target_bound
    q = "matmul | aten.mm | in 4096x4096;4096x4096 | float32"

    def texts(hardware: str) -> set[str]:
        return {
            r.rule.text
            for r in mem.rules.relevant(q, op_families=["matmul"], hardware=hardware, versions=V36)
        }

    assert texts("nvidia-h100") == {limits.text, dot.text}
    assert texts("nvidia-a100") == {dot.text}  # another GPU: its own shared memory, the same compiler


def test_a_limit_the_compiler_reported_exceeded_is_offered_from_its_first_sighting(mem) -> None:  # noqa: ANN001
    """A compile report that says a kernel exceeds the target's shared memory is the same on every try:
    its rule is offered at count 1 (on that target), where other rules wait for the threshold. The report
    lists every kernel of the program; the line that did not fit is what the evidence keeps."""
    report = (
        "verified on the interpreter, but does not compile for nvidia-l4:\n"
        "compile for nvidia-l4 (cuda:89, full shapes): FAILED (compile_error)\n"
        "  k1_matmul[num_warps=8, num_stages=3, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64]: 255 registers, 147456 B "
        "shared (limit 101376), EXCEEDS shared memory limit: launch would fail\n"
        "  k2_softmax[num_warps=4, num_stages=1, BLOCK=1024]: 30 registers, 0 B shared (limit 101376)\n"
    )
    over = mem.rules.add(
        RuleCandidate(
            text="You cannot use design=persistent with BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,num_stages=3 for "
            "matmul on NVIDIA L4 24GB: compile_error",
            error_kind="compile_error",
            error=report,
            op_families=["matmul"],
            hardware="nvidia-l4",
            versions=V36,
        )
    ).rule
    assert over.count == 1 and over.certain and over.target_bound
    assert "EXCEEDS shared memory" in over.evidence[0].excerpt
    mem.rules.add(dot_candidate(1))  # a compile error too, but not a limit: seen once, not offered yet
    q = "matmul | aten.mm | in 4096x4096;4096x4096 | float16"

    def offered(hardware: str) -> list[str]:
        return [
            r.rule.id for r in mem.rules.relevant(q, op_families=["matmul"], hardware=hardware, versions=V36)
        ]

    assert mem.rules.threshold == 3
    assert offered("nvidia-l4") == [over.id]
    assert offered("nvidia-h200") == []  # another GPU's limit
    assert [r.id for r in mem.rules.all(min_count=3)] == [over.id]
    assert len(mem.rules.all()) == 2


def test_prune_merges_rules_stored_twice_in_the_same_words(mem) -> None:  # noqa: ANN001
    """A memory from before exact duplicates were merged: two counts of 2 under one text were each below
    the threshold of 3. `prune` merges them (the oldest keeps the summed count, a case both counted
    counts once) and the rule is offered again; a dry run changes nothing."""
    from kernelwright.memory.records import Evidence, Rule

    text = "You cannot use tl.dot with block dimensions below 16"
    old = Rule(text=text, count=2, op_families=["matmul"], first_seen=1.0, triton_versions=["3.6"],
               evidence=[Evidence(case_id="case-a", at=1.0), Evidence(case_id="case-b", at=2.0)])  # fmt: skip
    new = Rule(text=text + ".", count=2, op_families=["conv"], first_seen=5.0, triton_versions=["3.6"],
               evidence=[Evidence(case_id="case-b", at=2.0), Evidence(case_id="case-c", at=6.0)])  # fmt: skip
    mem.rules.put_raw([old, new])
    assert mem.rules.relevant("matmul", versions=V36) == []  # neither copy reaches the threshold
    dry = mem.rules.prune(installed=V36, dry_run=True)
    assert [r.id for r in dry.removed] == [new.id] and len(mem.rules.all()) == 2
    report = mem.rules.prune(installed=V36)
    assert [r.id for r in report.removed] == [new.id] and report.kept == 1
    assert report.removed[0].reason == f"the same words as {old.id}: merged into it (count now 3)"
    (rule,) = mem.rules.all()
    assert rule.id == old.id and rule.count == 3 and set(rule.op_families) == {"matmul", "conv"}
    assert [e.case_id for e in rule.evidence] == ["case-a", "case-b", "case-c"]
    assert [r.rule.id for r in mem.rules.relevant("matmul", versions=V36)] == [old.id]
