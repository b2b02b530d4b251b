"""Bad tasks through the command line, as a user meets them (the loader itself: tests/unit/test_task_loading.py).

- `eval --json` of a task that prints: stdout is the JSON alone, the prints are on stderr;
- `eval` and `optimize` of a task that hangs at import: one line naming the step, exit 2, quickly, and
  `optimize` makes no run folder;
- a task with literal 8192-sized matmuls on CPU: refused before anything starts, exit 2, nothing made;
- a bundled task named from another folder (`level1/01_relu`).

Each starts the command (and a judge) once or twice: 25-35 s on a loaded 2-core machine, so all are `slow`;
the parts they wire together are tested quickly in tests/unit/test_task_loading.py and test_bad_input.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KW = ROOT / ".venv" / "bin" / "kernelwright"
RELU_OK = ROOT / "tests" / "kernels" / "candidates" / "relu_ok.py"

PRINTING_RELU = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    print("the task says hello at import")

    class Model(nn.Module):
        def forward(self, x):
            print("the task says hello in forward")
            return torch.relu(x)

    def get_inputs():
        print("the task says hello in get_inputs")
        return [torch.randn(7, 33)]

    def get_init_inputs():
        return []
    """
)


def kw(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KW), *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, **env})  # fmt: skip


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_eval_json_of_a_task_that_prints_is_json_alone(tmp_path):
    task = tmp_path / "printing_relu.py"
    task.write_text(PRINTING_RELU)
    done = kw("eval", str(task), str(RELU_OK), "--device", "cpu", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # nothing before or after the document
    assert result["correct"] is True
    assert "the task says hello at import" in done.stderr and "hello in forward" in done.stderr


def test_a_task_that_hangs_at_import_is_one_line_and_optimize_makes_nothing(tmp_path):
    task = tmp_path / "sleepy.py"
    task.write_text("import time\ntime.sleep(600)\n" + PRINTING_RELU)
    t0 = time.monotonic()
    done = kw("eval", str(task), str(RELU_OK), "--json", cwd=tmp_path, KERNELWRIGHT_TASK_LOAD_TIMEOUT="3")
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr) == (
        f"kernelwright eval: {task}: importing the file did not finish in 3 s (the task's own code; "
        "KERNELWRIGHT_TASK_LOAD_TIMEOUT sets the limit)"
    )
    out = tmp_path / "run"
    done = kw("optimize", str(task), "--device", "cpu", "--memory", str(tmp_path / "mem"), "--out", str(out),
              cwd=tmp_path, KERNELWRIGHT_TASK_LOAD_TIMEOUT="3")  # fmt: skip
    assert done.returncode == 2
    assert "importing the file did not finish in 3 s" in one_line(done.stderr)
    assert not out.exists()
    assert time.monotonic() - t0 < 120  # was 130-300 s, with nothing printed


def test_8192_matmuls_the_cpu_judge_cannot_shrink_are_refused_on_cpu_before_a_run_starts(tmp_path):
    # (int literals among get_inputs' sizes are shrunk now, tasks/resize.py: a size computed by a call is not)
    task = tmp_path / "mm8192.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, a, b):\n"
        "        return a @ b\n\nN = int('8192')\n\ndef get_inputs():\n    return [torch.randn(N, N), torch.randn(N, N)]\n"
        "\ndef get_init_inputs():\n    return []\n"
    )
    done = kw("eval", str(task), str(RELU_OK), "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert "too large to verify on CPU" in line and "1.1 TFLOP and 768 MiB per forward" in line
    out = tmp_path / "run"
    done = kw("optimize", str(task), "--device", "cpu", "--memory", str(tmp_path / "mem"), "--out", str(out),
              cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2 and "too large to verify on CPU" in one_line(done.stderr)
    assert not out.exists()


def test_a_bundled_task_is_named_from_another_folder(tmp_path):
    done = kw("eval", "level1/01_relu", str(RELU_OK), "--device", "cpu", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["correct"] is True
