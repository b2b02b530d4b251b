"""Tensor-descriptor (TMA) matmuls of the offline writer, run under Triton's interpreter.

fp16/bf16 products get a twin kernel that reads A and B through host-built tensor descriptors; the
launcher picks it when both operands have a unit stride and 16-byte aligned strides, and the pointer
kernel otherwise. The programs here run in one subprocess (tests.fakes.writer.run_beside_model) that
records which twin launched and compares with the task's Model at fp16 (that subprocess is not the judge,
whose fork server corrects the interpreter's bf16 dot; the GPU test covers bf16).
"""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.providers.offline import parse_meta, write_program
from kernelwright.providers.offline.choice.variants import program_variant
from tests.fakes.writer import run_beside_model, writer_prompt

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

ALIGNED = LINEAR.format(M=40, K=72, N=24)  # 72 and 24 halves: 144- and 48-byte strides, aligned
MISALIGNED = LINEAR.format(M=7, K=93, N=24)  # 93 halves: a 186-byte row stride, which TMA cannot take
PLAIN_BMM = BMM.replace(" + 1.0", "")  # nothing fused after the product: the ping-pong kernel applies
BROADCAST = BMM.replace("torch.bmm(a, b.transpose(1, 2))", "torch.matmul(a[0], b.transpose(1, 2))")


def _variant(source: str, design: str, config: dict) -> str:
    return program_variant(textwrap.dedent(source), "t", design, config).code


def _programs() -> dict[str, tuple[str, str]]:
    """The programs under test: name -> (task source, program)."""
    return {
        "linear": (ALIGNED, write_program(writer_prompt(ALIGNED)).code),
        "misaligned": (MISALIGNED, write_program(writer_prompt(MISALIGNED)).code),
        "aligned_copy": (MISALIGNED, _variant(MISALIGNED, "grouped", {"TMA": 1, "ALIGN": 1})),
        "transposed_a_grouped": (TRANSPOSED_A, _variant(TRANSPOSED_A, "grouped", {"TMA": 1})),
        "transposed_a_persistent": (TRANSPOSED_A, _variant(TRANSPOSED_A, "persistent", {"TMA": 1})),
        "bmm": (BMM, write_program(writer_prompt(BMM)).code),
        "plain_bmm_ws": (PLAIN_BMM, _variant(PLAIN_BMM, "persistent", {"TMA": 1, "FLAT": 1, "WS": 5})),
        "broadcast_batch": (BROADCAST, write_program(writer_prompt(BROADCAST)).code),
        "dual": (SWIGLU, _variant(SWIGLU, "dual", {"TMA": 1})),
        # 18 tiles of 16 x 16 over the interpreter's 2 x 4 programs: each walks two or three of them
        "two_per_sm": (
            BMM,
            _variant(
                BMM,
                "persistent",
                {
                    "TMA": 1,
                    "FLAT": 1,
                    "PER_SM": 2,
                    "BLOCK_M": 16,
                    "BLOCK_N": 16,
                    "BLOCK_K": 16,
                    "num_warps": 4,
                },
            ),
        ),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[str, list[str]]]:
    """name -> (program, which twin launched per launch: "tma" or "pointer"), each checked against Model."""
    programs = _programs()
    launches = run_beside_model(tmp_path_factory.mktemp("tma"), programs, kernels=r"k\d+_matmul")
    twins = {
        name: sorted("tma" if k.endswith("_tma") else "pointer" for k, *_ in seen)
        for name, seen in launches.items()
    }
    return {name: (programs[name][1], twins[name]) for name in programs}


def test_a_half_linear_reads_its_weight_through_descriptors(runs):
    code, launched = runs["linear"]
    assert parse_meta(code).config.get("TMA") == "1" and "_kw_tma(" in code
    assert launched == ["tma"]


def test_a_misaligned_stride_falls_back_to_the_pointer_kernel(runs):
    code, launched = runs["misaligned"]
    assert "_kw_tma(" in code and launched == ["pointer"]


def test_align_copies_a_misaligned_operand_so_the_descriptors_can_read_it(runs):
    code, launched = runs["aligned_copy"]
    assert "_kw_align(" in code and launched == ["tma"]


@pytest.mark.parametrize("design", ["grouped", "persistent"])
def test_a_transposed_a_and_a_persistent_walk_use_the_descriptors(runs, design):
    assert runs[f"transposed_a_{design}"][1] == ["tma"]


def test_a_bmm_reads_3d_descriptors_and_a_broadcast_batch_keeps_pointers(runs):
    code, launched = runs["bmm"]
    assert parse_meta(code).config.get("TMA") == "1" and "_kw_tma(" in code and launched == ["tma"]
    # one A for every batch of B (A broadcast along the batch): no twin, and no TMA knob to search
    code, launched = runs["broadcast_batch"]
    assert "_kw_tma(" not in code and "TMA" not in parse_meta(code).config and launched == ["pointer"]


def test_the_dual_kernel_reads_both_weights_through_descriptors(runs):
    code, launched = runs["dual"]
    assert code.count("tl.dot(") == 6  # two products: the pointer kernel's loop and ragged step, its twin
    assert launched == ["tma"]


def test_tma_zero_writes_no_twin():
    assert "_tma" not in _variant(ALIGNED, "grouped", {"TMA": 0})


def test_two_programs_per_sm_walk_every_tile_of_a_bmm(runs):
    """PER_SM=2: twice the programs (the interpreter's device counts as 4 SMs), each walking its share of
    the batch's tiles through the descriptors, checked against Model."""
    code, launched = runs["two_per_sm"]
    assert "NUM_PROGS = max(1, min(tiles, 2 * _num_sms(a.device)))" in code
    assert launched == ["tma"]
    assert "2 * _num_sms" not in _variant(BMM, "persistent", {"TMA": 1, "FLAT": 1, "PER_SM": 1})  # as before


def test_a_ping_pong_program_runs_its_triton_twin_in_the_interpreter(runs):
    """WS=5 adds Hopper's Gluon GEMM (ping-pong), tried first by the launcher; the interpreter (CPU) cannot
    run Gluon, so the same program takes its descriptor twin there, checked against Model. WS_COOP=1 passes
    the cooperative schedule to the same launch."""
    code, launched = runs["plain_bmm_ws"]
    assert (
        "_kw_ws_gemm(a, sa, b, sb, out0, M, N, K, NB, 8, 5, 0)" in code and "def _kw_ws_gemm_kernel(" in code
    )
    assert launched == ["tma"]
    assert "_kw_ws_gemm" not in runs["bmm"][0]  # an epilogue after the product (+ 1.0): no Gluon kernel
    coop = _variant(PLAIN_BMM, "persistent", {"TMA": 1, "FLAT": 1, "WS": 3, "WS_COOP": 1})
    assert "_kw_ws_gemm(a, sa, b, sb, out0, M, N, K, NB, 8, 3, 1)" in coop


def test_the_gluon_gemm_reads_operands_it_can_tile_and_declines_the_rest(tmp_path):
    """`_kw_ws_view`: one 2-D descriptor over a batch of matrices where no tile straddles two of them, column-
    major operands through their transposes, 16-byte aligned rows only; `_kw_ws_gemm` launches nothing (and
    says so) off an sm_90 GPU."""
    import importlib.util

    import torch

    from kernelwright.providers.offline.emit.emit import HELPERS

    path = tmp_path / "ws_helper.py"  # a file: Gluon's jit reads its kernels' source
    path.write_text("import torch\nimport triton\n" + HELPERS["_kw_ws_gemm"])
    spec = importlib.util.spec_from_file_location("ws_helper", path)
    assert spec is not None and spec.loader is not None
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    view = helper._kw_ws_view
    assert view([1024, 1], 200, 1024, 1, 128, 64, 2) == ([200, 1024], [1024, 1], [128, 64], False)
    assert view([1, 200], 200, 1024, 1, 128, 64, 2) == ([1024, 200], [200, 1], [64, 128], True)
    assert view([2048 * 1024, 1024, 1], 2048, 1024, 32, 128, 64, 2) == (
        [32 * 2048, 1024], [1024, 1], [128, 64], False)  # fmt: skip
    assert view([100 * 128, 128, 1], 100, 128, 2, 128, 64, 2) is None  # a tile would straddle two matrices
    assert view([1, 130], 130, 70, 1, 128, 64, 2) is None  # rows 260 bytes apart: not 16-byte aligned
    assert view([64, 2], 32, 32, 1, 128, 64, 2) is None  # neither stride is 1
    a = torch.randn(256, 128, dtype=torch.bfloat16)
    b = torch.randn(128, 128, dtype=torch.bfloat16)
    out = torch.empty(256, 128, dtype=torch.bfloat16)
    for stages, coop in ((5, 0), (3, 1)):
        assert helper._kw_ws_gemm(a, [128, 1], b, [128, 1], out, 256, 128, 128, 1, 8, stages, coop) is False
    helper._kw_ws_device = lambda t: (
        True
    )  # as on an sm_90 GPU: an empty product still goes to the Triton kernels
    empty = torch.empty(256, 0, dtype=torch.bfloat16)
    assert helper._kw_ws_gemm(empty, [0, 1], b[:0], [128, 1], out, 256, 128, 0, 1, 8, 5, 0) is False
