"""A conv program written at aligned channel counts, run at others: its implicit GEMM's K stays 16-aligned.

The writer traces a task at one size; `bench --unseen` runs the same program at others. Over a channels-last
copy (LAYOUT=nhwc) the implicit GEMM's K walks (tap, input channel); where a group's input channels are not
a multiple of 16, the launcher pads them with zeros in the input's copy and in the packed weight, decided
from the tensors at run time (compiled for sm_90, the unpadded stage spilled at 47 channels: its K tiles'
rows were 47 elements apart). Under the interpreter, each program here runs beside the task's Model at
several input/output channel counts (and groups, and a transposed convolution), and every launch of its
stage kernel is recorded: the K extent and the input's row strides it was given must be multiples of 16,
the output must match torch's, and the weight's cached padded copy must hold zeros past its channels.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from kernelwright.providers.offline.families.conv.conv import (
    analyze_conv_task,
    default_conv_config,
    emit_conv_program,
)
from tests.fakes.warm_python import run_python
from tests.fakes.writer import run_interpreted

# traced at 16 input channels per group (aligned); small tiles keep the interpreter quick
TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, cin, cout, groups):
            super().__init__()
            self.conv = nn.{conv}(cin, cout, 3, stride={stride}, padding=1, groups=groups)

        def forward(self, x):
            return {forward}


    def get_inputs():
        return [torch.randn(2, {cin}, 5, 6)]


    def get_init_inputs():
        return [{cin}, {cout}, {groups}]
    """
)

RELU, SOFTMAX = "torch.relu(self.conv(x))", "torch.softmax(self.conv(x), dim=1)"
# name -> (Conv2d or ConvTranspose2d, stride, forward, BLOCK_K, traced (cin, cout, groups),
# run at [(cin, cout, groups)])
CASES = {
    "conv2d": ("Conv2d", 1, RELU, 16, (16, 16, 1), [(16, 16, 1), (3, 5, 1), (47, 23, 1), (20, 33, 1)]),
    "grouped": ("Conv2d", 1, RELU, 16, (32, 16, 2), [(6, 10, 2), (34, 6, 2)]),
    "transposed": ("ConvTranspose2d", 2, RELU, 16, (16, 16, 1), [(5, 7, 1), (19, 17, 1)]),
    # a softmax over the channels: one tile holds them all (BN from the output channels at run time)
    "softmax": ("Conv2d", 1, SOFTMAX, 32, (16, 16, 1), [(16, 16, 1), (40, 16, 1), (16, 40, 1)]),
}
# (case, run) -> the stage's (BLOCK_M, BLOCK_N, BLOCK_K): never a larger tile than at the traced size (32 x 16,
# K steps of 16 over 16 channels): 48 padded channels take K steps of 16, not 32; 40 output channels (a
# 64-wide whole-channel tile) take 16 pixels per tile, not 32
TILES = {
    ("softmax", (16, 16, 1)): [32, 16, 16],
    ("softmax", (40, 16, 1)): [32, 16, 16],
    ("softmax", (16, 40, 1)): [16, 64, 16],
}

RUNNER = """
import inspect, importlib.util, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

out = []
for case, task_path, program_path, runs in json.loads(open(sys.argv[1]).read()):
    task, program = load(task_path, "task_" + case), load(program_path, "program_" + case)
    kernel = program._kw_stage0
    names = list(inspect.signature(getattr(kernel, "fn", kernel)).parameters)
    launches = []

    class Record:  # the stage kernel as the launcher looks it up: its arguments by name
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launches.append({n: a for n, a in zip(names, args) if type(a) is int})
                launches[-1]["tile"] = [kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")]
                return kernel[grid](*args, **kwargs)
            return launch

    program._kw_stage0 = Record()
    for cin, cout, groups in runs:
        torch.manual_seed(0)
        ref = task.Model(cin, cout, groups)
        new = program.ModelNew(cin, cout, groups)
        new.load_state_dict(ref.state_dict())
        x = torch.randn(2, cin, 4, 5)
        launches.clear()
        want, got = ref(x), new(x)
        packed = [v[1] for v in new.__dict__.get("_kw_cache", {}).values()]
        out.append({
            "case": case, "run": [cin, cout, groups], "launches": list(launches),
            "err": (want - got).abs().max().item(), "scale": want.abs().max().item(),
            "shape": list(got.shape) == list(want.shape),
            "packed": [list(p.shape) for p in packed],
            "tail": max([p[..., cin // groups:].abs().max().item() for p in packed if p.shape[-1] > cin // groups]
                        or [0.0]),
        })
print(json.dumps(out))
"""


def _program(source: str, block_k: int) -> str:
    plan = analyze_conv_task(source).plan
    assert plan is not None
    cfg = default_conv_config("implicit_gemm", plan, "strict").model_copy(
        update={"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": block_k, "LAYOUT": "nhwc"}
    )
    return emit_conv_program(plan, source, design="implicit_gemm", config=cfg)


def test_unaligned_channels_pad_k_to_16_and_match_torch(tmp_path: Path) -> None:
    jobs = []
    for case, (conv, stride, forward, block_k, (cin, cout, groups), runs) in CASES.items():
        source = TASK.format(conv=conv, stride=stride, forward=forward, cin=cin, cout=cout, groups=groups)
        (tmp_path / f"task_{case}.py").write_text(source)
        (tmp_path / f"program_{case}.py").write_text(_program(source, block_k))
        jobs.append([case, str(tmp_path / f"task_{case}.py"), str(tmp_path / f"program_{case}.py"), runs])
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    (tmp_path / "runner.py").write_text(RUNNER)
    # a fork of the parent that has imported torch and Triton (interpreted) once, not a cold `python`
    proc = run_python(
        ["runner.py", "jobs.json"], env=dict(os.environ, TRITON_INTERPRET="1"), timeout=240, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == sum(len(c[-1]) for c in CASES.values())
    assert set(TILES) <= {(r["case"], tuple(r["run"])) for r in rows}
    for r in rows:
        label = (r["case"], r["run"])
        assert r["shape"] and r["err"] <= 1e-4 * max(1.0, r["scale"]), (label, r["err"], r["scale"])
        cin, _, groups = r["run"]
        cin_p = -(-(cin // groups) // 16) * 16
        assert len(r["launches"]) == 1, (label, r["launches"])
        for args in r["launches"]:
            # K walks each group's channels padded to 16; the channels-last copy's rows start 16 apart
            assert args["CIN_G"] == cin_p, (label, args)
            assert all(args[s] % 16 == 0 for s in ("sxn", "sxd", "sxh", "sxw")), (label, args)
            assert TILES.get((r["case"], tuple(r["run"])), args["tile"]) == args["tile"], (label, args)
        # one packed weight, its channels padded, the padding zeros (padded K adds exactly nothing)
        assert len(r["packed"]) == 1 and r["packed"][0][-1] == cin_p, (label, r["packed"])
        assert r["tail"] == 0.0, (label, r["tail"])


COPY = textwrap.dedent(
    """
    import torch, triton, triton.language as tl
    from kernelwright.providers.offline.families.conv.conv_runtime import HOST_HELPERS, NHWC_COPY
    from kernelwright.providers.offline.emit.emit import HELPERS

    ns = {"torch": torch, "triton": triton, "tl": tl}
    exec(compile(HELPERS["_kw_launch"] + HOST_HELPERS + NHWC_COPY, "conv_runtime", "exec"), ns)
    g = torch.Generator().manual_seed(0)
    base = torch.randn(2, 6, 1, 3, 5, generator=g)
    inputs = {  # name -> (input, groups, channels per group in the copy)
        "nchw": (base, 1, 16),
        "grouped": (base, 2, 16),
        "already channels-last": (base.permute(0, 2, 3, 4, 1).contiguous().permute(0, 4, 1, 2, 3), 1, 16),
        "pixels strided": (base[..., ::2], 3, 16),  # not a packed plane: torch's copy
        "aligned": (torch.randn(2, 32, 1, 3, 5, generator=g), 2, 16),
    }
    for name, (x, groups, cp) in inputs.items():
        y = ns["_kw_nhwc"](x, groups, cp)
        n, c, d, h, w = x.shape
        want = torch.zeros(n, d, h, w, groups, cp)
        want[..., : c // groups] = x.permute(0, 2, 3, 4, 1).unflatten(4, (groups, c // groups))
        want = want.flatten(4).permute(0, 4, 1, 2, 3)
        print(name, "|", int(torch.equal(y, want)), int(y.stride() == want.stride()))
    """
)


def test_channels_last_copy_pads_each_group_with_zeros() -> None:
    rows = dict(line.split(" | ") for line in run_interpreted(COPY, timeout=120))
    assert len(rows) == 5, rows
    for name, flags in rows.items():
        assert flags == "1 1", (name, flags)
