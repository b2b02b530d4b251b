"""kernelwright imports under its own name only: a project with its own `tasks`, `memory`, `graphs` ...
packages runs it beside them (the distribution used to claim those names at the top level)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "tasks" / "level1" / "01_relu.py"

SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, sys
    import tasks, memory
    from kernelwright.graphs.context import Context
    from kernelwright.graphs.optimize import run_optimize
    from kernelwright.tasks import load_task

    result = run_optimize(sys.argv[1], Context(model="offline", budget=1, device="cpu", memory="off"), sys.argv[2])
    print(json.dumps({
        "own_tasks": tasks.OWN, "own_memory": memory.OWN, "correct": result.correct,
        "task": load_task(sys.argv[1]).name,
        "claimed": [n for n in ("graphs", "nodes", "providers", "hardware") if importlib.util.find_spec(n)],
    }))
    """
)


@pytest.mark.slow  # a whole optimize run in a fresh process, ~14 s; the import-name rules are unit-tested in tests/unit/test_one_import_name.py
def test_a_project_with_its_own_tasks_and_memory_packages_runs_kernelwright(tmp_path):
    project = tmp_path / "project"
    for name in ("tasks", "memory"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text(f"OWN = {name!r}\n")
    (project / "run.py").write_text(SCRIPT)
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"
    }  # kernelwright as installed, nothing else
    proc = subprocess.run(
        [sys.executable, "run.py", str(RELU), str(tmp_path / "run")],
        cwd=project, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"own_tasks": "tasks", "own_memory": "memory", "correct": True, "task": "01_relu",
                   "claimed": []}  # fmt: skip
