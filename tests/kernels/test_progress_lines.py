"""What `kernelwright optimize` prints as a run goes: one line per candidate, as a user reads them.

A whole run in process (a scripted chat model, the CPU judge, no memory); the pool stays open for the next
module (tests/kernels/conftest.py).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from kernelwright.cli.optimize import ProgressPrinter
from kernelwright.graphs.context import Context
from kernelwright.graphs.optimize import run_optimize
from kernelwright.nodes import resources
from tests.fakes.chat import ScriptedChatModel, fenced
from tests.fakes.kernels import relu_kernel

RELU = Path(__file__).resolve().parents[2] / "tasks" / "level1" / "01_relu.py"


@pytest.fixture(autouse=True)
def _close_models():
    yield
    resources.forget_chat_models()


def test_a_repeated_program_names_the_first_and_a_folder_run_says_its_task_once(tmp_path):
    """Byte-identical programs are judged once: the repeats say whose program they are, not "correct"
    again. A folder run's lines carry the task's name as their label; the first line says it once."""
    model = ScriptedChatModel(script=[fenced(relu_kernel("ok"))], loop=True)
    ctx = Context(chat_model=model, budget=3, device="cpu", memory="off", llm_rules=False)
    shown = io.StringIO()
    printer = ProgressPrinter(Console(file=shown, width=200, soft_wrap=True), label=RELU.stem)
    run_optimize(RELU, ctx, tmp_path / "run", on_progress=printer, close_pools=False)
    lines = shown.getvalue().splitlines()
    assert lines[0].startswith(f"{RELU.stem}: model ") and lines[0].count(RELU.stem) == 1, lines[0]
    attempts = [line for line in lines if "<-" in line]
    assert len(attempts) == 3 and all(line.startswith(f"{RELU.stem} [") for line in attempts), lines
    assert " correct" in attempts[0]
    assert all("same program as n1" in line and " correct" not in line for line in attempts[1:]), attempts
