"""`kernelwright bench --unseen K`: each task's best kernel judged again at sizes its search never saw.

A tiny task folder (row sums, KernelBench-style size constants) benched on the CPU with a scripted model
served over HTTP on loopback: one task gets a shape-generic kernel, the other the same kernel with the
row count copied from the trace (16, the batch of both sizes the search verifies). The report must say
the first holds at the unseen sizes and the second does not. The choice of sizes is checked on its own.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from kernelwright.bench.unseen import seen_shapes, unseen_sizes
from tests.fakes.chat import fenced
from tests.kernels.test_bench_cli import KW, _env, ledger

TASK = '''"""Row sums of a batch of vectors."""

import torch
import torch.nn as nn

batch_size = 16
dim = 96


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

KERNEL = """# kernelwright: family=reduction design=rows config=BLOCK=32
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows = ROWS
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_sum[(rows,)](x, out, x.shape[1], x.stride(0), BLOCK=32)
        return out
"""


def test_the_unseen_sizes_are_ones_the_search_never_verified():
    seen = seen_shapes(TASK, "rows", "cpu")
    assert [[16, 96]] in seen and [[16, 11]] in seen  # the task's own size and the judge's second one
    sizes, note = unseen_sizes(TASK, "rows", 3, "cpu")
    assert note == "" and len(sizes) == 3
    shapes = [s.input_shapes for s in sizes]
    assert all(s not in seen for s in shapes) and len({str(s) for s in shapes}) == 3
    assert shapes[0][0][0] < 16 < shapes[1][0][0]  # scaled down, then up
    assert all(v % 2 == 1 for v in sizes[0].sizes.values())  # the first one odd
    assert unseen_sizes(TASK, "rows", 0, "cpu") == ([], "")


def test_a_kernel_with_a_traced_size_does_not_hold_and_a_generic_one_does(tmp_path):
    from kernelwright.bench.unseen import judge_unseen
    from kernelwright.nodes.run_context import Context

    path = tmp_path / "rows.py"
    path.write_text(TASK)
    ctx = Context(device="cpu", workers=1, seed=0)
    generic = judge_unseen(str(path), "rows", KERNEL.replace("ROWS", "x.shape[0]"), ctx, 2, None)
    literal = judge_unseen(str(path), "rows", KERNEL.replace("ROWS", "16"), ctx, 2, None)
    assert generic["holds_unseen"] is True and len(generic["unseen"]) == 2
    assert literal["holds_unseen"] is False
    assert [c["correct"] for c in literal["unseen"]] == [False, False]
    assert all(c["error_kind"] for c in literal["unseen"])
    assert generic["unseen_speedup_vs_eager"] is None  # nothing is timed on the CPU


@pytest.mark.slow
@pytest.mark.integration  # starts a scripted model server on loopback
def test_bench_reports_whether_each_best_kernel_holds_at_unseen_sizes(tmp_path):
    from tests.fakes.openai_server import FakeOpenAIServer

    folder = tmp_path / "rows"
    folder.mkdir()
    for name in ("generic", "literal"):
        (folder / f"{name}.py").write_text(TASK)

    def answer(body: dict) -> dict:
        prompt = json.dumps(body)
        rows = "16" if 'name=\\"literal\\"' in prompt else "x.shape[0]"
        return {"content": fenced(KERNEL.replace("ROWS", rows))}

    out = tmp_path / "out"
    with FakeOpenAIServer([], default=answer) as server:
        args = [str(folder), "--model", "fake-coder", "--base-url", server.base_url, "--budget", "1",
                "--device", "cpu", "--memory", "off", "--out", str(out), "--unseen", "2"]  # fmt: skip
        done = subprocess.run(
            [str(KW), "bench", *args], capture_output=True, text=True, timeout=600, env=_env()
        )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["id"]: r for r in ledger(out)}
    generic, literal = rows["rows/generic"], rows["rows/literal"]
    assert generic["correct"] and literal["correct"]  # both pass the search's own two sizes
    assert generic["holds_unseen"] is True and [c["correct"] for c in generic["unseen"]] == [True, True]
    assert literal["holds_unseen"] is False and not any(c["correct"] for c in literal["unseen"])
    assert all(c["sizes"] and c["input_shapes"][0][0] != 16 for c in literal["unseen"])
    assert all(r["unseen_wall_s"] > 0 for r in (generic, literal))  # its time, outside the search's wall_s
    suite = json.loads((out / "suite.json").read_text())
    assert suite["overall"]["unseen_checked"] == 2 and suite["overall"]["holds_unseen_share"] == 0.5
    assert suite["overall"]["repeats_per_100"] == 0.0 and suite["bench"]["settings"]["unseen"] == 2
    md = (out / "suite.md").read_text()
    assert "| rows/generic | holds at 2 unseen size(s) |" in md
    assert "| rows/literal | does not hold (2 of 2:" in md
    assert "1/2 best kernels hold at unseen sizes (50%)" in md
    html = (out / "suite.html").read_text()
    assert "does not hold (2 of 2:" in html and "id='unseen'" in html


def test_unseen_is_checked_and_is_a_setting_resume_does_not_change(tmp_path, capsys):
    from kernelwright.cli.main import main as cli_main

    (tmp_path / "t").mkdir()
    with pytest.raises(SystemExit) as bad:
        cli_main(["bench", str(tmp_path / "t"), "--unseen", "-1", "--out", str(tmp_path / "out")])
    assert bad.value.code == 2 and "--unseen" in capsys.readouterr().err
    assert cli_main(["bench", "--resume", str(tmp_path / "out"), "--unseen", "3"]) == 2
    assert "--resume continues a bench with its own settings" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
