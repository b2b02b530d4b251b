"""Tensor-descriptor (TMA) matmuls of the offline writer, run under Triton's interpreter.

fp16/bf16 products get a twin kernel that reads A and B through host-built tensor descriptors; the
launcher picks it when both operands have a unit stride and 16-byte aligned strides, and the pointer
kernel otherwise. Each program here runs in a subprocess that counts which twin launched and compares
with the task's Model at fp16 (the interpreter's bf16 dot is wrong; the GPU test covers bf16).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelwright.providers.offline import parse_meta, write_program
from kernelwright.providers.offline.variants import program_variant
from kernelwright.providers.protocol import render_section

LINEAR = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.linear = nn.Linear(i, o)
        self.to(torch.float16)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn({M}, {K}).half()]

def get_init_inputs():
    return [{K}, {N}]
"""

TRANSPOSED_A = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a.T, b) * 0.5

def get_inputs():
    return [torch.randn(72, 40).half(), torch.randn(72, 24).half()]

def get_init_inputs():
    return []
"""

BMM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b.transpose(1, 2)) + 1.0

def get_inputs():
    return [torch.randn(3, 40, 72).half(), torch.randn(3, 24, 72).half()]

def get_init_inputs():
    return []
"""

SWIGLU = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h, bias=False)
        self.to(torch.float16)

    def forward(self, x):
        return F.silu(self.gate(x)) * self.up(x)

def get_inputs():
    return [torch.randn(40, 72).half()]

def get_init_inputs():
    return [72, 24]
"""

# Runs the candidate beside the task's Model under the interpreter, counting launches of each twin.
DRIVER = """
import importlib.util, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

task, cand = load(sys.argv[1], "task"), load(sys.argv[2], "cand")
counts = {}

class Count:
    def __init__(self, name, fn):
        self.name, self.fn = name, fn
    def __getitem__(self, grid):
        counts[self.name] = counts.get(self.name, 0) + 1
        return self.fn[grid]

for name in [n for n in vars(cand) if n.startswith("k") and "_matmul" in n]:
    setattr(cand, name, Count(name, getattr(cand, name)))
torch.manual_seed(0)
ref = task.Model(*task.get_init_inputs())
new = cand.ModelNew(*task.get_init_inputs())
new.load_state_dict(ref.state_dict())
inputs = task.get_inputs()
want, got = ref(*inputs).float(), new(*inputs).float()
print(json.dumps({"counts": counts, "err": (want - got).abs().max().item(), "scale": want.abs().max().item()}))
"""


def _prompt(source: str, **sections: str) -> str:
    parts = [render_section("request", "Write a faster kernel.", kind="large_step"),
             render_section("task", source, name="t")]  # fmt: skip
    return "\n\n".join(parts + [render_section(tag, body) for tag, body in sections.items()])


def _run(tmp_path: Path, source: str, code: str) -> list[str]:
    (tmp_path / "task.py").write_text(textwrap.dedent(source))
    (tmp_path / "cand.py").write_text(code)
    (tmp_path / "driver.py").write_text(DRIVER)
    proc = subprocess.run([sys.executable, "driver.py", "task.py", "cand.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["err"] <= 2e-2 * max(1.0, out["scale"]), out
    # which twin launched, per launch: "tma" (k<i>_matmul_tma) or "pointer" (k<i>_matmul)
    return sorted(
        ("tma" if name.endswith("_tma") else "pointer") for name, n in out["counts"].items() for _ in range(n)
    )


def test_a_half_linear_reads_its_weight_through_descriptors(tmp_path):
    source = LINEAR.format(M=40, K=72, N=24)  # 72 and 24 halves: 144- and 48-byte strides, aligned
    code = write_program(_prompt(source)).code
    assert parse_meta(code).config.get("TMA") == "1" and "_kw_tma(" in code
    assert _run(tmp_path, source, code) == ["tma"]


def test_a_misaligned_stride_falls_back_to_the_pointer_kernel(tmp_path):
    source = LINEAR.format(M=7, K=93, N=24)  # 93 halves: a 186-byte row stride, which TMA cannot take
    code = write_program(_prompt(source)).code
    assert "_kw_tma(" in code
    assert _run(tmp_path, source, code) == ["pointer"]


def test_align_copies_a_misaligned_operand_so_the_descriptors_can_read_it(tmp_path):
    source = LINEAR.format(M=7, K=93, N=24)
    code = program_variant(textwrap.dedent(source), "t", "grouped", {"TMA": 1, "ALIGN": 1}).code
    assert "_kw_align(" in code
    assert _run(tmp_path, source, code) == ["tma"]


@pytest.mark.parametrize("design", ["grouped", "persistent"])
def test_a_transposed_a_and_a_persistent_walk_use_the_descriptors(tmp_path, design):
    code = program_variant(textwrap.dedent(TRANSPOSED_A), "t", design, {"TMA": 1}).code
    assert _run(tmp_path, TRANSPOSED_A, code) == ["tma"]


def test_a_bmm_reads_3d_descriptors_and_a_broadcast_batch_keeps_pointers(tmp_path):
    code = write_program(_prompt(BMM)).code
    assert parse_meta(code).config.get("TMA") == "1" and "_kw_tma(" in code
    assert _run(tmp_path, BMM, code) == ["tma"]
    # one A for every batch of B (A broadcast along the batch): no twin, and no TMA knob to search
    broadcast = BMM.replace("torch.bmm(a, b.transpose(1, 2))", "torch.matmul(a[0], b.transpose(1, 2))")
    code = write_program(_prompt(broadcast)).code
    assert "_kw_tma(" not in code and "TMA" not in parse_meta(code).config
    (tmp_path / "b").mkdir()
    assert _run(tmp_path / "b", broadcast, code) == ["pointer"]


def test_the_dual_kernel_reads_both_weights_through_descriptors(tmp_path):
    code = program_variant(textwrap.dedent(SWIGLU), "t", "dual", {"TMA": 1}).code
    assert code.count("tl.dot(") == 4  # two products, in the pointer kernel and in its twin
    assert _run(tmp_path, SWIGLU, code) == ["tma"]


def test_tma_zero_writes_no_twin():
    code = program_variant(textwrap.dedent(LINEAR.format(M=40, K=72, N=24)), "t", "grouped", {"TMA": 0}).code
    assert "_tma" not in code
