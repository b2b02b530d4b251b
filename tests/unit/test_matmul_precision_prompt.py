"""The precision mode reaches the writer through <target>: TF32 only under --allow-tf32; and the policy's
strict-precision choices for large fp32 matmuls (3xTF32 on K-major operands for tiled designs, bf16 parts
for split-K, each one small step from the other)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kernelwright.hardware.targets import get_target
from kernelwright.nodes.context_builder import build_context
from kernelwright.nodes.prompts import precision_line
from kernelwright.providers.offline import parse_meta, write_program
from kernelwright.providers.offline.choice.context import (
    WriterContext,
    parse_rules,
    read_context,
    tf32_allowed,
)
from kernelwright.providers.offline.choice.designs import config_space, default_config, designs_for
from kernelwright.providers.offline.choice.policy import choose
from kernelwright.providers.offline.choice.variants import main_matmul_info
from kernelwright.providers.offline.families.conv.conv_writer import conv_task_writer
from kernelwright.providers.offline.writer import CONFIG_KEYS
from kernelwright.providers.protocol import parse_sections
from kernelwright.tasks import bundled_suite_dir, load_task


def _task(level: str, prefix: str):
    return load_task(next(bundled_suite_dir(level).glob(f"{prefix}_*.py")))


def _prompt(task, precision: str | None) -> str:
    return build_context(task, "large_step", target=get_target("nvidia-h200"), precision=precision).prompt


def test_precision_lines_read_back_as_the_mode():
    assert not tf32_allowed(precision_line("strict"))
    assert tf32_allowed(precision_line("tf32")) and tf32_allowed(precision_line("reduced"))
    with pytest.raises(ValueError, match="unknown precision"):
        precision_line("fp8")


@pytest.mark.parametrize("prefix", ["14", "15", "06", "12", "01"])
def test_tf32_prompt_picks_prec_tf32_and_a_strict_prompt_never_does(prefix):
    level = "level1" if prefix in ("14", "15") else "level2"
    task = _task(level, prefix)
    strict, tf32 = _prompt(task, "strict"), _prompt(task, "tf32")
    assert "precision: strict" in parse_sections(strict)["target"].body
    assert "precision: tf32" in parse_sections(tf32)["target"].body
    s, t = write_program(strict), write_program(tf32)
    assert parse_meta(t.code).config["PREC"] == "tf32" and 'input_precision="tf32"' in t.code
    assert parse_meta(s.code).config["PREC"] in ("tf32x3", "bf16x6")  # split-K (06: bmm) takes bf16 parts
    assert 'input_precision="tf32"' not in s.code
    # No precision given (older callers): strict, as before.
    assert not read_context(parse_sections(_prompt(task, None)), 0, CONFIG_KEYS).tf32


def test_strict_steps_never_reach_plain_tf32():
    task = _task("level1", "14")
    info = main_matmul_info(task.source, task.name)
    for seed in range(30):
        parent = parse_meta(write_program(_prompt(task, "strict"), seed=seed).code)
        for kind in ("small_step", "large_step", "repair"):
            ch = choose(
                WriterContext(kind=kind, parent=parent, rng=random.Random(seed), feedback="mismatch"),
                info,
                True,
            )
            assert ch.config.get("PREC") != "tf32", (kind, ch)


def test_conv_writer_reads_the_same_precision_line():
    task = _task("level2", "09")
    strict = conv_task_writer(
        task.source, task.name, read_context(parse_sections(_prompt(task, "strict")), 0, CONFIG_KEYS)
    )
    tf32 = conv_task_writer(
        task.source, task.name, read_context(parse_sections(_prompt(task, "tf32")), 0, CONFIG_KEYS)
    )
    if strict is None or tf32 is None:
        pytest.skip("the conv writer passes on this task")
    assert "DOT=tf32," not in strict.code.splitlines()[0] + ","
    assert 'input_precision="tf32"' not in strict.code


def test_large_strict_matmuls_default_to_split_precision_dots_and_keep_ieee_in_the_space():
    info = main_matmul_info(_task("level1", "14").source, "14")
    by_name = {d.name: d for d in designs_for(info)}
    g = default_config(by_name["grouped"], info)
    assert (g["PREC"], g["KMAJOR"], g["BLOCK_K"], g["BLOCK_M"], g["BLOCK_N"], g["num_warps"], g["num_stages"]) == (
        "tf32x3", 1, 64, 128, 128, 8, 3)  # fmt: skip
    assert default_config(by_name["persistent"], info)["PREC"] == "tf32x3"
    sk = default_config(by_name["split_k"], info)  # split-K: bf16 parts, B read as it is
    assert (sk["PREC"], sk["KMAJOR"], sk["BLOCK_M"], sk["BLOCK_K"], sk["num_warps"], sk["num_stages"]) == (
        "bf16x6", 0, 128, 32, 8, 4)  # fmt: skip
    space = config_space(by_name["grouped"], info)
    # strict: only dots that hold fp32 tolerance; bf16x3 and tf32 only where TF32 is allowed
    assert space["PREC"] == ("ieee", "tf32x3", "bf16x6") and space["KMAJOR"] == (0, 1)
    assert set(config_space(by_name["grouped"], info, tf32=True)["PREC"]) == {
        "ieee", "tf32x3", "bf16x6", "bf16x3", "tf32"}  # fmt: skip
    # A small product stays on IEEE dots.
    small = main_matmul_info(_task("level1", "14").source.replace("N = 8192", "N = 256"), "14s")
    assert default_config(by_name["grouped"], small)["PREC"] == "ieee"


def test_small_step_from_ieee_goes_to_bf16x6_then_kmajor_tf32x3_and_a_rule_can_stop_it():
    info = main_matmul_info(_task("level1", "15").source, "15")
    parent = parse_meta(
        "# kernelwright: family=matmul design=grouped config=BLOCK_M=128,BLOCK_N=128,BLOCK_K=16,GROUP_M=8,"
        "num_warps=8,num_stages=3,PREC=ieee,KMAJOR=0"
    )
    step = choose(WriterContext(kind="small_step", parent=parent), info, True)
    assert (step.config["PREC"], step.config["KMAJOR"], step.config["BLOCK_K"]) == ("bf16x6", 0, 32)  # >= 32
    rules = parse_rules("- You cannot use design=grouped with PREC=bf16x6 here", CONFIG_KEYS)
    step2 = choose(WriterContext(kind="small_step", parent=parent, rules=rules), info, True)
    assert (step2.config["PREC"], step2.config["KMAJOR"], step2.config["BLOCK_K"]) == ("tf32x3", 1, 32)
    # from bf16x6, the first small step measures 3xTF32 on K-major operands, and back
    parent6 = parse_meta(
        "# kernelwright: family=matmul design=grouped config=BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,GROUP_M=8,"
        "num_warps=8,num_stages=4,PREC=bf16x6,KMAJOR=0"
    )
    step3 = choose(WriterContext(kind="small_step", parent=parent6), info, True)
    assert (step3.config["PREC"], step3.config["KMAJOR"]) == ("tf32x3", 1)
    header = ",".join(f"{k}={v}" for k, v in step3.config.items())
    parent3 = parse_meta(f"# kernelwright: family=matmul design={step3.design.name} config={header}")
    step4 = choose(WriterContext(kind="small_step", parent=parent3), info, True)
    assert (step4.config["PREC"], step4.config["KMAJOR"]) == ("bf16x6", 0)


def test_the_irregular_matmul_keeps_32_wide_tf32x3_steps():
    """At sizes that leave rows unaligned (published/24) 64-wide 3xTF32 steps spill when compiled for sm_90."""
    info = main_matmul_info(_task("published", "24").source, "24")
    by_name = {d.name: d for d in designs_for(info)}
    cfg = default_config(by_name["grouped"], info)
    assert (cfg["PREC"], cfg["KMAJOR"], cfg["BLOCK_K"], cfg["ALIGN"]) == ("tf32x3", 1, 32, 1)


def test_half_products_take_128_wide_tiles_where_256_would_pad_n_by_a_third():
    """N = 384 in 256-wide tiles computes 512 columns (four generated fp16 bmm tasks ran 1-43% faster in
    128-wide ones on an H200); N = 2048 keeps 256. (Where two programs of 128-wide tiles fit an SM a
    persistent product starts with those whatever N is: here a target of 99 KiB per block, an L4's.)"""
    src = _task("level1_bf16", "16").source
    wide = main_matmul_info(src, "16")
    narrow = main_matmul_info(src.replace("N = 2048", "N = 384"), "16n")
    for info, block_n in ((wide, 256), (narrow, 128)):
        info = dataclasses.replace(info, smem_bytes=99 * 1024)
        by_name = {d.name: d for d in designs_for(info)}
        for name in ("grouped", "persistent"):
            assert default_config(by_name[name], info)["BLOCK_N"] == block_n, (name, info.N)
