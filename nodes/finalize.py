"""The finalize node: what a finished run hands back (the best kernel, result.json, report.html, and
the plain verdict).

The best kernel is the fastest correct one (with no meaningful timing, the first correct one). The
verdict says plainly when nothing correct was found, when the best kernel is slower than eager
PyTorch, and when its speed was not measured; a result is never presented as a speedup it is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from kernelwright.nodes.planner import wall_delta
from kernelwright.nodes.records import Attempt, BestKernel, CostLedger, Job, OptimizeResult, RunInfo
from kernelwright.nodes.repeats import failure_counts
from kernelwright.nodes.report import write_report
from kernelwright.nodes.run_context import Context
from kernelwright.nodes.search import Outcome, SearchTree
from kernelwright.nodes.state import State
from kernelwright.providers.protocol import KernelHeader, header_line

KERNEL_FILE = "kernel.py"
RESULT_FILE = "result.json"
REPORT_FILE = "report.html"


def tree_of(jobs: list[Job], attempts: list[Attempt], config: Any = None) -> SearchTree:
    outcomes: dict[str, Outcome] = {a.node_id: a.outcome for a in attempts}
    return SearchTree.replay([j.decision for j in jobs], outcomes, config)


def verdict_for(
    best: BestKernel | None, n: int, run: RunInfo, stop_reason: str = ""
) -> tuple[str, bool | None]:
    """(one plain sentence, slower than eager or None when unknown)."""
    from kernelwright.nodes.planner import HARNESS_STOP, UNSUPPORTED_STOP

    if best is None and stop_reason.startswith(UNSUPPORTED_STOP):
        why = stop_reason.split(": ", 1)[-1]
        return f"Unsupported: {why}. Stopped after {n} step(s); keep the reference PyTorch program.", None
    if best is None and stop_reason.startswith(HARNESS_STOP):
        return (
            f"Stopped after {n} candidate(s): {stop_reason}. No candidate was at fault; fix the task (or the "
            "machine) and run again.",
            None,
        )
    if best is None:
        return (
            f"No correct kernel was found in {n} candidate(s); keep the reference PyTorch program.",
            None,
        )
    s = best.speedup_vs_eager
    if s is None:
        why = run.timing_note or "timing was not measured"
        return f"Found a correct Triton kernel ({best.node_id}); its speed is unknown: {why}.", None
    source = (
        " (timings from the test-only timing source, not measured)" if best.timing_origin == "test" else ""
    )
    if s < 1.0:
        return (
            f"The best correct kernel ({best.node_id}) is SLOWER than eager PyTorch: {s:.2f}x; "
            f"keep the reference{source}.",
            True,
        )
    vs_compile = (
        f", {best.speedup_vs_compile:.2f}x vs torch.compile" if best.speedup_vs_compile is not None else ""
    )
    return f"Found a kernel {s:.2f}x faster than eager PyTorch{vs_compile} ({best.node_id}){source}.", False


def _attempt_detail(a: Attempt | None) -> dict[str, object]:
    """What one tried node was and how it went: its design line, time and error kind (report, benchmarks)."""
    if a is None:
        return {}
    return {
        "design": header.body if (header := KernelHeader.parse(a.candidate.meta)) else "",
        "runtime_ms": a.timing.runtime_ms,
        "speedup_vs_compile": a.timing.speedup_vs_compile,
        "error_kind": a.result.error_kind,
    }


def build_result(state: dict[str, Any], config: Any = None) -> OptimizeResult:
    run: RunInfo = state["run"]
    jobs: list[Job] = list(state.get("jobs") or [])
    attempts: list[Attempt] = list(state.get("attempts") or [])
    cost: CostLedger = state.get("cost") or CostLedger()
    tree = tree_of(jobs, attempts, config)
    by_node = {a.node_id: a for a in attempts}
    node = tree.best()
    best: BestKernel | None = None
    tolerance = None
    if node is not None:
        a = by_node[node.id]
        assert a.candidate.code is not None
        best = BestKernel(
            node_id=a.node_id,
            code=a.candidate.code,
            speedup_vs_eager=a.timing.speedup_vs_eager,
            speedup_vs_compile=a.timing.speedup_vs_compile,
            speedup_ci=a.timing.speedup_ci,
            runtime_ms=a.timing.runtime_ms,
            runtime_p20_ms=a.timing.runtime_p20_ms,
            runtime_p80_ms=a.timing.runtime_p80_ms,
            eager_ms=a.timing.eager_ms,
            compile_ms=a.timing.compile_ms,
            fraction_of_floor=a.timing.fraction_of_floor,
            timing_origin=a.timing.origin,
        )
        tolerance = a.result.tolerance
    verdict, slower = verdict_for(best, len(attempts), run, str(state.get("stop_reason") or ""))
    summary: dict[str, object] = dict(tree.summary())
    summary["failures"] = failure_counts(attempts)  # by kind, repeats judged and blocked (nodes/repeats.py)
    summary["nodes_detail"] = [
        {
            "id": n.id,
            "parent": n.parent,
            "action": n.action,
            "status": n.status,
            "speedup": n.speedup,
            "reward": n.reward,
            "depth": n.depth,
            "segment": n.segment,
            **_attempt_detail(by_node.get(n.id)),
        }
        for n in sorted(tree.nodes.values(), key=lambda n: n.index)
    ]
    rules: list[str] = []
    for a in attempts:
        for t in a.reflection.rule_texts:
            if t not in rules:
                rules.append(t)
    return OptimizeResult(
        task=run.task_name,
        run_id=run.run_id,
        run_dir=run.run_dir,
        correct=best is not None,
        verdict=verdict,
        slower_than_eager=slower,
        best=best,
        tolerance=tolerance,
        precision=run.precision,
        timing_meaningful=run.timing_meaningful,
        timing_note=run.timing_note,
        target=run.target,
        device=run.device,
        compute_capability=run.compute_capability,
        versions=run.versions,
        model=run.model,
        seed=run.seed,
        stop_reason=str(state.get("stop_reason") or ""),
        roofline_floor_ms=run.roofline_floor_ms,
        search=summary,
        cost=cost,
        rules_learned=rules,
        started_at=run.started_at,
    )


def kernel_file_text(result: OptimizeResult) -> str:
    """The best kernel as a standalone module; a comment after the metadata line says where it came from."""
    assert result.best is not None
    lines = result.best.code.rstrip("\n").splitlines()
    note = [
        f"# Generated by kernelwright for task {result.task} (run {result.run_id[:12]}, node {result.best.node_id}).",
        f"# Target {result.target}, device {result.device}, precision {result.precision}. {result.verdict}",
        # Outside kernelwright (whose judge sets it) a Triton launch on CPU tensors fails without this.
        "# Without a CUDA GPU, run it under Triton's interpreter: set TRITON_INTERPRET=1 before triton is",
        "# imported (`TRITON_INTERPRET=1 python my_script.py`); results are checkable there, speeds are not.",
    ]
    at = 1 if lines and header_line(lines[0]) else 0
    return "\n".join(lines[:at] + note + lines[at:]) + "\n"


def write_outputs(result: OptimizeResult, out_dir: str | Path) -> list[Path]:
    """kernel.py (when a correct kernel exists) and result.json; returns the files written.

    A kernel.py left in `out_dir` by an earlier run is removed when this run found none, so the folder
    never pairs this result with another run's kernel.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    kernel = out / KERNEL_FILE
    if result.best is not None:
        kernel.write_text(kernel_file_text(result), encoding="utf-8")
        written.append(kernel)
    elif kernel.exists():
        kernel.unlink()
    path = out / RESULT_FILE
    path.write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    written.append(path)
    return written


def finalize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Write kernel.py, result.json and report.html to the run directory; put the result in the state."""
    run = state["run"]
    delta = wall_delta(run.run_id)
    cost = (state.get("cost") or CostLedger()) + CostLedger(wall_s=delta)
    result = build_result({**state, "cost": cost}, runtime.context.search_config())
    write_outputs(result, run.run_dir)
    write_report(result, list(state.get("attempts") or []), Path(run.run_dir) / REPORT_FILE)
    return {"result": result, "cost": CostLedger(wall_s=delta)}
