"""The offline writer never makes a task's full-size inputs in the agent's process.

A ReLU task of 2 GiB without small inputs goes through `write_program` in a subprocess (so its peak
memory is its own): the task's `get_inputs()` logs the default device it was called under, which must
only ever be the meta device, and the process's peak RSS stays below the input's size.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK = """
import os
import torch
import torch.nn as nn

N = 512 * 1024 * 1024  # 2 GiB of fp32


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_init_inputs():
    return []


def get_inputs():
    with open(os.environ["KW_DEVICE_LOG"], "a") as fh:
        fh.write(str(torch.empty(0).device) + "\\n")
    return [torch.randn(N)]
"""
DRIVER = """
import resource, sys
from kernelwright.providers.offline import write_program
from kernelwright.providers.protocol import render_section
src = open(sys.argv[1]).read()
prompt = render_section("request", "write it", kind="large_step") + "\\n" + render_section("task", src, name="big")
answer = write_program(prompt)
print("wrote" if answer.code else answer.explanation)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def test_a_task_without_small_inputs_is_analysed_on_the_meta_device(tmp_path):
    task = tmp_path / "big.py"
    task.write_text(TASK)
    log = tmp_path / "devices.log"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(task)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "KW_DEVICE_LOG": str(log), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    wrote, peak_mib = done.stdout.split()[:1], int(done.stdout.split()[-1])
    assert wrote == ["wrote"]
    assert set(log.read_text().split()) == {"meta"}
    # The input made once would alone be 2048 MiB. Alone the process peaks at 400-500 MiB; in one full suite
    # run on a 2-core machine it peaked at 1044 MiB (not reproduced alone), so the bound is 3/4 of the input.
    assert peak_mib < 1536, f"peak RSS {peak_mib} MiB for a 2048 MiB input"
