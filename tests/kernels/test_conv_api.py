"""The convolution writer's analysis and API, without running kernels (fast).

What the writer plugs in: analyze_conv_task / analyze_conv_model, conv_designs, conv_configs,
conv_neighbours, emit_conv_program, parse_conv_header. Programs are checked with the harness's
static check (never executed here).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from hardware import static_check
from providers.offline.conv import (
    ConvConfig,
    ConvEmitError,
    analyze_conv_model,
    analyze_conv_task,
    conv_configs,
    conv_designs,
    conv_neighbours,
    emit_conv_program,
    explain_conv_model,
    parse_conv_header,
    write_conv_program,
)
from tasks import bundled_suite_dir

CONV_TASKS = [p for p in sorted(bundled_suite_dir("level2").glob("*.py")) if "conv" in p.name]


class _TwoConvs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3)
        self.b = nn.Conv2d(4, 4, 3)

    def forward(self, x):
        return self.b(self.a(x))


class _PreOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x * 2)


class _Permute(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x).permute(0, 2, 3, 1)


class _Dropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(self.conv(x))


class _MinTanhTanh(nn.Module):
    """KernelBench level-2 style: Conv2d, min over channels (keepdim), tanh, tanh."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, dim=1, keepdim=True)[0]
        x = torch.tanh(x)
        return torch.tanh(x)


class _LiftedConstant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose2d(3, 4, 3, stride=2)

    def forward(self, x):
        return torch.min(self.conv(x), torch.tensor(0.25))


def test_a_tensor_made_in_the_forward_becomes_a_number():
    model = _LiftedConstant()
    plan = analyze_conv_model(model, [torch.randn(2, 3, 5, 5)])
    assert plan is not None
    assert [c.value for op in plan.ops for c in op.consts] == [0.25]
    assert not plan.operands[1:]  # only the convolution's bias is read from the model
    assert not [k for k in vars(model) if "constant" in k]  # the tracer's attribute is gone again


def test_unsupported_models_say_why():
    x = torch.randn(2, 3, 8, 8)
    for model, words in (
        (_TwoConvs(), "more than one convolution"),
        (_PreOp(), "not a forward argument"),
        (_Permute(), "permute"),
        (_Dropout(), "dropout"),
        (nn.Sequential(nn.ReLU()), "no convolution"),
    ):
        analysis = explain_conv_model(model, [x])
        assert analysis.plan is None
        assert words in analysis.reason, analysis.reason
        assert analyze_conv_model(model, [x]) is None


def test_dropout_in_eval_mode_is_an_identity():
    model = _Dropout().eval()
    plan = analyze_conv_model(model, [torch.randn(2, 3, 8, 8)])
    assert plan is not None
    assert [op.kind for op in plan.ops] == ["conv", "operand", "binary"]


def test_unseen_model_plan():
    plan = analyze_conv_model(_MinTanhTanh(3, 5, 3), [torch.randn(2, 3, 9, 9)])
    assert plan is not None
    kinds = [(op.kind, op.attrs.get("fn")) for op in plan.ops]
    assert ("creduce", "min") in kinds
    assert kinds[-2:] == [("unary", "tanh"), ("unary", "tanh")]
    assert plan.out_groups == [[0], [1], [3], [4]]
    assert plan.ops[plan.output].cred


def test_model_is_left_unchanged():
    model = _Scaled(0.5)
    plan = analyze_conv_model(model, [torch.randn(2, 3, 8, 8)])
    assert plan is not None
    assert type(model.scale) is float and model.scale == 0.5
    consts = [c.expr for op in plan.ops for c in op.consts]
    assert "self.scale" in consts  # the attribute, not the number: right for any constructor argument


class _Scaled(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.scale = scale

    def forward(self, x):
        return F.relu(self.conv(x)) * self.scale


def test_every_bundled_conv_task_is_supported_and_sized_at_full_size():
    assert len(CONV_TASKS) >= 10
    for path in CONV_TASKS:
        analysis = analyze_conv_task(path.read_text())
        assert analysis.plan is not None, f"{path.name}: {analysis.reason}"
        full = analysis.plan.full_spec
        assert full is not None and full.in_channels >= analysis.plan.spec.in_channels


def test_designs_follow_the_channels_per_group():
    depthwise = analyze_conv_task(
        (bundled_suite_dir("level2") / "24_conv2d_depthwise_batchnorm_relu6.py").read_text()
    )
    assert conv_designs(depthwise.plan)[0] == "direct_depthwise"
    wide = analyze_conv_task((bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text())
    assert conv_designs(wide.plan)[0] == "implicit_gemm"
    assert "direct_depthwise" not in conv_designs(wide.plan)
    assert set(conv_designs()) == {"implicit_gemm", "implicit_gemm_flatk", "direct_depthwise"}


def test_configs_respect_precision():
    strict = conv_configs("implicit_gemm", None, "strict")
    assert strict and all(c.DOT in ("tf32x3", "ieee") for c in strict)
    assert strict[0].DOT == "tf32x3"
    tf32 = conv_configs("implicit_gemm", None, "tf32")
    assert tf32[0].DOT == "tf32"
    plan = analyze_conv_task((bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text()).plan
    with_plan = conv_configs("implicit_gemm", plan, "strict")
    assert with_plan[0].BLOCK_N == 128  # 128 output channels at full size


def test_neighbours_change_one_knob():
    base = ConvConfig()
    neighbours = conv_neighbours("implicit_gemm", base, "strict")
    assert len(neighbours) >= 8
    for n in neighbours:
        changed = [k for k, v in n.model_dump().items() if v != base.model_dump()[k]]
        assert len(changed) == 1, changed
        assert n.DOT != "tf32"
    assert any(n.LAYOUT == "nhwc" for n in neighbours)
    assert any(n.DOT == "tf32" for n in conv_neighbours("implicit_gemm", base, "tf32"))


def test_programs_pass_the_static_check_and_carry_their_header():
    for path in CONV_TASKS:
        source = path.read_text()
        plan = analyze_conv_task(source).plan
        for design in conv_designs(plan):
            config = conv_configs(design, plan, "strict")[1]
            text = emit_conv_program(plan, source, design=design, config=config)
            assert text.startswith(f"# kernelwright: family=conv design={design} config=")
            assert parse_conv_header(text) == (design, config)
            report = static_check(text, path.stem)
            assert report.ok, f"{path.name} {design}: {report.error}"
            assert not report.torch_ops_remaining, report.torch_ops_remaining
            assert "class Model(" not in text and "ModelNew" in text


def test_constructor_scalars_are_read_at_run_time():
    source = (
        bundled_suite_dir("level2") / "25_conv2d_grouped_stride2_instancenorm_leakyrelu_sum.py"
    ).read_text()
    text = write_conv_program(source)
    assert text is not None
    assert "float(self.negative_slope)" in text
    assert "self.conv.stride" in text and "self.norm.eps" in text


def test_tf32_is_refused_under_strict_precision():
    plan = analyze_conv_task((bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text()).plan
    source = (bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text()
    try:
        emit_conv_program(
            plan, source, design="implicit_gemm", config=ConvConfig(DOT="tf32"), precision="strict"
        )
    except ConvEmitError as exc:
        assert "tf32" in str(exc)
    else:
        raise AssertionError("dot=tf32 was accepted under strict precision")
    text = emit_conv_program(
        plan, source, design="implicit_gemm", config=ConvConfig(DOT="tf32"), precision="tf32"
    )
    assert 'input_precision="tf32"' in text
