"""optimize-model's report.html on a small model under the interpreter: the region table (operators,
shapes, places, status, speedup, "not timed" share on the CPU), progress rewritten while the model runs,
and the page kept, with the regions done, when the run stops with an error mid-model.

Regions come from a real Chroma memory (kernels that copy their region's output through a Triton launch),
so no search runs; the stitched model is judged by the real judge on the CPU (it finds the work done by
torch, not by these copy kernels: the page shows that verdict)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from kernelwright.graphs.context import Context
from kernelwright.graphs.model import ModelProgress, optimize_model_source
from kernelwright.hardware import WorkerPool
from kernelwright.memory import Case
from kernelwright.nodes import resources
from kernelwright.tasks.regions import split_model
from kernelwright.tasks.task import TaskSignature
from tests.kernels.tiny_model_src import copy_kernel

MLP = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 12)
        self.fc2 = nn.Linear(12, 3)

    def forward(self, x):
        h = torch.special.erfcx(F.relu(self.fc1(x)))
        return self.fc2(h)


def get_inputs():
    return [torch.randn(5, 10)]


def get_init_inputs():
    return []
"""


@pytest.fixture(autouse=True)
def _interpreted(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    yield
    resources.close_memories()


def _context(tmp_path: Path) -> Context:
    """A memory holding a kernel for every region of MLP that can be written as a task."""
    ns: dict[str, object] = {}
    exec(compile(MLP, "<mlp>", "exec"), ns)
    split = split_model(ns["Model"](), ns["get_inputs"]())  # type: ignore[operator]
    memory = resources.open_shared_memory(tmp_path / "memory")
    for region in split.regions:
        if region.source:
            memory.cases.add(Case(task_name=f"region_{region.signature}", signature=TaskSignature(),
                                  code=copy_kernel(region.source), correct=True, hardware="cpu-interpreter"))  # fmt: skip
    return Context(device="cpu", memory=str(tmp_path / "memory"), budget=1, workers=1, seed=0)


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _row(page: str, ops: str) -> str:
    row = next(r for r in page.split("<tr id='region-")[1:] if f"<code>{ops}</code>" in r)
    return _text(row.split(">", 1)[1].split("</tr>")[0])


@pytest.fixture
def judged_on_the_shared_pool(pool: WorkerPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """optimize-model judges its stitched model with hardware.evaluate, a pool of its own (a judge started and
    stopped: ~4.5 s of CPU); here the session's pool judges it, as it judges the regions' candidates. A
    verdict never depends on its judge being new (every candidate runs in a process of its own); the one-shot
    pool is kept by test_model_optimize.py's run through kernelwright.optimize_model."""
    import kernelwright.hardware as hardware

    monkeypatch.setattr(
        hardware, "evaluate", lambda task, source, config=None: pool.evaluate(task, source, config)
    )


@pytest.mark.usefixtures("judged_on_the_shared_pool")
def test_report_html_has_the_region_table_and_is_rewritten_as_regions_finish(tmp_path: Path) -> None:
    run = tmp_path / "run"
    seen: list[tuple[int, str]] = []
    lines: list[str] = []

    def progress(p: ModelProgress) -> None:
        seen.append((p.done, (run / "report.html").read_text(encoding="utf-8")))
        lines.append(p.line)

    result = optimize_model_source(MLP, "mlp", _context(tmp_path), run, on_progress=progress)
    assert [d for d, _ in seen] == [1, 2, 3, 3]  # three region signatures, then the stitched model's judging
    assert lines[-1].startswith("the stitched model: judging") and result.judge_s is not None
    for done, at in seen:  # the page as it stood at each step: regions done so far
        assert f"region signatures done {done} / 3" in _text(at) and "Running:" in _text(at)
    assert "waiting" in _row(seen[0][1], "Linear") and "reused from memory" in _row(seen[2][1], "Linear")
    assert 'http-equiv="refresh"' in seen[0][1]  # an open page reloads while the run goes on
    page = (run / "report.html").read_text(encoding="utf-8")
    assert 'http-equiv="refresh"' not in page  # finished: no reloading
    assert not re.search(r"(src|href)=['\"]?https?:", page)  # self-contained
    text = _text(page)
    assert "Finished: 2/3 regions run a kernel" in text and "region signatures done 3 / 3" in text
    # the judge's verdict on the stitched model, whatever it is (the test kernels leave the work to torch)
    assert result.correct is not None and f"Stitched model: {_text(result.verdict)[:60]}" in text
    fc1 = _row(page, "Linear + relu")
    assert "float32[5, 10] -> float32[5, 12]" in fc1 and "reused from memory" in fc1
    assert "correct, not timed" in fc1 and "not timed" in fc1.split("reused from memory")[1]
    kept = _row(page, "special_erfcx")
    assert "kept in torch" in kept and "float32[5, 12] -> float32[5, 12]" in kept
    assert re.search(
        r"^\w+ 1 Linear float32\[5, 12\] -> float32\[5, 3\] reused from memory", _row(page, "Linear")
    )
    assert "best region speedup so far not timed" in text and "whole model (judge) not timed" in text


def test_report_html_is_written_when_the_run_stops_mid_model(tmp_path: Path) -> None:
    run = tmp_path / "run"

    def progress(p: ModelProgress) -> None:
        if p.done == 2:
            raise KeyboardInterrupt("stopped by the user")

    with pytest.raises(KeyboardInterrupt):
        optimize_model_source(MLP, "mlp", _context(tmp_path), run, on_progress=progress)
    page = (run / "report.html").read_text(encoding="utf-8")
    text = _text(page)
    assert (
        "Stopped with an error after 2 of 3 region signatures: KeyboardInterrupt: stopped by the user" in text
    )
    assert "reused from memory" in _row(page, "Linear + relu") and "kept in torch" in _row(
        page, "special_erfcx"
    )
    assert "not reached" in _row(page, "Linear")
    assert 'http-equiv="refresh"' not in page
