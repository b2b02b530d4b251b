"""Matmul designs of the offline writer, verified by the real harness (CPU workers, Triton interpreter).

K-major operands (KMAJOR=1: a transpose copy of a row-major B or a transposed A before the launch) with
split-precision tensor-core dots (PREC=tf32x3), fp32 tiles split into bf16 parts (PREC=bf16x6, and
bf16x3 where TF32 is allowed: the judge's fork server makes the interpreter's bf16 dots exact, see
hardware/candidate/interpreter_fixes.py), and the dual kernel for two products sharing A (gate/up), on A @ B,
A.T @ B, bmm, nn.Linear and SwiGLU tasks at small odd shapes.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline import parse_meta, write_program
from kernelwright.providers.offline.choice.variants import design_grid, main_matmul_info, program_variant
from kernelwright.providers.protocol import render_section
from kernelwright.tasks import bundled_suite_dir, load_task, load_task_source

CFG = EvalConfig(device="cpu", time=False, timeout=240, trials=3)


def _kernels(code: str) -> int:
    """How many kernels a program defines (@triton.jit math helpers such as _kw_gelu are not kernels)."""
    return len(re.findall(r"@triton\.jit\ndef k\d+_", code))


def _bundled(level: str, prefix: str):
    return load_task(next(bundled_suite_dir(level).glob(f"{prefix}_*.py")))


def _prompt(source: str, **sections: str) -> str:
    parts = [render_section("request", "Write a faster kernel.", kind="large_step"),
             render_section("task", source, name="t")]  # fmt: skip
    parts += [render_section(tag, body) for tag, body in sections.items()]
    return "\n\n".join(parts)


def _check(pool: WorkerPool, jobs: list[tuple[str, object, str]]) -> None:
    results = [pool.evaluate(task, code, CFG) for _, task, code in jobs]
    bad = [
        f"{label}: {r.summary()}\n{(r.error or '')[-800:]}"
        for (label, _, _), r in zip(jobs, results, strict=True)
        if not r.correct
    ]
    assert not bad, "\n\n".join(bad)


TF32X3_KMAJOR = {"PREC": "tf32x3", "KMAJOR": 1, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}

# A product sharing A with another whose results meet in one chain, on a 3-d input with a bias and a
# non-power-of-two everything; and two products sharing A whose results do NOT meet (two outputs).
DUAL_3D = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.g = nn.Linear(d, h)
        self.u = nn.Linear(d, h, bias=False)

    def forward(self, x):
        return F.gelu(self.g(x)) * self.u(x) + 0.5

def get_inputs():
    return [torch.randn(2, 5, 37)]

def get_init_inputs():
    return [37, 23]
"""

TWO_OUTPUTS = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, w1, w2):
        return x @ w1, torch.relu(x @ w2)

def get_inputs():
    return [torch.randn(9, 19), torch.randn(19, 13), torch.randn(19, 13)]

def get_init_inputs():
    return []
"""


@pytest.mark.slow  # ~25 s on 2 cores; tf32x3 dots stay verified in the default suite (the SwiGLU dual kernel)
def test_kmajor_tf32x3_designs_verify_on_ab_bmm_transposed_and_linear(pool):
    jobs = []
    for level, prefix in (("level1", "14"), ("level1", "17"), ("level2", "06"), ("level2", "01")):
        task = _bundled(level, prefix)
        for design in ("grouped", "persistent", "split_k"):
            cfg = dict(TF32X3_KMAJOR, SPLIT_K=2) if design == "split_k" else TF32X3_KMAJOR
            answer = program_variant(task.source, task.name, design, cfg)
            assert "_kw_kmajor(b)" in answer.code and 'input_precision="tf32x3"' in answer.code
            jobs.append((f"{task.name} [{design}]", task, answer.code))
    _check(pool, jobs)


SMALL_LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(72, 150)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def get_inputs():
    return [torch.randn(37, 72)]


def get_init_inputs():
    return []
"""


def test_a_small_linear_verifies_on_tf32x3_tiles_that_fill_the_sms(pool):
    """The writer's root for a small nn.Linear (kind_matmul.SMALL_KMAJOR_TILE): tf32x3 dots on W.T as it is (no
    copy), 64 x 64 tiles over 37 odd rows, verified at the task's size and the judge's second shape."""
    task = load_task_source(textwrap.dedent(SMALL_LINEAR), "small_linear")
    code = write_program(_prompt(task.source)).code
    meta = parse_meta(code)
    assert meta.design == "grouped" and meta.config["PREC"] == "tf32x3", meta
    tile = tuple(meta.config[k] for k in ("BLOCK_M", "BLOCK_N", "num_warps"))
    assert tile == ("64", "64", "4"), meta
    _check(pool, [("small linear", task, code)])


def test_bf16_split_dots_verify_at_strict_fp32_and_bf16x3_where_tf32_is_allowed(pool):
    """Three designs, three layouts (A @ B, A.T @ B, bmm), K not a multiple of BLOCK_K (ragged last step)."""
    jobs = []
    for (level, prefix), design in ((("level1", "14"), "grouped"), (("level1", "17"), "split_k"),
                                    (("level1", "16"), "persistent")):  # fmt: skip
        task = _bundled(level, prefix)
        cfg = {"PREC": "bf16x6", "KMAJOR": 0, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": 3}
        code = program_variant(task.source, task.name, design, cfg).code
        # six dots per K step, written twice: the unmasked loop and the ragged last step
        assert code.count("tl.dot(") == 12 and "mT.contiguous()" not in code and "acc += part" in code
        jobs.append((f"{task.name} [{design} bf16x6]", task, code))
    _check(pool, jobs)
    task = _bundled("level2", "06")
    code = program_variant(task.source, task.name, "grouped", {"PREC": "bf16x3", "BLOCK_K": 32}).code
    assert code.count("tl.dot(") == 6
    tf32 = EvalConfig(device="cpu", time=False, timeout=240, trials=3, precision="tf32")
    res = pool.evaluate(task, code, tf32)
    assert res.correct, res.error


@pytest.mark.slow  # ~12 s under the interpreter; the dual design's program text is checked by the tests above
def test_dual_kernel_verifies_on_swiglu_and_a_3d_biased_gate(pool):
    swiglu = _bundled("level2", "12")
    dual3d = load_task_source(textwrap.dedent(DUAL_3D), "dual_3d")
    jobs = []
    for task in (swiglu, dual3d):
        info = main_matmul_info(task.source, task.name)
        assert info.dual, task.name
        root = write_program(_prompt(task.source)).code
        assert parse_meta(root).design not in ("dual", "dual_persistent") and _kernels(root) == 2
        # the root starts unfused; a large step from it writes the dual kernel
        answer = write_program(_prompt(task.source, parent=root))
        meta = parse_meta(answer.code)
        # Strict fp32: 3xTF32 tensor-core dots for the large SwiGLU, IEEE dots for the tiny product.
        want = "tf32x3" if task is swiglu else "ieee"
        assert meta.design == "dual" and meta.config["PREC"] == want, answer.explanation
        assert _kernels(answer.code) == 1 and answer.code.count("tl.dot(") == 4
        jobs.append((f"{task.name} [default]", task, answer.code))
        for design, cfg in (("dual", {"PREC": "bf16x6", "KMAJOR": 0, "BLOCK_N": 32}),
                            ("dual_persistent", {"BLOCK_M": 16, "BLOCK_N": 16, "FLAT": 1}),
                            ("dual", {"PREC": "ieee", "KMAJOR": 0, "BLOCK_N": 32})):  # fmt: skip
            code = program_variant(task.source, task.name, design, cfg).code
            assert ("flatten=True" in code) == bool(cfg.get("FLAT"))  # one (tile, K) loop for the pipeliner
            jobs.append((f"{task.name} [{design} {cfg}]", task, code))
        unfused = program_variant(task.source, task.name, "grouped", TF32X3_KMAJOR, fuse=False).code
        assert unfused.count("tl.dot(") == 4 and "c_ptr" not in unfused
        jobs.append((f"{task.name} [unfused]", task, unfused))
    _check(pool, jobs)


def test_products_that_do_not_meet_stay_two_kernels(pool):
    task = load_task_source(textwrap.dedent(TWO_OUTPUTS), "two_outputs")
    assert not main_matmul_info(task.source, task.name).dual
    code = write_program(_prompt(task.source)).code
    assert "c_ptr" not in code and _kernels(code) == 2
    _check(pool, [("two outputs", task, code)])


def test_a_rule_against_dual_designs_writes_two_kernels():
    source = _bundled("level2", "12").source
    code = write_program(
        _prompt(
            source, rules="- You cannot use design=dual here\n- You cannot use design=dual_persistent here"
        )
    ).code
    assert parse_meta(code).design in ("grouped", "split_k", "persistent")
    assert _kernels(code) == 2


def test_sweep_grid_is_small_and_every_entry_emits():
    for level, prefix in (
        ("level1", "14"),
        ("level1", "15"),
        ("level2", "06"),
        ("level2", "12"),
        ("level2", "01"),
    ):
        task = _bundled(level, prefix)
        grid = design_grid(task.source, task.name)
        assert 8 <= len(grid) <= 20, (task.name, len(grid))
        labels = [v.label() for v in grid]
        assert len(set(labels)) == len(labels)
        for v in grid:
            code = program_variant(task.source, task.name, v.design, v.config, fuse=v.fuse).code
            assert code and 'tf32"' not in code  # strict: never a plain TF32 dot


@pytest.mark.slow
def test_sweep_script_runs_on_cpu_and_writes_json_and_markdown(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "design_sweep.py"), "--device", "cpu", "--out", str(tmp_path),
         "--tasks", "level1/14,level2/12"],
        capture_output=True, text=True, timeout=600, cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads((tmp_path / "design_sweep.json").read_text())
    assert [t["task"] for t in report["tasks"]] == ["14_matmul_square", "12_linear_swiglu"]
    for t in report["tasks"]:
        assert len(t["candidates"]) == 2 and all(c["correct"] for c in t["candidates"]), t
    assert report["tasks"][1]["candidates"][0]["design"] == "dual"
    md = (tmp_path / "design_sweep.md").read_text()
    assert "| task | design | config | correct | ms | vs compile |" in md and "12_linear_swiglu" in md
