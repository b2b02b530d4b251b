"""The optimize graph on a real GPU: the profiler's measured path (skipped without CUDA).

One command on a GPU machine runs it: `pytest tests/kernels/test_graph_gpu.py -q`. With $OUT set, a JSON
summary of the run (speedups, timings, cost) is written to $OUT/graph_gpu.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from kernelwright.graphs.context import Context  # noqa: E402
from kernelwright.graphs.optimize import builder, serializer  # noqa: E402
from kernelwright.nodes import resources  # noqa: E402
from tests.fakes.chat import ScriptedChatModel, fenced  # noqa: E402
from tests.fakes.kernels import relu_kernel, relu_wrong  # noqa: E402

RELU = str(Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py")


def test_measured_speedups_pick_the_fastest_kernel(tmp_path):
    model = ScriptedChatModel(
        script=[
            fenced(relu_kernel("b1024", 1024, 4)),
            fenced(relu_wrong("wrong")),
            fenced(relu_kernel("b4096", 4096, 8)),
            fenced(relu_kernel("b128", 128, 1)),
        ]
    )
    ctx = Context(
        chat_model=model,
        budget=4,
        device="cuda",
        workers=1,
        memory=str(tmp_path / "memory"),
        run_dir=str(tmp_path / "run"),
        llm_rules=False,
        roofline_stop=None,
    )
    app = builder.compile(checkpointer=InMemorySaver(serde=serializer()))
    config = {"configurable": {"thread_id": "gpu"}, "recursion_limit": 1000}
    try:
        app.invoke({"task_path": RELU}, config=config, context=ctx)
    finally:
        resources.close_all()
    state = app.get_state(config).values
    run, result = state["run"], state["result"]
    assert run.device == "cuda" and run.timing_meaningful and run.target != "cpu-interpreter"
    correct = [a for a in state["attempts"] if a.status == "correct"]
    assert len(correct) == 3
    for a in correct:
        assert a.timing.origin == "measured"
        assert a.timing.runtime_ms and a.timing.runtime_ms > 0
        assert a.timing.eager_ms and a.timing.eager_ms > 0
        assert a.timing.speedup_vs_eager == pytest.approx(a.result.speedup_vs_eager)
        assert a.timing.fraction_of_floor is not None and 0 < a.timing.fraction_of_floor < 1.5
    wrong = [a for a in state["attempts"] if a.status == "wrong"]
    assert len(wrong) == 1 and wrong[0].timing.speedup_vs_eager is None
    fastest = max(correct, key=lambda a: a.timing.speedup_vs_eager or 0)
    assert result.best is not None and result.best.node_id == fastest.node_id
    assert result.timing_meaningful and result.cost.gpu_s > 0
    assert (result.slower_than_eager is True) == ((result.best.speedup_vs_eager or 0) < 1.0)
    entries = [json.loads(x) for x in (Path(run.run_dir) / "evaluations.jsonl").read_text().splitlines()]
    # On a GPU one worker call verifies and times a candidate (nodes/compiler.py times_while_verifying):
    # four verifications, the three correct ones timed in them, and no separate timing run.
    assert [e["phase"] for e in entries] == ["verify"] * 4
    assert sum(1 for e in entries if e["result"]["correct"] and e["result"]["runtime_ms"]) == 3
    if os.environ.get("OUT"):
        out = Path(os.environ["OUT"])
        out.mkdir(parents=True, exist_ok=True)
        summary = {
            "target": run.target,
            "verdict": result.verdict,
            "best": result.best.model_dump(mode="json", exclude={"code"}),
            "attempts": [
                {"node": a.node_id, "status": a.status, **a.timing.model_dump(mode="json")}
                for a in state["attempts"]
            ],
            "cost": result.cost.model_dump(mode="json"),
        }
        (out / "graph_gpu.json").write_text(json.dumps(summary, indent=2))
