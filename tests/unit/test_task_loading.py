"""Loading a task runs its code in the loader's child process, under a deadline (tasks/loader.py,
tasks/load_child.py): a task that sleeps, spins, crashes or exits is one line naming what it was doing, what
it prints goes to stderr, and this process runs none of its code. Bundled tasks are named from any folder,
and a task the CPU judge could verify only at a huge full size is refused for CPU.

The deadline is set to a few seconds here ($KERNELWRIGHT_TASK_LOAD_TIMEOUT); every hostile task is a real
file loaded by the real child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelwright.tasks import TaskError, load_task
from kernelwright.tasks.loader import (
    bundled_suite_dir,
    check_cpu_size,
    full_size_on_cpu,
    load_suite,
    resolve_task_path,
)

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 3.0
# The hanging tasks' deadline: each one waits it out. It counts from the request to a ready child (the
# child's start is not in it), and the steps before each hang take milliseconds, so a short one is safe.
HANG_DEADLINE_S = 1.5

HEADER = "import os, sys, time\nimport torch\nimport torch.nn as nn\n"
RELU_MODEL = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
INPUTS = "def get_inputs():\n    return [torch.randn(7, 33)]\n\ndef get_init_inputs():\n    return []\n"


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return path


@pytest.fixture(autouse=True)
def _short_deadline(monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_TASK_LOAD_TIMEOUT", str(DEADLINE_S))


HANGS = {
    "sleep_at_import": (
        "time.sleep(600)\n" + RELU_MODEL + INPUTS,
        f"importing the file did not finish in {HANG_DEADLINE_S:g} s",
    ),
    "spin_at_import": ("while True:\n    pass\n" + RELU_MODEL + INPUTS, "importing the file did not finish"),
    "exits_in_get_inputs": (
        RELU_MODEL + "def get_inputs():\n    os._exit(7)\n\ndef get_init_inputs():\n    return []\n",
        "the process loading the task exited with status 7 during get_inputs()",
    ),
    "sleep_in_get_inputs": (
        RELU_MODEL + "def get_inputs():\n    time.sleep(600)\n    return [torch.randn(7, 33)]\n\n"
        "def get_init_inputs():\n    return []\n",
        f"get_inputs() did not finish in {HANG_DEADLINE_S:g} s",
    ),
    "sleep_in_init_inputs": (
        RELU_MODEL + "def get_inputs():\n    return [torch.randn(7, 33)]\n\n"
        "def get_init_inputs():\n    time.sleep(600)\n    return []\n",
        "get_init_inputs() did not finish",
    ),
    "sleep_in_constructor": (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        time.sleep(600)\n"
        "    def forward(self, x):\n        return x\n" + INPUTS,
        "building Model did not finish",
    ),
    "spin_in_forward": (
        "class Model(nn.Module):\n    def forward(self, x):\n        while True:\n            pass\n"
        + INPUTS,
        "the forward on the meta device (shapes only) with get_inputs() did not finish",
    ),
    "sleep_in_small_forward": (
        "class Model(nn.Module):\n    def forward(self, x):\n        if x.device.type == 'cpu':\n"
        "            time.sleep(600)\n        return x\n" + INPUTS + "def get_small_inputs():\n"
        "    return [torch.randn(3, 5)]\n",
        "the forward on CPU with get_small_inputs() did not finish",
    ),
}


# Each case costs the deadline and a new child (seconds on a loaded machine): two steps by default.
QUICK = ("sleep_at_import", "spin_in_forward")


@pytest.mark.parametrize(
    "name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in sorted(HANGS)]
)
def test_a_task_that_hangs_is_one_line_naming_what_it_was_doing(tmp_path, monkeypatch, name):
    monkeypatch.setenv("KERNELWRIGHT_TASK_LOAD_TIMEOUT", str(HANG_DEADLINE_S))
    body, expected = HANGS[name]
    path = write(tmp_path, name, body)
    t0 = time.monotonic()
    with pytest.raises(TaskError) as caught:
        load_task(path)
    took = time.monotonic() - t0
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert expected in message, message
    assert ("KERNELWRIGHT_TASK_LOAD_TIMEOUT" in message) == ("did not finish" in message), message
    assert took < HANG_DEADLINE_S + 20, took  # the deadline, plus a loaded machine's start of a child
    # The child that ran it was replaced: the next task loads.
    os.environ["KERNELWRIGHT_TASK_LOAD_TIMEOUT"] = "120"  # restored by monkeypatch
    assert load_task(ROOT / "tasks" / "level1" / "01_relu.py").name == "01_relu"


def test_a_task_that_crashes_or_exits_is_one_line_and_the_next_task_loads(tmp_path):
    segv = write(tmp_path, "segv", "import ctypes\nctypes.string_at(0)\n" + RELU_MODEL + INPUTS)
    with pytest.raises(TaskError, match=r"killed by SIGSEGV during importing the file"):
        load_task(segv)
    exits = write(tmp_path, "exits", "sys.exit(3)\n")
    with pytest.raises(TaskError, match=r"importing the file raised SystemExit: 3 \(line 4\)"):
        load_task(exits)
    os.environ["KERNELWRIGHT_TASK_LOAD_TIMEOUT"] = "120"  # restored by monkeypatch
    assert load_task(ROOT / "tasks" / "level1" / "01_relu.py").checked_on == "cpu-small"


def test_a_task_runs_no_code_in_this_process_and_its_prints_go_to_stderr(tmp_path):
    marker = tmp_path / "ran_in"
    path = write(
        tmp_path,
        "prints",
        f"""
        open({str(marker)!r}, "a").write(str(os.getpid()) + "\\n")
        print("printed at import")
        class Model(nn.Module):
            def forward(self, x):
                print("printed in forward")
                return torch.relu(x)
        def get_inputs():
            return [torch.randn(7, 33)]
        def get_init_inputs():
            return []
        """,
    )
    script = (
        "import sys\nfrom kernelwright.tasks import load_task\n"
        f"t = load_task({str(path)!r})\nsys.stdout.write('done ' + t.checked_on)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done cpu-full"
    assert "printed at import" in done.stderr and "printed in forward" in done.stderr
    pids = {int(line) for line in marker.read_text().split()}
    assert pids and os.getpid() not in pids  # not this test's process either
    load_task(path)
    assert os.getpid() not in {int(line) for line in marker.read_text().split()}


def test_settings_a_task_changes_do_not_reach_the_next_task(tmp_path):
    meddler = write(tmp_path, "meddler", "torch.set_default_dtype(torch.float64)\n" + RELU_MODEL + INPUTS)
    assert load_task(meddler).signature.input_dtypes == ["float64"]
    plain = write(tmp_path, "plain", RELU_MODEL + INPUTS)
    assert load_task(plain).signature.input_dtypes == ["float32"]


def test_a_bad_deadline_is_one_line(monkeypatch):
    monkeypatch.setenv("KERNELWRIGHT_TASK_LOAD_TIMEOUT", "soon")
    with pytest.raises(TaskError, match="KERNELWRIGHT_TASK_LOAD_TIMEOUT='soon' is not a number of seconds"):
        load_task(ROOT / "tasks" / "level1" / "01_relu.py")


def test_bundled_tasks_are_named_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    softmax = bundled_suite_dir("level1") / "09_softmax.py"
    for spec in ("level1/09_softmax", "level1/09_softmax.py", "tasks/level1/09_softmax", "level1/09"):
        assert resolve_task_path(spec) == softmax, spec
    assert resolve_task_path("level2") == bundled_suite_dir("level2")
    with pytest.raises(TaskError, match=r"level1/1 names 10 bundled tasks \(10_log_softmax, "):
        resolve_task_path("level1/1")
    assert resolve_task_path("level1/nope") == Path("level1/nope")  # not found: the caller says so
    # A path that exists here wins over a bundled name.
    (tmp_path / "level1").mkdir()
    mine = tmp_path / "level1" / "09_softmax.py"
    mine.write_text("")
    assert resolve_task_path("level1/09_softmax.py") == Path("level1/09_softmax.py")


def test_a_task_the_cpu_judge_could_only_run_at_a_huge_size_is_refused_for_cpu(tmp_path):
    # literal sizes the forward ties together (two halves of the product's K: 4096 + 4096 = 8192, which is
    # also M): neither value can change alone (equal literals change together, so a plain square (a @ b) @ a
    # could)
    literal = write(
        tmp_path,
        "mm_literal",
        "class Model(nn.Module):\n    def forward(self, a, b, c):\n        return torch.cat([a, b], 1) @ c\n"
        "def get_inputs():\n"
        "    return [torch.randn(8192, 4096), torch.randn(8192, 4096), torch.randn(8192, 8192)]\n"
        "def get_init_inputs():\n    return []\n",
    )
    task = load_task(literal)
    assert task.checked_on == "meta" and task.cpu_resizable is False and full_size_on_cpu(task)
    with pytest.raises(TaskError) as caught:
        check_cpu_size(task, "cpu")
    message = str(caught.value)
    assert "too large to verify on CPU" in message and "1.1 TFLOP and 768 MiB per forward" in message
    assert "define get_small_inputs()" in message
    # The same sizes as module-level constants: the judge verifies it at a smaller size, no refusal.
    constants = write(
        tmp_path,
        "mm_constants",
        "N = 8192\nclass Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
        "def get_inputs():\n    return [torch.randn(N, N), torch.randn(N, N)]\n"
        "def get_init_inputs():\n    return []\n",
    )
    resizable = load_task(constants)
    assert resizable.cpu_resizable is True and check_cpu_size(resizable, "cpu") is None
    # Tied literal sizes, modest: verified at full size, and the cost is said before it starts.
    modest = write(
        tmp_path,
        "mm_modest",
        "class Model(nn.Module):\n    def forward(self, a, b, c):\n        return torch.cat([a, b], 1) @ c\n"
        "def get_inputs():\n"
        "    return [torch.randn(1024, 512), torch.randn(1024, 512), torch.randn(1024, 1024)]\n"
        "def get_init_inputs():\n    return []\n",
    )
    note = check_cpu_size(load_task(modest), "cpu")
    assert note is not None and "verified on CPU at its full size (2.15 GFLOP and 12 MiB per forward)" in note


def test_load_time_of_the_bundled_suites_stays_small():
    """Not a timing assertion (the machine is shared): the loads are counted and their time printed."""
    t0 = time.monotonic()
    tasks = load_suite(bundled_suite_dir("level1")) + load_suite(bundled_suite_dir("level2"))
    print(f"loaded {len(tasks)} bundled tasks in {time.monotonic() - t0:.2f} s")
    assert len(tasks) == 48
