"""Whole optimize-graph runs with a scripted chat model, InMemorySaver, real memory and real workers.

Candidates are small ReLU kernels (tests/fakes/kernels.py) on the bundled 01_relu task's small inputs,
run in a CPU worker under the Triton interpreter. The worker pool is shared by the tests of this module
(nodes.resources caches it) and closed at the end.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import builder, serializer
from kernelwright.hardware import EvalConfig
from kernelwright.memory import open_memory
from kernelwright.nodes import resources
from kernelwright.nodes.records import OptimizeResult
from tests.fakes.chat import ScriptedChatModel, fenced
from tests.fakes.kernels import relu_compile_error, relu_kernel, relu_wrong

RELU = str(Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py")


@pytest.fixture(scope="module", autouse=True)
def _close_pools():
    yield
    resources.close_memories()  # the worker pool stays for the next module (tests/kernels/conftest.py)
    resources.forget_chat_models()


def make_ctx(tmp_path: Path, model: Any, **kw: Any) -> Context:
    base: dict[str, Any] = dict(
        chat_model=model,
        budget=4,
        device="cpu",
        target=None,
        workers=1,
        fanout=0,
        memory=str(tmp_path / "memory"),
        run_dir=str(tmp_path / "run"),
        seed=0,
        llm_rules=False,
        budget_llm_calls=None,
        budget_wall_s=None,
    )
    base.update(kw)
    return Context(**base)


def run_graph(ctx: Context, thread: str = "t") -> dict[str, Any]:
    app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    app.invoke({"task_path": RELU}, config=config, context=ctx)
    return app.get_state(config).values


def user_prompt(messages: list[Any]) -> str:
    return str(messages[-1].content)


def test_tree_grows_as_specified_and_failures_are_repaired(tmp_path):
    model = ScriptedChatModel(
        script=[
            fenced(relu_compile_error()),
            fenced(relu_kernel("repaired")),
            fenced(relu_kernel("second", 512)),
            fenced(relu_kernel("third", 256)),
        ]
    )
    state = run_graph(make_ctx(tmp_path, model, budget=4))
    jobs = state["jobs"]
    attempts = {a.node_id: a for a in state["attempts"]}
    assert [j.node_id for j in jobs] == ["n1", "n2", "n3", "n4"]
    # the root takes a large step; the failure is repaired next, from its own code and feedback
    assert (jobs[0].decision.parent, jobs[0].action) == ("n0", "large_step")
    assert (jobs[1].decision.parent, jobs[1].action) == ("n1", "repair")
    assert attempts["n1"].status == "failed" and attempts["n1"].result.error_kind == "compile_error"
    assert attempts["n2"].status == "correct"
    for j in jobs[2:]:
        parent = attempts.get(j.decision.parent)
        assert j.action in ("large_step", "small_step")
        assert j.decision.parent == "n0" or (parent is not None and parent.status == "correct")
        if j.decision.parent == "n0":
            assert j.action == "large_step"
    prompts = [user_prompt(p) for p in model.prompts]
    assert '<request kind="large_step">' in prompts[0]
    assert '<request kind="repair">' in prompts[1]
    assert "tl.no_such_function" in prompts[1]  # the parent kernel
    assert "compile_error" in prompts[1]  # and its feedback
    assert state["result"].search["nodes"] == 4


def test_failures_become_rules_and_cases_with_lineage(tmp_path):
    # A writer that answers one failing program three times: it is judged once; the repair's repeat is
    # its second failure, which closes design=broken (nodes/repeats.py), so the writer is asked again
    # with the failure named until it writes another program. The failure and the closing are rules.
    model = ScriptedChatModel(
        script=[fenced(relu_compile_error("broken"))] * 3 + [fenced(relu_kernel("ok"))] * 2
    )
    ctx = make_ctx(tmp_path, model, budget=3)
    state = run_graph(ctx)
    run_id = state["run"].run_id
    attempts = {a.node_id: a for a in state["attempts"]}
    assert [a.status for a in state["attempts"]] == ["failed", "correct", "correct"]
    assert [j.action for j in state["jobs"]][:2] == ["large_step", "repair"]
    assert attempts["n2"].candidate.repeat_asks == 2 and attempts["n2"].reflection.closed_design == "broken"

    mem = open_memory(ctx.memory)
    try:
        cases = [c for c in mem.cases.iter_all() if c.run_id == run_id]
        assert len(cases) == len(state["attempts"]) == 3
        by_id = {c.id: c for c in cases}
        n2 = by_id[attempts["n2"].reflection.case_id]
        assert n2.parent_id == attempts["n1"].reflection.case_id  # lineage edge
        assert n2.correct and not by_id[attempts["n1"].reflection.case_id].correct
        rules = {r.text.split(":")[0]: r for r in mem.rules.all()}
        assert len(rules) == 2
        failed = next(r for t, r in rules.items() if t.startswith("You cannot use design=broken with BLOCK="))
        closing = next(r for t, r in rules.items() if t.startswith("You cannot use design=broken for "))
        assert failed.text.startswith("You cannot use design=broken with BLOCK=1024,num_warps=4")
        assert failed.count == 1 and closing.count == 1
        assert {e.case_id for e in failed.evidence} == {attempts["n1"].reflection.case_id}
        assert "two of its programs failed the same way" in closing.text
        assert mem.rules.exposure_count() == 3
    finally:
        mem.close()
    assert attempts["n1"].reflection.rule_source == "signature"
    # the asks after the repeat carry the closed design as a rule; the first prompt has no rules
    assert "design=broken for pointwise on this task again" in user_prompt(model.prompts[2])
    assert "design=broken for pointwise on this task again" in user_prompt(model.prompts[3])
    assert "<rules>" not in user_prompt(model.prompts[0])
    assert state["result"].rules_learned == [failed.text, closing.text]


def test_llm_drafts_the_rule_when_the_provider_is_an_llm(tmp_path):
    model = ScriptedChatModel(
        script=[fenced(relu_wrong()), fenced(relu_kernel())],
        rules=[
            {"rule": "You cannot scale negative inputs when the op clamps them to zero", "reason": "relu"}
        ],
    )
    state = run_graph(make_ctx(tmp_path, model, budget=2, llm_rules=True))
    first = state["attempts"][0]
    assert first.status == "wrong" and first.result.error_kind == "mismatch"
    assert first.reflection.rule_source == "llm"
    assert first.reflection.rule_texts == ["You cannot scale negative inputs when the op clamps them to zero"]
    assert len(model.rule_prompts) == 1
    assert "tl.where(x > 0, x, 0.5 * x)" in user_prompt(model.rule_prompts[0])
    # two code calls + one rule call, with their tokens
    assert state["cost"].llm_calls == 3
    assert state["cost"].tokens_in > 0 and state["cost"].tokens_out > 0


def test_malformed_output_is_a_failure_with_a_reason(tmp_path):
    model = ScriptedChatModel(
        script=[
            "I would write a kernel but here is none.",
            "```python\nimport torch\nclass Model(torch.nn.Module):\n    pass\n```",
            fenced(relu_kernel()),
        ]
    )
    state = run_graph(make_ctx(tmp_path, model, budget=3))
    a1, a2, a3 = state["attempts"]
    assert a1.status == "failed" and a1.result.stage == "parse"
    assert "no fenced ```python code block" in (a1.result.error or "")
    assert a1.candidate.code is None and a1.candidate.error
    assert a2.status == "failed" and "does not define ModelNew" in (a2.result.error or "")
    assert [a.action for a in (a1, a2, a3)] == ["large_step", "repair", "repair"]
    assert a3.status == "correct"
    assert state["cost"].evaluations == 1  # no worker ran for answers without a program


def timing_by_design(speeds: dict[str, float]):
    """TEST ONLY timing source: runtime from the kernel's design name; eager takes 1.0 ms."""

    def source(task_name: str, code: str, result: Any) -> tuple[float, float]:
        design = re.search(r"design=(\S+)", code)
        assert design is not None
        return 1.0 / speeds[design.group(1)], 1.0

    return source


def test_best_is_the_fastest_correct_kernel(tmp_path):
    model = ScriptedChatModel(
        script=[
            fenced(relu_kernel("a", 1024)),
            fenced(relu_kernel("b", 512)),
            fenced(relu_wrong("c")),  # "fast" but wrong: never the best
            fenced(relu_kernel("d", 256)),
        ]
    )
    speeds = {"a": 1.5, "b": 3.0, "c": 9.0, "d": 2.0}
    ctx = make_ctx(tmp_path, model, budget=4, timing_source=timing_by_design(speeds))
    state = run_graph(ctx)
    result: OptimizeResult = state["result"]
    assert result.correct and result.best is not None
    by_design = {re.search(r"design=(\S+)", a.candidate.code or "").group(1): a for a in state["attempts"]}  # type: ignore[union-attr]
    assert result.best.node_id == by_design["b"].node_id
    assert result.best.speedup_vs_eager == pytest.approx(3.0)
    assert result.slower_than_eager is False
    assert "3.00x faster than eager" in result.verdict and "test-only" in result.verdict
    assert by_design["c"].status == "wrong" and by_design["c"].timing.speedup_vs_eager is None
    kernel = (Path(ctx.run_dir) / "kernel.py").read_text()
    assert "design=b" in kernel.splitlines()[0]
    # rewards follow the documented mapping
    assert by_design["b"].reward == pytest.approx(1.0 + 0.6 * 0.47712125, rel=1e-6)
    assert by_design["c"].reward == pytest.approx(0.05)


def test_a_best_kernel_slower_than_eager_is_said_plainly(tmp_path):
    model = ScriptedChatModel(script=[fenced(relu_kernel("slow"))])
    ctx = make_ctx(tmp_path, model, budget=1, timing_source=timing_by_design({"slow": 0.5}))
    result: OptimizeResult = run_graph(ctx)["result"]
    assert result.correct and result.slower_than_eager is True
    assert "SLOWER than eager" in result.verdict and "0.50x" in result.verdict
    data = json.loads((Path(ctx.run_dir) / "result.json").read_text())
    assert data["slower_than_eager"] is True and data["verdict"] == result.verdict


def test_cpu_runs_rank_by_correctness_and_invent_no_speedups(tmp_path):
    model = ScriptedChatModel(
        script=[fenced(relu_wrong()), fenced(relu_kernel("x")), fenced(relu_kernel("y", 256))]
    )
    state = run_graph(make_ctx(tmp_path, model, budget=3))
    result: OptimizeResult = state["result"]
    assert not state["run"].timing_meaningful
    assert all(a.timing.speedup_vs_eager is None for a in state["attempts"])
    assert all(a.timing.origin == "none" for a in state["attempts"] if a.status == "correct")
    assert result.best is not None and result.best.speedup_vs_eager is None
    assert result.best.node_id == "n2"  # the first correct one
    assert "speed is unknown" in result.verdict
    assert result.slower_than_eager is None
    assert result.cost.gpu_s == 0.0 and result.cost.eval_s > 0


def test_candidate_budget_stops_the_run(tmp_path):
    model = ScriptedChatModel(script=[fenced(relu_kernel())], loop=True)
    state = run_graph(make_ctx(tmp_path, model, budget=2))
    assert len(state["jobs"]) == len(state["attempts"]) == 2
    assert state["stop_reason"].startswith("candidate budget spent (2/2)")
    assert model.calls == 2
    # the model wrote the same program twice: it ran once, the second node reused that evaluation
    assert state["cost"].evaluations == 1
    second = state["attempts"][1]
    assert (
        second.status == "correct" and second.result.extra["same_program_as"] == state["attempts"][0].node_id
    )


def test_llm_call_budget_stops_the_run(tmp_path):
    model = ScriptedChatModel(script=["no code"], loop=True)
    state = run_graph(make_ctx(tmp_path, model, budget=10, budget_llm_calls=3))
    assert model.calls == 3
    assert "LLM call budget spent" in state["stop_reason"]
    assert state["result"].correct is False
    assert "No correct kernel" in state["result"].verdict
    assert not (Path(state["run"].run_dir) / "kernel.py").exists()


def test_wall_time_budget_stops_the_run(tmp_path):
    model = ScriptedChatModel(script=["no code"], loop=True)
    state = run_graph(make_ctx(tmp_path, model, budget=1000, budget_wall_s=1e-9))
    # the first planner step starts the clock; the next one sees the budget spent
    assert 1 <= len(state["attempts"]) <= 2
    assert "wall-time budget spent" in state["stop_reason"]


def test_fan_out_sends_k_expansions_at_once(tmp_path):
    model = ScriptedChatModel(script=["no code"], loop=True)
    ctx = make_ctx(tmp_path, model, budget=5, fanout=3)
    app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "fan"}}
    planned = []
    for chunk in app.stream({"task_path": RELU}, config=config, context=ctx, stream_mode="updates"):
        if "planner" in chunk and chunk["planner"].get("jobs"):
            planned.append([j.node_id for j in chunk["planner"]["jobs"]])
    assert planned[0] == ["n1", "n2", "n3"]  # three root large steps in flight at once
    assert sum(len(p) for p in planned) == 5
    state = app.get_state(config).values
    assert len(state["attempts"]) == 5


def test_outputs_kernel_result_and_report(tmp_path):
    model = ScriptedChatModel(script=[fenced(relu_compile_error()), fenced(relu_kernel("good"))])
    ctx = make_ctx(tmp_path, model, budget=2)
    state = run_graph(ctx)
    rd = Path(ctx.run_dir)  # type: ignore[arg-type]
    assert {"kernel.py", "result.json", "report.html", "evaluations.jsonl"} <= {p.name for p in rd.iterdir()}
    result = OptimizeResult.model_validate_json((rd / "result.json").read_text())
    assert result.correct and result.best is not None and result.best.node_id == "n2"
    assert result.tolerance is not None and result.target == "cpu-interpreter"
    assert result.versions.triton and result.cost.llm_calls == 2
    assert result.search["nodes"] == 2 and result.search["failed"] == 1
    html = (rd / "report.html").read_text()
    assert html.count("<svg") >= 2 and ">n1<" in html and ">n2<" in html
    assert "You cannot use design=flat-broken" in html
    # the written kernel is a standalone module the harness accepts
    pool = resources.worker_pool("cpu", 1)
    again = pool.evaluate(state["task"], (rd / "kernel.py").read_text(), EvalConfig(device="cpu", time=False))
    assert again.correct, again.error


def test_same_seed_same_search(tmp_path):
    def decisions(sub: str, seed: int) -> list[tuple[str, str]]:
        model = ScriptedChatModel(script=[fenced(relu_kernel("s"))], loop=True)
        ctx = make_ctx(tmp_path / sub, model, budget=6, seed=seed, timing_source=timing_by_design({"s": 2.0}))
        state = run_graph(ctx, thread=sub)
        return [(j.decision.parent, j.action) for j in state["jobs"]]

    assert decisions("a", 7) == decisions("b", 7)


@pytest.mark.slow
def test_a_gpu_target_on_cpu_compiles_each_verified_kernel_for_the_gpu(tmp_path):
    # num_warps=64 runs under the interpreter but no NVIDIA GPU accepts it
    model = ScriptedChatModel(
        script=[fenced(relu_kernel("too-wide", 1024, 64)), fenced(relu_kernel("fits", 1024, 4))]
    )
    ctx = make_ctx(tmp_path, model, budget=2, target="nvidia-h200")
    state = run_graph(ctx)
    a1, a2 = state["attempts"]
    assert state["run"].target == "nvidia-h200" and state["run"].device == "cpu"
    assert a1.status == "failed" and a1.result.error_kind == "compile_error"
    assert "does not compile for nvidia-h200" in (a1.result.error or "")
    assert a2.action == "repair" and a2.status == "correct"
    assert "registers" in a2.feedback  # the GPU compile summary is part of the feedback
    assert a1.reflection.rule_texts[0].startswith(
        "You cannot use design=too-wide with BLOCK=1024,num_warps=64"
    )
    assert "H200" in a1.reflection.rule_texts[0]
    phases = [
        json.loads(line)["phase"]
        for line in (Path(ctx.run_dir) / "evaluations.jsonl").read_text().splitlines()
    ]  # type: ignore[arg-type]
    assert phases.count("target_compile") == 2


def test_small_steps_are_shown_the_programs_already_written_in_the_run(tmp_path):
    # (blocks of 1024 and up: at 64 the interpreter runs ~100 programs of the task's small input per call)
    model = ScriptedChatModel(script=[fenced(relu_kernel(f"d{i}", 1024 << (i % 5))) for i in range(10)])
    state = run_graph(make_ctx(tmp_path, model, budget=10))
    jobs = state["jobs"]
    attempts = {a.node_id: a for a in state["attempts"]}
    small = 0
    for i, job in enumerate(jobs):
        earlier = [attempts[j.node_id].candidate.meta for j in jobs[:i]]
        if job.action in ("small_step", "large_step"):
            assert job.tried == [m for m in earlier if m]
            small += job.action == "small_step"
        else:
            assert job.tried == []
    prompts = [user_prompt(p) for p in model.prompts]
    shown = [p for p in prompts if "<tried>" in p]
    assert small and len(shown) == sum(bool(j.tried) for j in jobs)
    assert all('<request kind="repair">' not in p for p in shown)


def test_a_harness_failure_ends_the_search_at_once(tmp_path):
    """A task the judge cannot verify (its reference draws random numbers in forward) fails its first
    candidate with harness_error; the run stops there instead of spending its budget on repairs."""
    task = tmp_path / "random_task.py"
    task.write_text(
        (Path(__file__).resolve().parents[1] / "kernels" / "modes" / "task_random.py").read_text()
    )
    model = ScriptedChatModel(script=[fenced(relu_kernel(f"k{i}")) for i in range(6)])
    ctx = make_ctx(tmp_path, model, budget=6)
    app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "h"}, "recursion_limit": 1000}
    app.invoke({"task_path": str(task)}, config=config, context=ctx)
    state = app.get_state(config).values
    assert len(state["attempts"]) == 1, [a.result.error_kind for a in state["attempts"]]
    assert state["attempts"][0].result.error_kind == "harness_error"
    result: OptimizeResult = state["result"]
    assert result.verdict.startswith("Stopped after 1 candidate(s): the harness could not judge this task")
    assert "cannot be verified" in result.verdict


@pytest.mark.slow
def test_seeded_runs_on_the_same_memory_search_the_same_way(tmp_path):
    """The same task, seed and memory give the same search: the offline writer's choices must not depend
    on the random ids that runs give their records (they reach the prompt with the injected cases)."""
    import shutil

    from kernelwright.graphs.optimize import run_optimize

    def ctx(memory: str) -> Context:
        return Context(model="offline", budget=3, device="cpu", workers=1, fanout=0, memory=memory, seed=0,
                       llm_rules=False)  # fmt: skip

    run_optimize(
        RELU, ctx(str(tmp_path / "m0")), tmp_path / "r0"
    )  # fills the memory, its cases named after r0
    searches = []
    for i in (1, 2):
        shutil.copytree(tmp_path / "m0", tmp_path / f"m{i}")
        result = run_optimize(RELU, ctx(str(tmp_path / f"m{i}")), tmp_path / f"r{i}")
        nodes = result.search["nodes_detail"]
        searches.append(
            (result.run_id, [(n["id"], n["parent"], n["action"], n.get("design")) for n in nodes])
        )
    (id1, search1), (id2, search2) = searches
    assert id1 != id2
    assert search1 == search2 and len(search1) >= 3


SORT_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values


def get_inputs():
    return [torch.randn(5, 33)]


def get_init_inputs():
    return []
"""


def test_a_task_the_writer_cannot_express_stops_after_one_step_and_says_why(tmp_path):
    """The offline writer has no design for a sort: the run ends after the first step with a verdict that
    names the operator, spends no more candidates on it and learns no rule from it."""
    from kernelwright.graphs.optimize import run_optimize
    from kernelwright.nodes.planner import UNSUPPORTED_STOP

    task = tmp_path / "sort_last_dim.py"
    task.write_text(SORT_TASK)
    memory = tmp_path / "memory"
    ctx = Context(model="offline", budget=4, device="cpu", workers=1, fanout=0, memory=str(memory))
    result = run_optimize(str(task), ctx, tmp_path / "run")
    assert not result.correct
    assert result.stop_reason.startswith(UNSUPPORTED_STOP), result.stop_reason
    assert result.verdict.startswith("Unsupported:") and "aten.sort" in result.verdict, result.verdict
    assert result.cost.evaluations <= 1 and result.cost.llm_calls == 1
    with open_memory(memory) as m:
        assert m.rules.all() == []


def test_a_run_starts_the_pool_its_compiler_evaluates_on_before_its_first_step():
    """start_worker_pool opens the pool the compiler node will ask for (same device and workers key), so
    its judges import torch and Triton while the run starts; a device that cannot be had is left to the
    compiler's own error (nothing raised, no pool made)."""
    resources.start_worker_pool(Context(device="cpu", workers=1))
    pool = resources._pools.get(("cpu", 1))
    assert pool is not None and resources.worker_pool("cpu", 1) is pool
    import torch

    if not torch.cuda.is_available():
        before = dict(resources._pools)
        resources.start_worker_pool(Context(device="cuda", workers=1))  # the run reports it later
        assert resources._pools == before
