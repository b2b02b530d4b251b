"""The offline writer as a chat model: answer format, usage, determinism, and what it does with tasks it
cannot write. Programs are generated here but not run (tests/kernels/test_offline_kernels.py runs them)."""

from __future__ import annotations

import ast

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from kernelwright.hardware import static_check
from kernelwright.providers.offline import OfflineKernelWriter, parse_meta, write_program
from kernelwright.providers.protocol import extract_code
from kernelwright.tasks import bundled_suite_dir
from tests.fakes.writer import writer_prompt as _prompt


def _src(level: str, name: str) -> str:
    return (bundled_suite_dir(level) / name).read_text()  # type: ignore[arg-type]


def test_answer_is_one_python_block_with_a_header_and_an_explanation():
    model = OfflineKernelWriter()
    assert model._llm_type == "kernelwright-offline"
    msg = model.invoke(
        [SystemMessage("You write Triton."), HumanMessage(_prompt(_src("level2", "04_layernorm_gelu.py")))]
    )
    text = str(msg.content)
    assert text.count("```python") == 1 and text.rstrip().endswith("```")
    explanation = text.split("```python")[0].strip()
    assert explanation and "\n" not in explanation
    code = extract_code(text)
    assert code is not None and code.startswith("# kernelwright: family=norm design=")
    tree = ast.parse(code)
    model_new = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    init = next(n for n in model_new.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert [a.arg for a in init.args.args] == ["self", "normalized_dim"]  # the task's constructor
    report = static_check(code, "t")
    assert report.ok, report.error
    # Token usage is reported (estimated as characters / 4) so the cost ledger can count it.
    assert msg.usage_metadata["output_tokens"] == -(-len(text) // 4)
    assert msg.usage_metadata["input_tokens"] > 0
    assert msg.response_metadata["token_usage_estimated"] == "characters / 4"
    meta = parse_meta(code)
    assert meta is not None and meta.design == msg.response_metadata["design"]


def test_same_prompt_and_seed_give_the_same_program():
    source = _src("level1", "19_cumsum.py")
    first = write_program(_prompt(source), seed=7)
    parent = first.code
    p = _prompt(source, "small_step", parent=parent)
    a, b = write_program(p, seed=7), write_program(p, seed=7)
    assert a.code == b.code and a.code != parent
    # Other seeds may move another knob; the program stays a small step of the same design.
    others = {write_program(p, seed=s).code for s in range(6)}
    assert len(others) > 1
    assert all(parse_meta(c).design == parse_meta(parent).design for c in others)


def test_untraceable_or_unwritable_tasks_get_a_reason_and_no_code():
    bad = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x[x > 0].sum().item()\n"
    bad += "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n"
    ans = write_program(_prompt(bad))
    assert ans.code is None and ans.explanation.startswith("The offline writer cannot write this task")
    conv_only = (
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.conv = nn.Conv2d(3, 8, 3)\n"
        "    def forward(self, x):\n        return self.conv(x)\n"
        "def get_inputs():\n    return [torch.randn(2, 3, 16, 16)]\ndef get_init_inputs():\n    return []\n"
    )
    from kernelwright.providers.offline import plugins

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plugins, "TASK_WRITERS", ())  # the generic path alone leaves a lone convolution to torch
        ans = write_program(_prompt(conv_only))
        assert ans.code is None and "conv" in ans.explanation
    assert write_program('<request kind="large_step">\nhi\n</request>').code is None


def test_constructor_constants_are_read_from_the_module():
    # scaling_factor differs between get_init_inputs() and get_small_init_inputs(): it must not be baked in.
    code = write_program(_prompt(_src("level2", "28_convtranspose2d_bias_clamp_scale_clamp_divide.py"))).code
    assert code is not None and "self.scaling_factor" in code


def test_target_allowing_tf32_unlocks_tf32_matmuls_only_then():
    source = _src("level1", "14_matmul_square.py")
    strict = write_program(_prompt(source))
    allowed = write_program(_prompt(source, target="name: NVIDIA H200\nprecision: tf32"))
    assert parse_meta(strict.code).config["PREC"] in ("ieee", "tf32x3", "bf16x6")  # strict: never plain TF32
    assert parse_meta(allowed.code).config["PREC"] == "tf32"
    assert 'input_precision="tf32"' not in strict.code and 'input_precision="tf32"' in allowed.code


_SEEN: list = []


def _fake_conv_writer(source, name, ctx):
    from kernelwright.providers.offline import WriterAnswer

    _SEEN.append((name, ctx.kind, [r.pairs for r in ctx.rules]))
    if "Conv2d" not in source:
        return None
    return WriterAnswer(
        "# kernelwright: family=conv design=implicit_gemm config=BLOCK_CO=64\n", "conv program"
    )


def test_a_listed_task_writer_is_asked_first_and_gets_the_context(monkeypatch):
    from kernelwright.providers.offline import plugins

    listed = dict(plugins.TASK_WRITERS)
    listed["conv"] = f"{__name__}:_fake_conv_writer"
    monkeypatch.setattr(plugins, "TASK_WRITERS", tuple(listed.items()))
    conv = _src("level2", "09_conv2d_bias_relu.py")
    ans = write_program(
        _prompt(conv, "small_step", rules="- You cannot use BLOCK_CO=128 with design=implicit_gemm")
    )
    assert ans.explanation == "conv program" and parse_meta(ans.code).design == "implicit_gemm"
    assert _SEEN[-1][1] == "small_step" and _SEEN[-1][2] == [{"BLOCK_CO": "128"}]
    other = write_program(_prompt(_src("level1", "01_relu.py")))  # not claimed: the built-in writer answers
    assert parse_meta(other.code).family == "pointwise"


def test_families_list_every_handler_kind_and_task_writer_once():
    from kernelwright.providers.offline import plugins
    from kernelwright.providers.offline.frontend import lowering_rows
    from kernelwright.providers.offline.frontend.lowering import HandlerTable

    handlers = plugins.lowering_handlers()
    assert sum(len(t) for t in plugins.LOWERINGS) == len(handlers)  # no op claimed twice
    assert handlers["softmax"] is lowering_rows.HANDLERS["softmax"]
    assert list(plugins.KINDS) == ["rows", "pointwise", "matmul"]
    assert [f for f, _ in plugins.task_writers()] == ["conv", "pool"]
    table = HandlerTable()
    table.handles("relu")(lambda lo, a: None)
    with pytest.raises(ValueError, match="'relu' has two lowering handlers"):
        table.handles("relu")(lambda lo, a: None)


FFT_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x, dim=-1).abs()


def get_inputs():
    return [torch.randn(4, 30)]


def get_init_inputs():
    return []
"""


def test_complex_tensors_are_left_to_torch_and_a_task_of_nothing_else_is_unsupported():
    """Triton has no complex type: an FFT and the abs of its complex result are torch calls, so the writer
    says at once that it cannot write the task (no program built on a complex64 kernel that fails)."""
    from kernelwright.providers.offline.writer import write_program
    from tests.fakes.writer import writer_prompt

    answer = write_program(writer_prompt(FFT_TASK))
    assert answer.code is None
    assert answer.unsupported is not None and "fft_rfft" in answer.unsupported and "abs" in answer.unsupported


def test_a_large_step_from_a_bf16_bmm_reaches_split_k_last():
    """A bf16 bmm of many output tiles starts with the persistent walk; its next large step is the grouped
    tiles, not split-K (which ran 2.5-6x the best in every bf16 bench on an H200), and split-K comes after the
    others."""
    source = _src("level1_bf16", "16_bmm.py")
    root = write_program(_prompt(source))
    assert parse_meta(root.code).design == "persistent"
    step = write_program(_prompt(source, parent=root.code))
    assert parse_meta(step.code).design == "grouped"
    tried = "\n".join(f"# kernelwright: family=matmul design={d}" for d in ("grouped", "persistent"))
    last = write_program(_prompt(source, parent=step.code, tried=tried))
    assert parse_meta(last.code).design == "split_k"
