"""An fp32 upcast of a half-precision value, written between two kernels, is stored in the half dtype.

`relu(layer_norm(linear(x)))` in bf16 traces to the product rounded to bf16, then a cast to fp32 for the norm's
statistics. The kernel boundary falls after the cast, so the product's kernel used to write the fp32 upcast
(8192 x 4096 x 4 bytes for level2_bf16/11) and the norm read it back. The upcast holds the bf16 values
exactly, so it is now written as bf16 and widened on load (providers/offline/choice/schedule.Schedule.stored): half
the bytes between the two kernels, the same numbers. What a torch call, a matmul or the caller reads keeps
its dtype.
"""

from __future__ import annotations

import textwrap

import torch

from kernelwright.hardware import EvalConfig
from kernelwright.providers.offline import write_program
from kernelwright.providers.offline.choice.schedule import schedule
from kernelwright.providers.offline.frontend.analysis import analyze_cached
from kernelwright.tasks import bundled_suite_dir, load_task, load_task_source
from kernelwright.tasks.variant import dtype_variant
from tests.fakes.writer import writer_prompt

# Fixed input seeds (a replay, EvalConfig.input_seeds): the judge draws fresh ones per job, and these fp16 and
# bf16 programs sit near their tolerance, so a test of what the writer emits judges them on known inputs.
SEEDS = {label: [11, 12, 13] for label in ("full", "small", "derived", "sliced")} | {
    "recheck": [14],
    "parameters": [15],
}
CFG = EvalConfig(device="cpu", time=False, timeout=240, trials=3, input_seeds=SEEDS)

# The same upcast, returned to the caller: it must stay fp32.
RETURNED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 48).to(torch.bfloat16)

    def forward(self, x: torch.Tensor):
        y = self.linear(x).float()
        return y, torch.softmax(y, dim=-1)


def get_inputs():
    return [torch.randn(8, 64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def _root(source: str) -> str:
    return write_program(writer_prompt(source)).code


def _stored(source: str, name: str) -> dict[int, torch.dtype]:
    return schedule(analyze_cached(source, name).graph).stored


def test_the_linears_bf16_output_is_written_as_bf16_for_the_norm_and_verifies(pool):
    task = load_task(bundled_suite_dir("level2_bf16") / "11_linear_layernorm_relu.py")
    assert list(_stored(task.source, task.name).values()) == [torch.bfloat16]
    code = _root(task.source)
    assert "dtype=torch.float32)" not in code  # no fp32 buffer between the product and the norm
    assert code.count("dtype=torch.bfloat16)") == 2  # the product's output and the norm's
    fp32 = (bundled_suite_dir("level2") / "11_linear_layernorm_relu.py").read_text()
    fp16 = load_task_source(dtype_variant(fp32, "float16"), "linear_layernorm_relu_fp16")
    assert list(_stored(fp16.source, fp16.name).values()) == [torch.float16]
    for t in (task, fp16):
        res = pool.evaluate(t, _root(t.source), CFG)
        assert res.correct, f"{t.name}: {res.summary()}\n{res.error}"


def test_an_upcast_the_caller_receives_keeps_its_dtype(pool):
    task = load_task_source(textwrap.dedent(RETURNED), "returned_upcast")
    assert _stored(task.source, task.name) == {}
    res = pool.evaluate(task, _root(task.source), CFG)
    assert res.correct, f"{res.summary()}\n{res.error}"
