"""The conv family behind the offline writer's plug-in point: steps, rules and experience (no kernels run)."""

from __future__ import annotations

import random

from kernelwright.providers.offline.choice.context import WriterContext, parse_cases, parse_rules
from kernelwright.providers.offline.families.conv.conv import parse_conv_header
from kernelwright.providers.offline.families.conv.conv_writer import config_from_pairs, conv_task_writer
from kernelwright.providers.protocol import KernelHeader
from kernelwright.tasks import bundled_suite_dir

LEVEL2 = bundled_suite_dir("level2")
TASK = (LEVEL2 / "09_conv2d_bias_relu.py").read_text()
KEYS = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"}


def _ctx(**kw) -> WriterContext:
    kw.setdefault("rng", random.Random(0))
    return WriterContext(**kw)


def _header(answer) -> tuple[str, dict]:
    assert answer is not None and answer.code is not None, answer and answer.explanation
    parsed = parse_conv_header(answer.code)
    assert parsed is not None
    assert answer.meta.family == "conv" and answer.meta.design == parsed[0]
    return parsed[0], parsed[1].model_dump()


def test_passes_on_tasks_that_are_not_convolutions():
    source = (LEVEL2 / "01_linear_bias_relu.py").read_text()
    assert conv_task_writer(source, "01_linear_bias_relu", _ctx()) is None


def test_first_answer_is_the_preferred_design_in_strict_precision():
    design, config = _header(conv_task_writer(TASK, "09", _ctx()))
    assert design == "implicit_gemm" and config["DOT"] == "tf32x3"
    design, config = _header(conv_task_writer(TASK, "09", _ctx(tf32=True)))
    assert config["DOT"] == "tf32"


def test_small_step_changes_one_knob_and_is_seeded():
    first = conv_task_writer(TASK, "09", _ctx())
    parent = KernelHeader("conv", first.meta.design, {k: str(v) for k, v in first.meta.config.items()})
    answers = [
        conv_task_writer(TASK, "09", _ctx(kind="small_step", parent=parent, rng=random.Random(s)))
        for s in range(6)
    ]
    configs = [_header(a)[1] for a in answers]
    for cfg in configs:
        changed = [k for k in cfg if str(cfg[k]) != parent.config[k]]
        assert len(changed) == 1, changed
    assert len({tuple(sorted(c.items())) for c in configs}) > 1
    again = conv_task_writer(TASK, "09", _ctx(kind="small_step", parent=parent, rng=random.Random(0)))
    assert again.code == answers[0].code


def test_large_step_moves_to_another_design():
    parent = KernelHeader("conv", "implicit_gemm", {})
    # until a cuDNN + fused-epilogue program has been tried, that approach gets the large step
    assert conv_task_writer(TASK, "09", _ctx(kind="large_step", parent=parent)) is None
    cudnn = KernelHeader("pointwise", "flat", {})
    ctx = _ctx(kind="large_step", parent=parent, listed=[parent, cudnn])
    design, _ = _header(conv_task_writer(TASK, "09", ctx))
    assert design == "implicit_gemm_flatk"


def test_rules_forbid_designs_and_knobs():
    rules = parse_rules("- You cannot use design=implicit_gemm on this GPU", KEYS)
    design, _ = _header(conv_task_writer(TASK, "09", _ctx(rules=rules)))
    assert design == "implicit_gemm_flatk"
    rules = parse_rules("- You cannot use LAYOUT=nhwc with design=implicit_gemm", KEYS)
    design, config = _header(conv_task_writer(TASK, "09", _ctx(rules=rules)))
    assert design == "implicit_gemm" and config["LAYOUT"] == "nchw"


def test_repairs_follow_the_error():
    parent = KernelHeader(
        "conv", "implicit_gemm", {"BLOCK_M": "128", "BLOCK_N": "128", "DOT": "tf32x3", "num_stages": "3"}
    )
    answer = conv_task_writer(TASK, "09", _ctx(kind="repair", parent=parent, feedback="error_kind: mismatch"))
    assert _header(answer)[1]["DOT"] == "ieee"
    feedback = "compile_error: out of resources: shared memory, Required: 262144"
    answer = conv_task_writer(TASK, "09", _ctx(kind="repair", parent=parent, feedback=feedback))
    assert _header(answer)[1]["num_stages"] == 2
    answer = conv_task_writer(TASK, "09", _ctx(kind="repair", parent=parent, feedback="runtime_error: boom"))
    assert _header(answer)[0] == "implicit_gemm_flatk"


def test_experience_is_followed_on_a_large_step():
    cases = parse_cases(
        '<case outcome="effective" speedup="2.1" same_hardware="true">design: kernelwright: family=conv '
        "design=implicit_gemm_flatk config=BLOCK_M=64,BLOCK_N=32,BLOCK_K=16,LAYOUT=nhwc\ncode:\n"
        '"""Generated.\n\n    conv2d 64->128 k=[3, 3] s=[1, 1] p=[1, 1] d=[1, 1] g=1 float32\n"""</case>'
    )
    design, config = _header(conv_task_writer(TASK, "09", _ctx(cases=cases)))
    assert design == "implicit_gemm_flatk" and config["BLOCK_M"] == 64 and config["LAYOUT"] == "nhwc"


def test_a_speed_from_other_hardware_does_not_steer_a_large_step():
    case = (
        '<case outcome="effective" speedup="2.1" same_hardware="false">design: kernelwright: family=conv '
        "design=implicit_gemm_flatk config=BLOCK_M=64,BLOCK_N=32,BLOCK_K=16,LAYOUT=nhwc\ncode:\n"
        '"""Generated.\n\n    conv2d 64->128 k=[3, 3] s=[1, 1] p=[1, 1] d=[1, 1] g=1 float32\n"""</case>'
    )
    plain = _header(conv_task_writer(TASK, "09", _ctx()))
    assert _header(conv_task_writer(TASK, "09", _ctx(cases=parse_cases(case)))) == plain
    here = case.replace('same_hardware="false"', 'same_hardware="true"')
    assert _header(conv_task_writer(TASK, "09", _ctx(cases=parse_cases(here)))) != plain


def test_config_pairs_round_trip():
    cfg = config_from_pairs({"BLOCK_M": "32", "RECOMPUTE": "True", "LAYOUT": "nhwc", "bogus": "1"})
    assert cfg.BLOCK_M == 32 and cfg.RECOMPUTE is True and cfg.LAYOUT == "nhwc"


DEPTHWISE = (LEVEL2 / "24_conv2d_depthwise_batchnorm_relu6.py").read_text()
# An experience case as the context builder renders it: a grouped convolution (32 input channels per
# group) where implicit_gemm_flatk won.
GROUPED_CASE = (
    '<case id="c1" outcome="effective" speedup="1.3" hardware="h200" same_hardware="true">'
    "task: 25_conv2d_grouped (conv; in 16x64x128x128; float32)\naction: large_step; idea: -\n"
    "design: kernelwright: family=conv design=implicit_gemm_flatk config=BLOCK_M=64,BLOCK_N=32,BLOCK_K=32,"
    "GROUP_M=8,num_warps=4,num_stages=3,LAYOUT=nchw,RECOMPUTE=False,DOT=tf32x3\ncode:\n"
    "# kernelwright: family=conv design=implicit_gemm_flatk config=BLOCK_M=64\n"
    '"""Generated by kernelwright\'s convolution writer.\n\n    conv2d 128->64 k=[3, 3] s=[2, 2] p=[1, 1] '
    'd=[1, 1] g=4 float32\n"""\n</case>'
)


def test_depthwise_root_large_steps_write_direct_depthwise_despite_other_experience():
    # The root's large steps (no parent): experience from a grouped convolution does not displace the
    # depthwise design, and the next Triton turn moves to a design not written yet.
    cases = parse_cases(GROUPED_CASE)
    first = conv_task_writer(DEPTHWISE, "24_conv2d_depthwise_batchnorm_relu6", _ctx(cases=cases))
    design, config = _header(first)
    assert design == "direct_depthwise" and config["RECOMPUTE"] is False  # stored first
    listed = [
        KernelHeader("conv", design, {k: str(v) for k, v in config.items()}),
        KernelHeader("pointwise", "flat", {}),
    ]
    second = conv_task_writer(DEPTHWISE, "24", _ctx(cases=cases, listed=listed))
    assert _header(second)[0] == "implicit_gemm_flatk"
    # a large step from the cuDNN program (parent of another family) comes back to direct_depthwise
    back = conv_task_writer(
        DEPTHWISE, "24", _ctx(kind="large_step", parent=KernelHeader("pointwise", "flat", {}))
    )
    assert _header(back)[0] == "direct_depthwise"


def test_experience_of_the_same_task_or_class_is_followed():
    same = GROUPED_CASE.replace("25_conv2d_grouped", "24_conv2d_depthwise_batchnorm_relu6")
    answer = conv_task_writer(DEPTHWISE, "24_conv2d_depthwise_batchnorm_relu6", _ctx(cases=parse_cases(same)))
    assert _header(answer)[0] == "implicit_gemm_flatk"
    # the case is of the same class as task 25 (32 input channels per group)
    grouped = (LEVEL2 / "25_conv2d_grouped_stride2_instancenorm_leakyrelu_sum.py").read_text()
    answer = conv_task_writer(grouped, "25", _ctx(cases=parse_cases(GROUPED_CASE)))
    assert _header(answer)[0] == "implicit_gemm_flatk"


def test_root_large_steps_do_not_repeat_a_written_program():
    listed = []
    seen = set()
    for _ in range(5):
        answer = conv_task_writer(
            DEPTHWISE, "24", _ctx(listed=[*listed, KernelHeader("pointwise", "flat", {})])
        )
        design, config = _header(answer)
        key = (design, tuple(sorted(config.items())))
        assert key not in seen
        seen.add(key)
        listed.append(KernelHeader("conv", design, {k: str(v) for k, v in config.items()}))
    assert {k[0] for k in seen} == {"direct_depthwise", "implicit_gemm_flatk", "implicit_gemm"}


def test_stage_buffers_are_in_the_tasks_dtype_for_half_and_fp32_otherwise():
    """A normalisation after the convolution splits the program in two stages with a buffer between them:
    fp32 for an fp32 task, the task's own dtype for a bf16 one (the rounding the reference applies to the
    convolution's output; an fp32 buffer moved a third more bytes)."""
    from kernelwright.providers.offline.families.conv.conv import write_conv_program

    def buffers(suite: str) -> list[str]:
        source = (bundled_suite_dir(suite) / "24_conv2d_depthwise_batchnorm_relu6.py").read_text()
        code = write_conv_program(source, name="24") or ""
        return [
            line.split("dtype=")[-1]
            for line in code.splitlines()
            if line.strip().startswith("b0 = torch.empty")
        ]

    assert buffers("level2") == ["torch.float32)"]
    assert buffers("level2_bf16") == ["torch.bfloat16)"]


def test_half_implicit_gemm_tiles_up_to_128x128_use_one_warpgroup():
    from kernelwright.providers.offline.families.conv.conv import analyze_conv_task, conv_configs

    for suite, warps in (("level2_bf16", 4), ("level2", 8)):
        source = (bundled_suite_dir(suite) / "09_conv2d_bias_relu.py").read_text()
        first = conv_configs("implicit_gemm", analyze_conv_task(source, "09").plan, "strict")[0]
        assert (first.BLOCK_M, first.BLOCK_N, first.num_warps) == (128, 128, warps), suite


def test_half_2d_convolutions_start_from_input_boxes_two_programs_per_sm():
    """X_TMA (boxes of output rows read through a descriptor) with PERSIST=2 is the default where it was
    measured to win: bf16 2-D convolutions. 1-D (measured slower), fp32 and nchw configs keep pointer tiles;
    a small step toggles X_TMA on nhwc configs only (it is not read on nchw)."""
    from kernelwright.providers.offline.families.conv.conv import (
        analyze_conv_task,
        conv_configs,
        conv_neighbours,
    )

    def space(suite: str, name: str):
        source = next(bundled_suite_dir(suite).glob(f"{name}_*.py")).read_text()
        return conv_configs("implicit_gemm", analyze_conv_task(source, name).plan, "strict")

    first = space("level2_bf16", "09")[0]
    assert (first.LAYOUT, first.X_TMA, first.PERSIST) == ("nhwc", True, 2)
    assert not any(c.X_TMA for c in space("level2_bf16", "09") if c.LAYOUT == "nchw")
    for suite, name in (("level2_bf16", "27"), ("level2", "09")):
        assert not any(c.X_TMA or c.PERSIST for c in space(suite, name)), (suite, name)
    steps = conv_neighbours("implicit_gemm", first)
    assert first.model_copy(update={"X_TMA": False}) in steps
    nchw = first.model_copy(update={"LAYOUT": "nchw", "X_TMA": False})
    assert all(not c.X_TMA for c in conv_neighbours("implicit_gemm", nchw) if c.LAYOUT == "nchw")


def test_box_width_covers_the_output_plane_with_the_fewest_padded_pixels():
    from kernelwright.providers.offline.families.conv.conv_runtime import HOST_HELPERS

    scope: dict = {}
    exec(HOST_HELPERS, scope)
    box_w = scope["_kw_box_w"]
    assert box_w(126, 126, 128) == 128  # 2 padded columns either way: the widest
    assert box_w(96, 96, 128) == 32  # 3 boxes of 32 columns, 4 rows each: none padded (128 wide: 32)
    assert box_w(1, 4096, 128) == 128  # a 1-D output: whole boxes along it
    assert box_w(7, 6, 64) == 8  # 8 x 8 boxes: 64 pixels for 42


def test_a_small_step_never_rewrites_the_parents_program_under_another_header():
    """X_TMA toggles on an nhwc implicit GEMM, but a transposed convolution tiles no boxes: that step would
    write the parent's kernels again. Every small step from such a parent writes a different program."""
    source = (LEVEL2 / "28_convtranspose2d_bias_clamp_scale_clamp_divide.py").read_text()
    config = {"LAYOUT": "nhwc", "BLOCK_M": "64", "BLOCK_N": "64", "BLOCK_K": "32"}
    parent_answer = conv_task_writer(source, "28", _ctx(kind="small_step", parent=KernelHeader(
        "conv", "implicit_gemm", config)))  # fmt: skip
    design, cfg = _header(parent_answer)
    parent = KernelHeader("conv", design, {k: str(v) for k, v in cfg.items()})
    body = parent_answer.code.split("\n", 1)[1]
    for s in range(12):
        answer = conv_task_writer(source, "28", _ctx(kind="small_step", parent=parent, rng=random.Random(s)))
        assert answer.code.split("\n", 1)[1] != body, _header(answer)[1]
