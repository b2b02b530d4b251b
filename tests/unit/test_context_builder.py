"""The active context manager: tiers, caps, budget, the record of what was injected and cut."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelwright.hardware.result import Versions
from kernelwright.memory import Case, RuleCandidate, open_memory
from kernelwright.nodes.context_builder import ContextBundle, TierCaps, build_context
from kernelwright.nodes.prompts import ANSWER_FORMAT, REQUEST_TEXT, render_request, request_text
from kernelwright.nodes.tokens import CHARS_PER_TOKEN, TokenCounter, tiktoken_cache_dir
from kernelwright.providers.protocol import parse_sections
from kernelwright.tasks.task import Task, TaskSignature

V = Versions(torch="2.13.0", triton="3.6.0")
HW = "nvidia-h100"
SIG = TaskSignature(
    op_families=["matmul"], ops=["aten.mm"], input_shapes=[[5, 123], [123, 77]], input_dtypes=["float32"]
)
TASK = Task(
    name="mm_5x123x77",
    source="import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n",
    signature=SIG,
)
PARENT = (
    "# kernelwright: family=matmul design=tiled config=BLOCK_M=32,BLOCK_N=32\nimport triton\n"
    + "x = 1\n" * 20
)


def kernel(design: str, lines: int = 30) -> str:
    return (
        f"# kernelwright: family=matmul design={design} config=BLOCK_M=64\nimport triton\n"
        + "y = 2  # body\n" * lines
    )


@pytest.fixture
def mem(tmp_path: Path):  # noqa: ANN201
    m = open_memory(tmp_path / "mem")
    cases = [
        Case.from_attempt(
            signature=SIG, code=kernel("fast_gemm"), correct=True, speedup=2.5, hardware=HW, idea="tile 64x64"
        ),
        Case.from_attempt(
            signature=SIG, code=kernel("slow_gemm"), correct=True, speedup=0.5, hardware=HW, idea="naive"
        ),
        Case.from_attempt(
            signature=SIG,
            code=kernel("broken"),
            correct=False,
            hardware=HW,
            idea="8x8 dot",
            feedback="CompilationError: must be >= 16",
        ),
        Case.from_attempt(
            signature=SIG,
            code=kernel("mi300_gemm"),
            correct=True,
            speedup=3.0,
            hardware="amd-mi300x",
            idea="wave64",
        ),
    ]
    m.cases.add_many(cases)
    for n in range(3):
        m.rules.add(
            RuleCandidate(
                text="You cannot use tl.dot with block dimensions below 16",
                error_kind="compile_error",
                error=f"AssertionError: first input shape ([constexpr[{n + 4}]]) must be >= 16!",
                op_families=["matmul"],
                hardware=HW,
                versions=V,
            )
        )
    m.rules.add(
        RuleCandidate(
            text="You cannot call torch.matmul inside the forward",
            error_kind="static_check",
            error="uses reference op aten.mm",
        )
    )
    yield m
    m.close()


def build(mem, **kw) -> ContextBundle:  # noqa: ANN001, ANN003
    args = dict(
        parent_code=PARENT,
        feedback="correct, 1.10x vs eager",
        target={"name": HW, "compute_capability": 90, "memory_bandwidth_gbs": 3350},
        versions=V,
        memory=mem,
        budget=6000,
    )
    args.update(kw)
    return build_context(TASK, kw.pop("kind", "small_step"), **args)  # type: ignore[arg-type]


def test_all_tiers_render_in_protocol_sections(mem) -> None:  # noqa: ANN001
    b = build(mem)
    sec = parse_sections(b.prompt)
    assert list(sec) == ["request", "task", "target", "parent", "feedback", "rules", "experience", "docs"]
    assert sec["request"].attrs == {"kind": "small_step"}
    assert (
        sec["task"].attrs == {"name": TASK.name, "signature": TASK.signature.key()}
        and "return a @ b" in sec["task"].body
    )
    assert "compute_capability: 90" in sec["target"].body
    assert sec["parent"].body.startswith("# kernelwright: family=matmul design=tiled")
    # Rules: only the one over the threshold, one per line, "- You cannot ...".
    assert sec["rules"].body.splitlines() == ["- You cannot use tl.dot with block dimensions below 16"]
    cases = re.findall(
        r'<case id="([^"]+)" outcome="([^"]+)" speedup="([^"]+)" hardware="([^"]+)" same_hardware="([^"]+)">',
        sec["experience"].body,
    )
    assert [(o, s, h, same) for _, o, s, h, same in cases] == [
        ("effective", "2.50", HW, "true"),
        ("negative", "0.50", HW, "true"),
        ("failed", "n/a", HW, "true"),
        ("effective", "3.00", "amd-mi300x", "false"),
    ]
    assert "design: kernelwright: family=matmul design=fast_gemm" in sec["experience"].body
    assert "speed does not carry over" in sec["experience"].body
    assert sec["docs"].body.startswith("- ")
    # The record: hot items, then rules/cases (warm), cross-hardware case and docs (cold).
    kinds = [(i.kind, i.tier) for i in b.injected]
    assert kinds[:5] == [
        ("request", "hot"),
        ("task", "hot"),
        ("target", "hot"),
        ("parent", "hot"),
        ("feedback", "hot"),
    ]
    assert (
        ("rule", "warm") in kinds
        and ("case", "warm") in kinds
        and ("case", "cold") in kinds
        and ("doc", "cold") in kinds
    )
    assert b.rule_ids == [mem.rules.all()[0].id]
    assert len(b.case_ids) == 4
    assert b.tokens_used == TokenCounter()(b.prompt) <= b.budget
    assert b.tier_tokens["hot"] > 0 and not b.over_budget
    rec = b.record()
    assert rec.rule_ids == b.rule_ids and rec.case_ids == b.case_ids and rec.tokens_used == b.tokens_used


def test_caps_and_budget_cut_and_say_why(mem) -> None:  # noqa: ANN001
    caps = TierCaps(cases=250, max_cases=3, docs=0)
    b = build(mem, caps=caps)
    case_tokens = sum(i.tokens for i in b.injected if i.kind == "case" and i.tier == "warm")
    assert case_tokens <= 250
    reasons = {(i.kind, i.reason) for i in b.cut}
    assert ("case", "cases cap 250") in reasons
    assert ("doc", "docs cap 0") in reasons
    assert "<docs>" not in b.prompt

    # nothing optional fits; the hot tier is never cut, and rules (orders, within their cap) go in anyway
    hot_only = build(mem, budget=1)
    assert hot_only.over_budget
    assert [(i.kind, i.tier) for i in hot_only.injected if i.tier != "hot"] == [("rule", "warm")]
    assert (
        "<rules>" in hot_only.prompt and "<task" in hot_only.prompt and "<experience>" not in hot_only.prompt
    )
    assert hot_only.cut and all(i.reason.startswith("budget 1") and i.kind != "rule" for i in hot_only.cut)
    # the same over a rules cap of 0: no rule, and the cut says why
    capped = build(mem, budget=1, caps=TierCaps(rules=0))
    assert "<rules>" not in capped.prompt and ("rule", "rules cap 0") in {
        (i.kind, i.reason) for i in capped.cut
    }

    hot = sum(i.tokens for i in hot_only.injected if i.tier == "hot")
    tight = build(mem, budget=hot + 120)
    assert tight.tokens_used <= hot + 120 and not tight.over_budget
    assert tight.cut and any(i.kind in ("case", "doc") for i in tight.cut) and "<rules>" in tight.prompt
    for budget in (hot + 40, hot + 300, hot + 800, hot + 2000):
        b = build(mem, budget=budget)
        assert b.tokens_used <= budget
        assert len(b.injected) + len(b.cut) >= 5


def test_long_feedback_keeps_its_head_and_tail(mem) -> None:  # noqa: ANN001
    fb = (
        "FAIL at compile: compile_error\n"
        + "\n".join(f"  frame {i}" for i in range(2000))
        + "\nValueError: the real cause"
    )
    b = build(mem, feedback=fb, caps=TierCaps(feedback=100))
    body = parse_sections(b.prompt)["feedback"].body
    assert body.startswith("FAIL at compile: compile_error\n[...]")
    assert body.endswith("ValueError: the real cause")
    feedback_item = next(i for i in b.injected if i.kind == "feedback")
    assert feedback_item.tokens <= 100 + 10  # the cap plus the section tags
    assert any(i.kind == "feedback" and i.reason == "feedback cap 100" for i in b.cut)


def test_without_memory_and_for_each_request_kind() -> None:
    designs = [{"node_id": "n3", "code": kernel("d1", 3), "speedup": 1.7}, kernel("d2", 3)]
    b = build_context(TASK, "large_step", memory=None, designs=designs, budget=4000)
    sec = parse_sections(b.prompt)
    assert "rules" not in sec and "experience" not in sec
    assert '<design id="n3" speedup="1.70">' in sec["designs"].body
    assert '<design id="design-1" speedup="n/a">' in sec["designs"].body
    assert [i.id for i in b.injected if i.kind == "design"] == ["n3", "design-1"]
    repair = build_context(TASK, "repair", parent_code=PARENT, feedback="boom", designs=designs, budget=4000)
    assert "designs" not in parse_sections(repair.prompt)  # designs are for large steps
    assert "smallest change" in parse_sections(repair.prompt)["request"].body
    # One request text per kind (nodes/prompts.py), whether or not the caller passes it, as the graph does.
    for kind in REQUEST_TEXT:
        body = parse_sections(build_context(TASK, kind, memory=None).prompt)["request"].body
        assert body == f"{REQUEST_TEXT[kind]}\n{ANSWER_FORMAT}"
        assert build_context(TASK, kind, memory=None, request_text=request_text(kind)).prompt.startswith(
            render_request(kind)
        )
    with pytest.raises(ValueError, match="unknown request kind"):
        build_context(TASK, "rewrite")
    with pytest.raises(ValueError, match="budget"):
        build_context(TASK, "repair", budget=0)


def test_parent_case_is_not_shown_as_experience(mem) -> None:  # noqa: ANN001
    fast = next(c for c in mem.cases.iter_all() if c.design == "fast_gemm")
    b = build(mem, exclude_case_ids=[fast.id])
    assert fast.id not in b.case_ids
    assert fast.id in build(mem).case_ids


def test_target_object_and_unknown_hardware(mem) -> None:  # noqa: ANN001
    from kernelwright.hardware.targets import get_target

    target = get_target("h100")
    b = build(mem, target=target)
    body = parse_sections(b.prompt)["target"].body
    assert target.summary() in body and f"name: {target.name}" in body
    assert target.name == HW  # the hardware name memory cases are recorded under
    assert 'same_hardware="true"' in b.prompt and 'same_hardware="false"' in b.prompt
    a100 = build(mem, target=get_target("a100"))
    assert 'same_hardware="true"' not in a100.prompt  # every stored case is from other hardware here
    nothing = build(mem, target=None)
    assert "<target>" not in nothing.prompt and 'same_hardware="unknown"' in nothing.prompt


def test_token_counter_never_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken.load

    def no_network(*args: object, **kw: object) -> bytes:
        raise AssertionError("tiktoken tried to fetch an encoding")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tiktoken_cache_dir() == str(tmp_path)
    counter = TokenCounter()
    assert not counter.exact and counter.name == f"estimate:chars/{CHARS_PER_TOKEN}"
    assert counter("x" * 35) == 10 and counter("x" * 36) == 11 and counter("") == 0
    # A corrupt cache file (tiktoken would delete it and download again) is not used either.
    import hashlib

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"not an encoding")
    assert not TokenCounter().exact


def test_a_design_too_long_for_its_cap_keeps_its_outline() -> None:
    long_design = kernel("implicit_gemm", lines=2000)
    b = build_context(TASK, "large_step", memory=None, designs=[long_design], budget=6000)
    designs = parse_sections(b.prompt)["designs"].body
    assert "design=implicit_gemm" in designs and "left out for room" in designs
    assert len(designs.splitlines()) < 10
    assert any(c.kind == "design" and "outline kept" in c.text for c in b.cut)
    assert any(i.kind == "design" for i in b.injected)


def test_steps_are_shown_the_headers_already_written_and_repairs_are_not() -> None:
    tried = ["# kernelwright: family=softmax design=row_registers config=TILE=2048", "not a header", ""]
    small = build_context(TASK, "small_step", parent_code=PARENT, memory=None, tried=tried, budget=4000)
    sec = parse_sections(small.prompt)
    assert sec["tried"].body.splitlines() == tried[:2]
    assert any(i.kind == "tried" for i in small.injected)
    large = build_context(TASK, "large_step", memory=None, tried=tried, budget=4000)
    assert parse_sections(large.prompt)["tried"].body.splitlines() == tried[:2]
    repair = build_context(
        TASK, "repair", parent_code=PARENT, feedback="boom", memory=None, tried=tried, budget=4000
    )
    assert "tried" not in parse_sections(repair.prompt)


def test_a_program_is_shown_once_and_the_cases_are_the_best_distinct_ones(tmp_path: Path) -> None:
    """Three attempts that stored the same kernel, a fourth the design pool shows already, two rules in the
    same words: the prompt holds each program once and each rule once, and the experience section is
    filled with the next best distinct programs instead of copies."""
    from kernelwright.memory.records import Rule

    relu = kernel("relu_flat")
    design = kernel("design_pool")
    m = open_memory(tmp_path / "mem")
    try:
        copies = [
            Case.from_attempt(signature=SIG, code=relu + "\n" * i, correct=True, speedup=3.0 - 0.01 * i, hardware=HW)
            for i in range(3)
        ]  # fmt: skip
        shown = Case.from_attempt(signature=SIG, code=design, correct=True, speedup=2.9, hardware=HW)
        others = [
            Case.from_attempt(signature=SIG, code=kernel(f"other{i}"), correct=True, speedup=1.5 - 0.1 * i, hardware=HW)
            for i in range(3)
        ]  # fmt: skip
        m.cases.add_many([*copies, shown, *others])
        text = "You cannot use tl.dot with block dimensions below 16"
        m.rules.put_raw([Rule(text=text, count=3, op_families=["matmul"]) for _ in range(4)])
        b = build_context(
            TASK, "large_step", memory=m, designs=[design, design], versions=V, budget=8000,
            target={"name": HW}, caps=TierCaps(max_cross_cases=0),
        )  # fmt: skip
    finally:
        m.close()
    sec = parse_sections(b.prompt)
    assert sec["rules"].body.splitlines() == [f"- {text}"]
    assert sec["designs"].body.count("design=design_pool") == 1
    experience = sec["experience"].body
    assert experience.count("<case ") == 3 and "design=design_pool" not in experience
    assert b.case_ids == [copies[0].id, others[0].id, others[1].id]


def test_each_injected_rule_and_case_says_why_it_was_chosen(mem) -> None:  # noqa: ANN001
    """The run report's "why" column: a rule's count, family and relevance; a case's task and match."""
    b = build(mem)
    rules = [i for i in b.injected if i.kind == "rule"]
    cases = [i for i in b.injected if i.kind == "case"]
    assert rules and all(
        re.fullmatch(r"seen 3 times; same op family; relevance \d\.\d\d", i.reason) for i in rules
    )
    assert cases and all(re.search(r"; match \d\.\d\d$", i.reason) for i in cases)
    cross = [i for i in cases if i.tier == "cold"]
    assert cross and all("correct on amd-mi300x (shows what compiles there)" in i.reason for i in cross)
    assert all(i.reason for i in b.injected if i.kind in ("doc", "design"))
