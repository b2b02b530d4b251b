"""The offline writer's program for multi-head attention holds at embedding widths other than the traced one.

nn.MultiheadAttention checks its input's width against `embed_dim`, so the trace fixes the width to a number,
and splits the projections into heads with `view(tgt_len, bsz * num_heads, head_dim)`: two sizes of that
view are numbers in the trace (`3*s0` and `8` at width 24 and 3 heads). The program read them as traced and
was right at the traced width only (level3/31_VisionAttention). Now they are read from the module
(`self.attn.num_heads`, `self.attn.head_dim`), and so is the scale 1/sqrt(head_dim). The program is written
once, as a search writes it, and judged by the real harness on CPU at the task's own width and at two
others (`tasks/resize.other_sizes`: widths 48 and 12, with 4 and 6 heads), each at one sample: the batch,
read from the input, still differs from the task's own (2), and the 90 and 63 pixels still span several
tiles, while the six and four samples `other_sizes` gives them took 9 s of the interpreter's time, not 2.
"""

from __future__ import annotations

import ast

from kernelwright.hardware import EvalConfig, WorkerPool
from kernelwright.providers.offline import write_program
from kernelwright.tasks import load_task_source
from kernelwright.tasks.resize import other_sizes, with_sizes
from tests.fakes.writer import writer_prompt

CFG = EvalConfig(device="cpu", time=False, timeout=300, trials=3, second_shape=False)

# level3/31_VisionAttention at small sizes: self-attention over an image's pixels, a residual and a norm.
VISION_ATTENTION = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        B, C, H, W = x.shape
        x = x.view(B, C, H * W).permute(2, 0, 1)
        attn_output, _ = self.attn(x, x, x)
        x = self.norm(attn_output + x)
        return x.permute(1, 2, 0).view(B, C, H, W)


embed_dim = 24
num_heads = 3
batch_size = 2
image_height = 5
image_width = 3


def get_inputs():
    return [torch.rand(batch_size, embed_dim, image_height, image_width)]


def get_init_inputs():
    return [embed_dim, num_heads]
"""


def _write(source: str) -> str:
    answer = write_program(writer_prompt(source))
    assert answer.code is not None, answer.explanation
    return answer.code


def _forward(code: str) -> str:
    tree = ast.parse(code)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    return ast.unparse(next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward"))


def test_the_head_split_reads_the_module() -> None:
    forward = _forward(_write(VISION_ATTENTION))
    assert "self.attn.num_heads" in forward and "self.attn.head_dim" in forward, forward
    assert "self.attn.head_dim ** (-0.5)" in forward, forward  # the scores' scale, 1/sqrt(head_dim)
    assert ", 8)" not in forward and "3 * x.shape" not in forward, forward


def test_the_attention_program_holds_at_other_widths(pool: WorkerPool) -> None:
    code = _write(VISION_ATTENTION)
    sized = [("own width 24, 3 heads", VISION_ATTENTION)]
    sized += [
        (f"{r.description} (batch_size=1 here)", with_sizes(r.source, {"batch_size": 1}))
        for r in other_sizes(VISION_ATTENTION, "t")
    ]
    widths = {src.split("embed_dim = ")[1].split("\n")[0] for _, src in sized}
    assert len(sized) == 3 and len(widths) == 3, [label for label, _ in sized]
    bad = []
    for label, src in sized:
        r = pool.evaluate(load_task_source(src, "t"), code, CFG)
        if not r.correct:
            bad.append(f"at {label}: {r.summary()}\n{(r.error or '')[-600:]}")
    assert not bad, "\n\n".join(bad)
