"""The convolution writer's half-precision implicit GEMM reads its packed weight through a tensor descriptor
where it can (W_TMA): run under Triton's interpreter at fp16, in a subprocess that records each launch's
W_TMA and compares with the task's Model (the interpreter's bf16 dot is wrong; the GPU covers bf16)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from kernelwright.providers.offline.conv import analyze_conv_task, emit_conv_program

CONV = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{conv}({cin}, {cout}, 3, groups={groups}{extra})
        self.to(torch.float16)

    def forward(self, x):
        return torch.relu(self.conv(x) + 0.5)

def get_inputs():
    return [torch.randn(2, {cin}, 6, 7).half()]

def get_init_inputs():
    return []
"""

DRIVER = """
import importlib.util, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

out = {}
for job, (task_path, cand_path) in json.loads(open(sys.argv[1]).read()).items():
    task, cand = load(task_path, "task_" + job), load(cand_path, "cand_" + job)
    flags = []

    class Record:
        def __init__(self, fn):
            self.fn = fn
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                flags.append(kwargs.get("W_TMA"))
                return self.fn[grid](*args, **kwargs)
            return launch

    for name in [n for n in vars(cand) if n.startswith("_kw_stage")]:
        setattr(cand, name, Record(getattr(cand, name)))
    torch.manual_seed(0)
    ref = task.Model(*task.get_init_inputs())
    new = cand.ModelNew(*task.get_init_inputs())
    new.load_state_dict(ref.state_dict())
    inputs = task.get_inputs()
    want, got = ref(*inputs).float(), new(*inputs).float()
    out[job] = {"flags": flags, "err": (want - got).abs().max().item(), "scale": want.abs().max().item()}
print(json.dumps(out))
"""

CASES = {  # name: (task source, W_TMA expected on the conv stage)
    "conv16": (CONV.format(conv="Conv2d", cin=16, cout=24, groups=1, extra=""), True),
    "grouped": (CONV.format(conv="Conv2d", cin=32, cout=24, groups=2, extra=""), True),  # CIN_G 16, OC_G 12
    "transposed": (CONV.format(conv="ConvTranspose2d", cin=16, cout=8, groups=1, extra=", stride=2"), True),
    "odd_channels": (CONV.format(conv="Conv2d", cin=5, cout=7, groups=1, extra=""), False),  # CIN_G % BK
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("conv_tma")
    jobs = {}
    for name, (source, _) in CASES.items():
        src = textwrap.dedent(source)
        code = emit_conv_program(analyze_conv_task(src, name).plan, src, design="implicit_gemm")
        assert "W_TMA" in code, name
        (root / f"task_{name}.py").write_text(textwrap.dedent(source))
        (root / f"cand_{name}.py").write_text(code)
        jobs[name] = [str(root / f"task_{name}.py"), str(root / f"cand_{name}.py")]
    (root / "jobs.json").write_text(json.dumps(jobs))
    (root / "driver.py").write_text(DRIVER)
    proc = subprocess.run([sys.executable, "driver.py", "jobs.json"], cwd=root, capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(CASES))
def test_the_weight_is_read_through_a_descriptor_where_the_channels_allow(runs, name):
    r = runs[name]
    assert r["err"] <= 2e-2 * max(1.0, r["scale"]), r
    assert r["flags"][0] is CASES[name][1], r["flags"]
