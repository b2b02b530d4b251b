"""The convolution writer's analysis and API, without running kernels (fast).

What the writer plugs in: analyze_conv_task / analyze_conv_model, conv_designs, conv_configs,
conv_neighbours, emit_conv_program, parse_conv_header. Programs are checked with the harness's
static check (never executed here).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelwright.hardware import static_check
from kernelwright.providers.offline.families.conv.conv import (
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
from kernelwright.tasks import bundled_suite_dir

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
    assert set(conv_designs()) == {"implicit_gemm", "implicit_gemm_flatk", "direct_depthwise", "direct"}


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


def test_direct_plane_tiles_are_the_default_and_flat_tiles_stay_in_the_space():
    """direct_depthwise defaults to 2-D plane tiles (nchw, BLOCK_W > 0, one channel; 2048 pixels over 4 warps
    where a norm follows, 2048 x 64 with unmasked interior tiles where nothing does); the flat tiles
    (BLOCK_W=0) of both layouts remain, both ways of RECOMPUTE (storing the convolution's output
    first); neighbours move BLOCK_W."""
    source = (bundled_suite_dir("level2") / "24_conv2d_depthwise_batchnorm_relu6.py").read_text()
    plan = analyze_conv_task(source).plan
    configs = conv_configs("direct_depthwise", plan, "strict")
    first = configs[0]
    assert first.BLOCK_W == 128 and first.BLOCK_N == 1 and first.LAYOUT == "nchw" and not first.RECOMPUTE
    assert len(set(configs)) == len(configs)
    assert all(c.LAYOUT == "nchw" and c.BLOCK_N == 1 for c in configs if c.BLOCK_W)
    for rec in (True, False):
        assert any(c.BLOCK_W == 0 and c.BLOCK_M == 256 and c.BLOCK_N == 4 and c.RECOMPUTE == rec
                   for c in configs)  # fmt: skip
        assert any(c.BLOCK_W == 128 and c.RECOMPUTE == rec for c in configs)
    neighbours = conv_neighbours("direct_depthwise", first, "strict")
    assert {n.BLOCK_W for n in neighbours} >= {0, 64, 128, 256}
    assert all(n.GROUP_M == first.GROUP_M for n in neighbours if n.BLOCK_W)  # plane tiles never read it
    assert all(n.BLOCK_W == 0 for n in neighbours if n.LAYOUT == "nhwc")
    assert (first.BLOCK_M, first.num_warps) == (2048, 4) and not first.INTERIOR
    assert any(n.INTERIOR and n.BLOCK_W == first.BLOCK_W for n in neighbours)  # unmasked interior tiles
    assert any(n.BLOCK_M == 4096 and n.BLOCK_W == 128 for n in neighbours)
    # every other plane tile in the space loads its interior tiles without masks
    assert all(c.INTERIOR == (c.BLOCK_W > 0) for c in configs if c.BLOCK_M != 2048 or c.BLOCK_W != 128
               or c.num_warps != 4)  # fmt: skip
    # with no normalisation after it, a depthwise convolution starts from 2048 x 64 interior-unmasked tiles
    plain = (bundled_suite_dir("published") / "32_conv_depthwise_2d_16x64x512x512.py").read_text()
    plain_configs = conv_configs("direct_depthwise", analyze_conv_task(plain).plan, "strict")
    plain_first = plain_configs[0]
    assert (plain_first.BLOCK_M, plain_first.BLOCK_W, plain_first.num_warps) == (2048, 64, 4)
    assert all(c.INTERIOR == (c.BLOCK_W > 0) for c in plain_configs)
    flat = next(c for c in configs if c.BLOCK_W == 0 and c.LAYOUT == "nchw")
    assert any(n.BLOCK_W == 128 and n.INTERIOR for n in conv_neighbours("direct_depthwise", flat, "strict"))
    text = emit_conv_program(plan, source, config=first)
    assert parse_conv_header(text) == ("direct_depthwise", first) and "tl.program_id(2)" in text


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


def _packed_weight(text: str, w: torch.Tensor, groups: int, nd: int) -> torch.Tensor:
    """The weight exactly as the program packs it: its `_kw_cached(..., lambda t: ...)` expression,
    evaluated on `w` with the program's own helper and sizes (no kernel runs)."""
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("wp = _kw_cached("))
    lam = line[line.index("lambda t:") : line.rindex(")")]
    helpers: dict = {}
    for name in ("_kw_as5d", "_kw_padc"):  # the program's own view and channel-padding helpers
        if f"def {name}(" in text:
            body = text[text.index(f"def {name}(") :]
            exec(body[: min(i for i in (body.find("\n\n\n"), body.find("\n# end")) if i > 0)], helpers)  # noqa: S102
    transposed = "ConvTranspose" in text
    cin_g = w.shape[0] // groups if transposed else w.shape[1]
    oc_g = w.shape[1] if transposed else w.shape[0] // groups
    env = {**helpers, "ND": nd, "groups": groups, "CIN_G": cin_g, "OC_G": oc_g, "CIN_P": -(-cin_g // 16) * 16}
    return eval(lam, env)(w)  # noqa: S307


def _task_src(conv: str, nd: int) -> str:
    shape = ", ".join(["2", "8"] + ["7"] * nd)
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        f"    def __init__(self):\n        super().__init__()\n        self.conv = {conv}\n\n"
        "    def forward(self, x):\n        return torch.relu(self.conv(x))\n\n\n"
        f"def get_inputs():\n    return [torch.randn({shape})]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def test_packed_weight_rows_are_k_contiguous_in_the_kernels_k_order():
    """tl.dot's B tile is read with K (taps x input channels) contiguous: every output channel's row of
    the packed weight holds its taps x channels in the order the kernel walks K (tap-major for
    implicit_gemm and nhwc flat-K, channel-major for nchw flat-K), forward and transposed, grouped."""
    cases = [
        ("nn.Conv2d(8, 6, 3, groups=2)", 2, 2, False),
        ("nn.Conv3d(8, 4, (2, 3, 2), groups=1)", 3, 1, False),
        ("nn.ConvTranspose2d(8, 6, 3, stride=2, groups=2)", 2, 2, True),
    ]
    for conv, nd, groups, transposed in cases:
        src = _task_src(conv, nd)
        plan = analyze_conv_task(src).plan
        assert plan is not None
        for design in ("implicit_gemm", "implicit_gemm_flatk"):
            for layout in ("nchw", "nhwc"):
                cfg = ConvConfig(LAYOUT=layout)
                text = emit_conv_program(plan, src, design=design, config=cfg)
                assert "b = tl.load(wg + j[None, :] * WK + " in text  # B rows of length WK, K fastest
                module = eval(conv, {"nn": nn})  # noqa: S307
                w = module.weight.detach()
                packed = _packed_weight(text, w, groups, nd)
                assert packed.is_contiguous()
                if transposed:  # (Cin, OC_G, taps) -> per group (OC_G, CIN_G, taps)
                    cin_g = w.shape[0] // groups
                    ref = w.reshape(groups, cin_g, w.shape[1], -1).permute(0, 2, 1, 3)
                else:  # (OC, CIN_G, taps) -> per group (OC_G, CIN_G, taps)
                    ref = w.reshape(groups, w.shape[0] // groups, w.shape[1], -1)
                if design == "implicit_gemm" or layout == "nhwc":
                    ref = ref.permute(0, 1, 3, 2)  # k = tap * CIN_G + ic
                rows = ref.shape[0] * ref.shape[1]
                if packed.numel() > ref.numel():  # each tap's channels zero-padded to a multiple of 16
                    padded = packed.reshape(*ref.shape[:-1], -1)
                    assert not padded[..., ref.shape[-1] :].any(), (conv, design, layout)
                    packed = padded[..., : ref.shape[-1]]
                assert torch.equal(packed.reshape(rows, -1), ref.reshape(rows, -1)), (conv, design, layout)


def test_tf32_dots_get_k_slices_of_32_and_k_major_layouts_first():
    """TF32 tensor-core dots (tf32x3, tf32) get no 16-wide K slices on a long reduction (64 channels x 9
    taps here); implicit_gemm lists nhwc (K-major A tile) first for every dot; fp32 FMAs (ieee) keep the
    16-wide tiles."""
    plan = analyze_conv_task((bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text()).plan
    for precision in ("strict", "tf32"):
        for design in ("implicit_gemm", "implicit_gemm_flatk"):
            configs = conv_configs(design, plan, precision)
            assert all(c.BLOCK_K >= 32 for c in configs if c.DOT != "ieee")
            assert len(set(configs)) == len(configs)
        gemm = conv_configs("implicit_gemm", plan, precision)
        assert gemm[0].DOT in ("tf32x3", "tf32") and gemm[0].LAYOUT == "nhwc" and gemm[0].BLOCK_K == 32
        for dot in {c.DOT for c in gemm}:
            assert next(c for c in gemm if c.DOT == dot).LAYOUT == "nhwc"
    ieee = [c for c in conv_configs("implicit_gemm", plan, "strict") if c.DOT == "ieee"]
    assert any(c.BLOCK_K == 16 for c in ieee)


def test_a_short_reduction_starts_from_one_stage_and_16_wide_k_slices():
    """3 input channels x 27 taps = 81: a few K steps, no pipeline (published/36 on an H200: 5.25 ms with
    the long-reduction default, 2.21 ms with this one); a long reduction keeps its pipelined tiles."""
    short = analyze_conv_task(
        (bundled_suite_dir("published") / "36_conv3d_16x3x64x64x64.py").read_text()
    ).plan
    assert conv_designs(short)[:2] == ["direct", "implicit_gemm_flatk"]  # direct measured faster (1.69 ms)
    first = conv_configs("implicit_gemm_flatk", short, "strict")[0]
    assert (first.BLOCK_M, first.BLOCK_N, first.BLOCK_K, first.num_warps, first.num_stages) == (
        64,
        64,
        16,
        4,
        1,
    )
    assert first.DOT == "tf32x3"
    long = analyze_conv_task((bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text()).plan
    assert all(c.num_stages > 1 for c in conv_configs("implicit_gemm_flatk", long, "strict")[:4])


class _NormThenReduce(nn.Module):
    """A convolution, a normalisation and a tail given as a function of the normalised value."""

    def __init__(self, norm: nn.Module, tail, conv: nn.Module | None = None) -> None:
        super().__init__()
        self.conv = conv or nn.Conv2d(3, 6, 3)
        self.norm = norm
        self.scale = nn.Parameter(torch.randn(6, 1, 1))
        self.full = nn.Parameter(torch.randn(6, 5, 5))
        self.tail = tail

    def forward(self, x):
        return self.tail(self, self.norm(self.conv(x)))


def _fold_of(norm: nn.Module, tail, conv: nn.Module | None = None, shape=(2, 3, 7, 7)):
    plan = analyze_conv_model(_NormThenReduce(norm, tail, conv), [torch.randn(*shape)])
    assert plan is not None
    return plan, plan.fold


def test_norm_then_full_spatial_reduction_is_folded():
    """Affine work with per-channel or scalar coefficients and channel sums/means between the norm and
    a sum/mean over every spatial dim fold; the fold names the norm and the reduction."""
    folding = [
        (nn.GroupNorm(3, 6), lambda m, y: y.mean(dim=[1, 2, 3])),
        (nn.GroupNorm(3, 6, affine=False), lambda m, y: (y * m.scale + 1.0).sum(dim=[2, 3])),
        (nn.InstanceNorm2d(6, affine=True), lambda m, y: (-(y / 2.0) - m.scale).mean(dim=[2, 3, 1])),
        (nn.BatchNorm2d(6), lambda m, y: y.sum(dim=1, keepdim=True).mean(dim=[2, 3])),
        (nn.GroupNorm(2, 6), lambda m, y: torch.relu(y.mean(dim=[2, 3]) * 3.0)),  # work after: fine
        (nn.GroupNorm(1, 6), lambda m, y: (y + y * 0.5).mean(dim=[1, 2, 3])),
    ]
    for norm, tail in folding:
        plan, fold = _fold_of(norm, tail)
        assert fold is not None, plan.describe()
        assert plan.ops[fold.norm].kind == "norm" and plan.ops[fold.reduce].kind == "sreduce"
        assert "fold %" in plan.describe()
    plan, fold = _fold_of(
        nn.GroupNorm(2, 4), lambda m, y: y.mean(dim=[1, 2, 3, 4]), nn.Conv3d(3, 4, 2), (2, 3, 4, 5, 6)
    )
    assert fold is not None


def test_norm_with_other_work_before_the_reduction_is_not_folded():
    """Nonlinear work, whole-tensor coefficients, a partial or max reduction, a product of two normalised
    values or a use of the normalised value besides the reduction keep the stored path."""
    keeping = [
        (nn.GroupNorm(3, 6), lambda m, y: torch.relu(y).mean(dim=[1, 2, 3])),
        (nn.GroupNorm(3, 6), lambda m, y: (y * m.full).mean(dim=[1, 2, 3])),
        (nn.GroupNorm(3, 6), lambda m, y: y.mean(dim=[3])),
        (nn.GroupNorm(3, 6), lambda m, y: y.amax(dim=[2, 3])),
        (nn.GroupNorm(3, 6), lambda m, y: (y * y).mean(dim=[1, 2, 3])),
        (nn.GroupNorm(3, 6), lambda m, y: y.amax(dim=1).mean(dim=[1, 2])),
        (nn.GroupNorm(3, 6), lambda m, y: torch.tanh(y)),
    ]
    for norm, tail in keeping:
        plan, fold = _fold_of(norm, tail)
        assert fold is None, plan.describe()


def test_folded_norm_has_no_recompute_variants_and_3d_gets_the_64_tile():
    """A folded norm stores and re-reads nothing: RECOMPUTE has nothing to choose. 3-D convolutions (and
    few input channels) default to 64 x 64 x 32 over 4 warps and 4 stages; 2-D ones with many channels
    keep 128 x 128 x 32 over 8 warps."""
    level2 = bundled_suite_dir("level2")
    plan29 = analyze_conv_task((level2 / "29_conv3d_groupnorm_mean.py").read_text()).plan
    assert plan29 is not None and plan29.fold is not None
    configs = conv_configs("implicit_gemm", plan29, "strict")
    assert not any(c.RECOMPUTE for c in configs)
    first = configs[0]
    assert (first.BLOCK_M, first.BLOCK_N, first.BLOCK_K, first.num_warps, first.num_stages) == (
        64,
        64,
        32,
        4,
        4,
    )
    plan09 = analyze_conv_task((level2 / "09_conv2d_bias_relu.py").read_text()).plan
    first = conv_configs("implicit_gemm", plan09, "strict")[0]
    assert (first.BLOCK_M, first.BLOCK_N, first.BLOCK_K, first.num_warps) == (128, 128, 32, 8)
    plan20 = analyze_conv_task(
        (level2 / "20_conv2d_groupnorm_tanh_hardswish_residual_logsumexp.py").read_text()
    )
    assert plan20.plan is not None and plan20.plan.fold is None
    assert any(c.RECOMPUTE for c in conv_configs("implicit_gemm", plan20.plan, "strict"))
    text = emit_conv_program(plan29, (level2 / "29_conv3d_groupnorm_mean.py").read_text())
    report = static_check(text, "29_conv3d_groupnorm_mean")
    assert report.ok and not report.torch_ops_remaining, report.error
    assert "-> stats_only" in text and "(folded)" in text


def test_program_variant_writes_a_convolution_at_a_chosen_design_and_config():
    """benchmarks/design_sweep.py reaches the conv writer through program_variant: the config is laid over
    the design's default for the task, and a design that does not apply says which do."""
    from kernelwright.providers.offline.choice.variants import program_variant

    source = (bundled_suite_dir("published") / "36_conv3d_16x3x64x64x64.py").read_text()
    answer = program_variant(source, "36", "direct", {"BLOCK_M": 256, "num_warps": 8})
    header = (answer.code or "").splitlines()[0]
    assert "family=conv design=direct config=BLOCK_M=256,BLOCK_N=64," in header and "num_warps=8" in header
    with pytest.raises(ValueError, match="does not apply to 36 .direct, implicit_gemm_flatk, implicit_gemm"):
        program_variant(source, "36", "direct_depthwise")
    # a key the design's config does not have is refused, not dropped (a sweep would time the default)
    with pytest.raises(ValueError, match="conv design 'direct' has no config keys BLOCKM .it has: .*BLOCK_M"):
        program_variant(source, "36", "direct", {"BLOCKM": 256})
    mm = (bundled_suite_dir("level1_bf16") / "16_bmm.py").read_text()
    with pytest.raises(
        ValueError, match="design 'persistent' has no config keys TMA_STORE .it has: .*PER_SM"
    ):
        program_variant(mm, "16", "persistent", {"TMA_STORE": 1, "FLAT": 1})
