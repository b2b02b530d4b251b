"""The offline writer's reading of the prompt: program headers, rules, experience cases, targets, and the
choices it makes from them (no kernel runs here)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kernelwright.providers.offline.choice.context import (
    WriterContext,
    error_kind,
    parse_cases,
    parse_meta,
    parse_rules,
    tf32_allowed,
)
from kernelwright.providers.offline.choice.designs import (
    REGISTRY,
    config_space,
    default_config,
    default_design,
    find_design,
    kernel_info,
)
from kernelwright.providers.offline.choice.policy import choose, forbidden, neighbours
from kernelwright.providers.offline.choice.schedule import schedule
from kernelwright.providers.offline.frontend.analysis import analyze_cached
from kernelwright.providers.offline.writer import CONFIG_KEYS
from kernelwright.tasks import bundled_suite_dir
from tests.fakes.writer import writer_prompt


def _info(task_file: str, family: str, suite: str = "level1"):
    analysed = analyze_cached((bundled_suite_dir(suite) / task_file).read_text(), task_file)
    sched = schedule(analysed.graph)
    k = next(k for k in sched.triton_kernels() if k.family == family)
    return kernel_info(sched, k)


def test_meta_reads_program_headers_and_case_bodies():
    m = parse_meta(
        "# kernelwright: family=matmul design=split_k config=BLOCK_M=64,SPLIT_K=8,PREC=ieee\nimport x"
    )
    assert (m.family, m.design, m.config) == (
        "matmul",
        "split_k",
        {"BLOCK_M": "64", "SPLIT_K": "8", "PREC": "ieee"},
    )
    # The context builder shows a case's header without the leading "#".
    m2 = parse_meta(
        "task: t (softmax)\ndesign: kernelwright: family=softmax design=online config=BLOCK_R=2048"
    )
    assert (m2.family, m2.design, m2.config) == ("softmax", "online", {"BLOCK_R": "2048"})
    assert parse_meta("import torch") is None


def test_rules_forbid_matching_designs_and_configs():
    rules = parse_rules(
        "- You cannot use design=grouped with BLOCK_M=256 and num_stages=5 on this GPU (out of shared memory)\n"
        "- You cannot use the persistent design here\n"
        "- You cannot use num_warps=16 with design=online\n"
        "- You cannot write kernels without masks\n",  # no design, no KEY=VALUE: not a constraint
        CONFIG_KEYS,
    )
    assert len(rules) == 3
    ctx = WriterContext(rules=rules)
    assert forbidden(ctx, "matmul", "grouped", {"BLOCK_M": 256, "num_stages": 5, "BLOCK_N": 64})
    assert not forbidden(ctx, "matmul", "grouped", {"BLOCK_M": 256, "num_stages": 3})
    assert not forbidden(ctx, "matmul", "split_k", {"BLOCK_M": 256, "num_stages": 5})
    assert forbidden(ctx, "matmul", "persistent", {"BLOCK_M": 64})
    assert forbidden(ctx, "softmax", "online", {"num_warps": 16, "BLOCK_R": 1024})
    assert not forbidden(ctx, "softmax", "online", {"num_warps": 8})
    # a sentence's full stop after the value is not part of it
    (ended,) = parse_rules("- You cannot use design=online with PREC=tf32x3.", CONFIG_KEYS)
    assert (ended.design, ended.pairs) == ("online", {"PREC": "tf32x3"})


def test_cases_parse_outcome_speedup_and_design():
    body = (
        '<case id="c1" outcome="effective" speedup="1.80" hardware="H200" same_hardware="true">\n'
        "task: x\ndesign: kernelwright: family=softmax design=online config=BLOCK_R=2048,num_warps=8\n</case>\n"
        '<case id="c2" outcome="failed" speedup="n/a" hardware="H200" same_hardware="false">\n'
        "code:\n# kernelwright: family=softmax design=two_pass config=BLOCK_R=8192\n</case>"
    )
    good, bad = parse_cases(body)
    assert good.good and not good.bad and good.speedup == pytest.approx(1.8) and good.same_hardware
    assert good.meta.design == "online" and good.meta.config["BLOCK_R"] == "2048"
    assert bad.bad and not bad.good and bad.speedup is None and bad.meta.design == "two_pass"


def test_tf32_and_error_kinds():
    assert not tf32_allowed("name: NVIDIA H200\ncompute_capability: 9.0")
    assert tf32_allowed("precision: tf32")
    assert tf32_allowed("TF32 is allowed for fp32 matmuls")
    assert not tf32_allowed("no tf32: strict fp32")
    assert (
        error_kind("FAIL at compile: compile_error: triton.runtime.errors.OutOfResources") == "compile_error"
    )
    assert error_kind("output 0 ... outside rtol=1e-4 (mismatch)") == "mismatch"
    assert error_kind("worker killed after 120 s: timeout in stage correctness") == "timeout"


def test_neighbours_move_one_knob_one_step():
    space = {"BLOCK_R": (256, 512, 1024), "num_warps": (2, 4, 8)}
    base = {"BLOCK_R": 512, "num_warps": 2}
    ns = neighbours(space, base, random.Random(0))
    assert ns and all(sum(n[k] != base[k] for k in base) == 1 for n in ns)
    assert {"BLOCK_R": 1024, "num_warps": 2} in ns and {"BLOCK_R": 256, "num_warps": 2} in ns
    assert {"BLOCK_R": 512, "num_warps": 4} in ns


def test_every_family_has_two_designs_and_a_conv_slot():
    for family in ("pointwise", "reduction", "softmax", "norm", "loss", "scan", "matmul"):
        assert len(REGISTRY[family]) >= 2, family
    assert "conv" in REGISTRY


def test_large_step_leaves_the_parents_design_and_small_step_keeps_it():
    info = _info("09_softmax.py", "softmax")
    first = choose(WriterContext(kind="large_step"), info, primary=True)
    assert first.design is default_design(info)
    parent = parse_meta(
        f"# kernelwright: family=softmax design={first.design.name} config=TILE=4096,RMAX=16384"
    )
    large = choose(WriterContext(kind="large_step", parent=parent), info, primary=True)
    assert large.design.name != first.design.name
    small = choose(WriterContext(kind="small_step", parent=parent, rng=random.Random(3)), info, primary=True)
    assert small.design.name == first.design.name
    assert small.config != {"TILE": 4096, "RMAX": 16384, "num_warps": 0}


def test_a_rule_and_a_case_steer_the_choice():
    info = _info("09_softmax.py", "softmax")
    default = default_design(info).name
    rules = parse_rules(f"- You cannot use design={default} on rows this long", CONFIG_KEYS)
    assert choose(WriterContext(rules=rules), info, primary=True).design.name != default
    cases = parse_cases(
        '<case outcome="effective" speedup="2.10" same_hardware="true">'
        "design: kernelwright: family=softmax design=two_pass config=BLOCK_R=512,BLOCK_M=2,num_warps=4</case>"
    )
    pick = choose(WriterContext(cases=cases), info, primary=True)
    assert pick.design.name == "two_pass" and pick.config["BLOCK_R"] == 512 and pick.config["BLOCK_M"] == 2


def test_repair_shrinks_blocks_and_restores_strict_precision():
    info = _info("14_matmul_square.py", "matmul")
    parent = parse_meta(
        "# kernelwright: family=matmul design=grouped config=BLOCK_M=256,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,"
        "num_warps=8,num_stages=5,PREC=tf32x3"
    )
    fix = choose(WriterContext(kind="repair", parent=parent, feedback="compile_error: OutOfResources: shared memory"),
                 info, primary=True)  # fmt: skip
    assert fix.design.name == "grouped" and fix.config["BLOCK_M"] < 256 and fix.config["num_stages"] < 5
    fix2 = choose(
        WriterContext(kind="repair", parent=parent, feedback="mismatch: max abs error 3e-3"),
        info,
        primary=True,
    )
    assert fix2.config["PREC"] == "ieee"
    space = config_space(fix2.design, info)
    assert "tf32" not in space["PREC"]  # plain TF32 only where the target allows it


def test_small_steps_on_whole_row_kernels_skip_configs_that_launch_the_same_kernel():
    """softmax over rows of 16384 at TILE=4096: TILE, RMAX (while the row stays in registers) and
    num_warps 16 vs auto do not change the launch; a small step must move something that does,
    including knobs the parent's header does not name (PERSIST)."""
    from kernelwright.providers.offline.choice.designs import launch_effect

    info = _info("09_softmax.py", "softmax")
    d = default_design(info)
    base = {"TILE": 4096, "RMAX": 16384, "num_warps": 0}
    assert launch_effect(d, info, base) == launch_effect(d, info, {**base, "TILE": 2048, "num_warps": 16})
    assert launch_effect(d, info, base) != launch_effect(d, info, {**base, "PERSIST": 2})
    parent = parse_meta(
        "# kernelwright: family=softmax design=row_registers config=TILE=4096,RMAX=16384,num_warps=0"
    )
    moved = set()
    for seed in range(12):
        small = choose(
            WriterContext(kind="small_step", parent=parent, rng=random.Random(seed)), info, primary=True
        )
        assert small.design is d
        assert launch_effect(d, info, small.config) != launch_effect(d, info, base), small.config
        moved |= {k for k in small.config if str(small.config[k]) != str(base.get(k, 0))}
    assert {"PERSIST", "num_warps"} <= moved


def test_a_large_step_from_one_program_per_row_goes_to_two_pass_for_norms_and_to_prefetch_for_reductions():
    """Over the last dim the register design's large step is, for a norm, two_pass at 16 warps with sizes
    compiled in (long rows); for a plain reduction, row_prefetch (persistent, next row fetched during this
    one's work). Over a middle dim there is no prefetching design."""
    info = _info("11_layer_norm.py", "norm")
    assert default_design(info).name == "row_registers"
    parent = parse_meta("# kernelwright: family=norm design=row_registers config=TILE=4096,RMAX=16384")
    large = choose(WriterContext(kind="large_step", parent=parent), info, primary=True)
    assert large.design.name == "two_pass"
    assert {k: large.config[k] for k in ("STATIC", "num_warps")} == {"STATIC": 1, "num_warps": 16}

    info = _info("05_sum_last_dim.py", "reduction")
    parent = parse_meta("# kernelwright: family=reduction design=row_registers config=TILE=4096,RMAX=16384")
    large = choose(WriterContext(kind="large_step", parent=parent), info, primary=True)
    assert large.design.name == "row_prefetch"
    assert {k: large.config[k] for k in ("PERSIST", "STATIC", "num_warps")} == {
        "PERSIST": 1,
        "STATIC": 1,
        "num_warps": 32,
    }
    middle = _info("06_mean_middle_dim.py", "reduction")
    assert middle.layout == "cols"
    assert "row_prefetch" not in {d.name for d in REGISTRY["reduction"] if d.applies(middle)}


def test_looped_designs_over_long_rows_default_to_16_warps_and_static_sizes():
    long_rows = _info("11_layer_norm.py", "norm")
    assert long_rows.NR == 8192
    for name in ("two_pass", "welford"):
        cfg = default_config(find_design("norm", name), long_rows)
        assert (cfg["num_warps"], cfg.get("STATIC")) == (16, 1), (name, cfg)
    short_rows = dataclasses.replace(_info("09_softmax.py", "softmax"), NR=1000)
    cfg = default_config(find_design("softmax", "two_pass"), short_rows)
    assert cfg["num_warps"] == 8 and not cfg.get("STATIC")


def test_static_programs_compile_sizes_and_strides_in_and_others_keep_them_as_arguments():
    from kernelwright.providers.offline.choice.variants import program_variant

    source = (bundled_suite_dir("level1") / "11_layer_norm.py").read_text()
    static = program_variant(source, "ln", "row_registers", {"STATIC": 1}).code or ""
    plain = program_variant(source, "ln", "row_registers", {}).code or ""
    for name in ("NR", "in0_s1", "out0_s0"):
        assert f"    {name}: tl.constexpr," in static
        assert f"    {name}," in plain
    assert "    NK," in static  # the row count stays an argument: one compile serves any batch


def test_a_small_step_does_not_repeat_a_program_it_is_shown():
    """Two small steps from one parent with the same prompt would pick the same neighbour; with the first
    one's header in <tried> the second picks another, and the writer's prompt path reads <tried>."""
    from kernelwright.providers.offline import write_program
    from kernelwright.providers.protocol import render_section

    info = _info("09_softmax.py", "softmax")
    parent = parse_meta("# kernelwright: family=softmax design=row_registers config=TILE=4096,RMAX=16384")
    first = choose(WriterContext(kind="small_step", parent=parent, rng=random.Random(3)), info, primary=True)
    header = "# kernelwright: family=softmax design=row_registers config=" + ",".join(
        f"{k}={v}" for k, v in first.config.items()
    )
    ctx = WriterContext(kind="small_step", parent=parent, rng=random.Random(3), tried=[parse_meta(header)])
    second = choose(ctx, info, primary=True)
    assert second.design.name == "row_registers" and second.config != first.config

    source = (bundled_suite_dir("level1") / "09_softmax.py").read_text()
    parent_code = write_program(
        "\n".join(
            [render_section("request", "x", kind="large_step"), render_section("task", source, name="t")]
        )
    ).code
    assert parent_code is not None

    def small(tried: list[str]) -> str:
        parts = [render_section("request", "x", kind="small_step"), render_section("task", source, name="t"),
                 render_section("parent", parent_code)]  # fmt: skip
        if tried:
            parts.append(render_section("tried", "\n".join(tried)))
        code = write_program("\n".join(parts)).code
        assert code is not None
        return code.splitlines()[0]

    once = small([])
    assert small([]) == once  # the same prompt, the same step
    again = small([once])
    assert again != once and small([once, again]) not in (once, again)


def test_a_large_step_leaves_the_designs_already_written_in_the_run():
    info = _info("11_layer_norm.py", "norm")
    written = [
        parse_meta(f"# kernelwright: family=norm design={d} config=")
        for d in ("row_registers", "row_prefetch")
    ]
    root_large = choose(WriterContext(kind="large_step", tried=written), info, primary=True)
    assert root_large.design.name not in ("row_registers", "row_prefetch")
    # every design written at its default config: a config of one that has not been written yet
    every = [parse_meta(f"# kernelwright: family=norm design={d.name} config=") for d in REGISTRY["norm"]]
    again = choose(WriterContext(kind="large_step", tried=every, rng=random.Random(0)), info, primary=True)
    assert again.config != default_config(again.design, info)


def test_choices_do_not_depend_on_the_ids_runs_give_their_records():
    """Two prompts that differ only in record ids (a case id carries its run's random id) give the writer
    the same random choices: the same task, seed and memory give the same search."""
    from kernelwright.providers.offline.choice.context import read_context
    from kernelwright.providers.protocol import parse_sections

    def prompt(run: str) -> str:
        return (
            '<request kind="small_step"></request>\n<task name="t">x</task>\n'
            f'<experience><case id="case-{run}-n1" outcome="effective" speedup="1.2">'
            "# kernelwright: family=pointwise design=flat config=BLOCK=1024</case>"
            f"rule-{run} seen</experience>"
        )

    a = read_context(parse_sections(prompt("0d3d63d973ad4a37")), 0, CONFIG_KEYS).rng
    b = read_context(parse_sections(prompt("5bfaf5a334b1460f")), 0, CONFIG_KEYS).rng
    c = read_context(parse_sections(prompt("5bfaf5a334b1460f")), 1, CONFIG_KEYS).rng
    draws = [r.random() for r in (a, b, c)]
    assert draws[0] == draws[1] != draws[2]


def test_choices_do_not_depend_on_a_percent_of_timing_noise():
    """The parent measured at 1.825 or 1.848 ms (two runs on one GPU) gives the same seeded choices; a
    parent with another config does not."""
    from kernelwright.providers.offline.choice.context import read_context
    from kernelwright.providers.protocol import parse_sections

    def prompt(block: int, ms: float, speedup: float) -> str:
        return (
            '<request kind="small_step"></request>\n<task name="t">x</task>\n'
            f"<parent># kernelwright: family=pointwise design=flat config=BLOCK={block}\n"
            f"runtime {ms:.4g} ms, {speedup:.3f}x vs eager PyTorch</parent>"
        )

    draws = [
        read_context(parse_sections(prompt(*p)), 0, CONFIG_KEYS).rng.random()
        for p in ((1024, 1.825, 1.367), (1024, 1.848, 1.35), (2048, 1.825, 1.367))
    ]
    assert draws[0] == draws[1] != draws[2]


def test_a_registers_reduction_over_a_long_middle_dim_walks_it_in_tiles_of_at_most_TILE_elements(tmp_path):
    """128 x 4096 x 4095 summed over the middle dim: the row does not fit one register tile, so the kernel
    walks it; the tile it walks with must stay within TILE (1024 x 128 took 191 s to compile for an H200)."""
    import torch

    from kernelwright.providers.offline.choice.variants import program_variant

    source = (bundled_suite_dir("published") / "12_sum_middle_dim_128x4096x4095.py").read_text()
    answer = program_variant(source, "sum_mid", "row_registers", {})
    assert answer.code and answer.meta is not None
    tile = answer.meta.config["TILE"]
    from tests.fakes.writer import import_program

    namespace = vars(import_program(answer.code, tmp_path / "candidate_sum_mid.py"))
    launches: list[dict] = []

    class _Recorder:
        def __getitem__(self, grid):
            return lambda *args, **meta: launches.append(meta)

    namespace["k0_reduction"] = _Recorder()
    x = torch.empty(128, 4096, 4095, device="meta")
    namespace["ModelNew"](1)(x)
    (meta,) = launches
    assert not meta["SINGLE"]
    assert meta["BLOCK_R"] * meta["BLOCK_I"] <= tile, meta
    assert meta["BLOCK_I"] == 128


def test_the_target_names_its_shared_memory_and_configs_beyond_it_are_never_written():
    from kernelwright.hardware.targets import get_target
    from kernelwright.providers.offline import write_program
    from kernelwright.providers.offline.choice.designs import DEFAULT_SMEM_BYTES, fits, target_smem_bytes

    assert target_smem_bytes(get_target("nvidia-h200").summary()) == 227 * 1024
    assert (
        target_smem_bytes(get_target("nvidia-a100").summary())
        == get_target("nvidia-a100").shared_memory_per_block_bytes
    )
    assert target_smem_bytes("no such line") == DEFAULT_SMEM_BYTES

    # the half GEMM configs that failed to compile for an H200 (5 stages of 128x256x64; 128x256x128)
    source = (bundled_suite_dir("level2_bf16") / "01_linear_bias_relu.py").read_text()
    info = _info("01_linear_bias_relu.py", "matmul", "level2_bf16")
    grouped = find_design("matmul", "grouped")
    base = default_config(grouped, info)
    assert fits(grouped, info, base)
    assert not fits(grouped, info, dict(base, num_stages=5)) and not fits(
        grouped, info, dict(base, BLOCK_K=128)
    )
    assert fits(grouped, info, dict(base, num_stages=4))  # 196608 bytes
    # the flattened persistent loop holds more (32-48 KiB at these tiles, compiled for sm_90): its default fits,
    # four stages of it do not, though four stages of the unflattened loop do
    persistent = find_design("matmul", "persistent")
    flat = default_config(persistent, info)
    assert flat["FLAT"] == 1 and fits(persistent, info, flat)
    wide = dict(flat, BLOCK_N=256, num_warps=8, PER_SM=1)  # one program of 128 x 256 tiles per SM
    assert fits(persistent, info, wide)
    assert fits(persistent, info, dict(wide, num_stages=4, FLAT=0))
    assert not fits(persistent, info, dict(wide, num_stages=4))

    # small steps from a parent one knob away from the limit never cross it, whatever the seed
    parent = "# kernelwright: family=matmul design=grouped config=" + ",".join(
        f"{k}={v}" for k, v in dict(base, num_stages=4).items()
    )
    assert fits(grouped, info, parse_meta(parent).config)
    for seed in range(12):
        ctx = WriterContext(kind="small_step", parent=parse_meta(parent), rng=random.Random(seed))
        step = choose(ctx, info, primary=True)
        assert fits(step.design, info, step.config), (seed, step.config)

    # a smaller target: the root program already fits it (the default would need 144 KiB)
    target = get_target("nvidia-h200").summary().replace("smem/block 227 KiB", "smem/block 99 KiB")
    header = parse_meta(write_program(writer_prompt(source, target=target)).code)
    small_info = dataclasses.replace(info, smem_bytes=99 * 1024)
    assert fits(find_design("matmul", header.design), small_info, header.config), header
    assert not fits(grouped, small_info, base)


def test_a_half_product_starts_with_two_programs_per_sm_where_two_fit():
    from kernelwright.providers.offline.choice.designs import fits

    persistent = find_design("matmul", "persistent")
    bmm = _info("16_bmm.py", "matmul", "level1_bf16")  # 32 x 2048 x 1024 x 2048: K = 1024
    cfg = default_config(persistent, bmm)
    assert (cfg["PER_SM"], cfg["BLOCK_N"], cfg["num_warps"], cfg["num_stages"], cfg["FLAT"]) == (
        2,
        128,
        4,
        3,
        1,
    )
    assert fits(persistent, bmm, cfg) and 2 in config_space(persistent, bmm)["PER_SM"]
    long_k = _info("17_matmul_transposed_a.py", "matmul", "level1_bf16")  # K = 4096: two per SM too
    assert default_config(persistent, long_k)["PER_SM"] == 2
    # two such programs take 2 x 107 KiB of shared memory: not on a target of 99 KiB per block
    assert "PER_SM" not in default_config(persistent, dataclasses.replace(bmm, smem_bytes=99 * 1024))
    # which pairs are resident together follows what Triton 3.6 allocated compiled for sm_90: 3 stages of
    # 128 x 128 x 64 over 4 warps (106520 B each) fit, 4 stages (139296 B) and 8 warps in 3 (131096 B) do not;
    # 128 x 256 over 8 warps needs twice the registers an SM has; only the flattened descriptor kernel is
    # offered two per SM
    assert not fits(persistent, bmm, dict(cfg, num_stages=4))
    assert not fits(persistent, bmm, dict(cfg, num_warps=8))
    assert fits(persistent, bmm, dict(cfg, num_warps=8, num_stages=2))  # 98320 B, 114 registers
    assert not fits(persistent, bmm, dict(cfg, BLOCK_N=256, num_warps=8, num_stages=2))
    assert not fits(persistent, bmm, dict(cfg, TMA=0)) and not fits(persistent, bmm, dict(cfg, FLAT=0))
    assert fits(persistent, bmm, dict(cfg, PER_SM=1, num_stages=4))


def test_the_gluon_gemm_starts_plain_half_precision_products_on_sm90_only():
    """WS (Hopper's warp-specialized Gluon GEMM, emit_gluon): offered for a plain half-precision product on an
    sm_90 target and its default there: ping-pong where K <= 1024, cooperative (WS_COOP=1, 3 stages) where K is
    longer (each judged faster where it starts: kind_matmul.WS_DEFAULT_MAX_K); never for a product with an
    epilogue fused after it, fp32 dots, or another architecture; its ring and output buffers must fit."""
    from kernelwright.hardware.targets import get_target
    from kernelwright.providers.offline import write_program
    from kernelwright.providers.offline.choice.designs import fits, target_arch

    persistent = find_design("matmul", "persistent")
    bmm = _info("16_bmm.py", "matmul", "level1_bf16")  # K = 1024
    cfg = default_config(persistent, bmm)
    assert bmm.plain_product and cfg["WS"] == 5 and "WS_COOP" not in cfg
    space = config_space(persistent, bmm)
    assert set(space["WS"]) == {0, 3, 4, 5} and set(space["WS_COOP"]) == {0, 1}
    square = _info("14_matmul_square.py", "matmul", "level1_bf16")  # K = 8192: cooperative
    square_cfg = default_config(persistent, square)
    assert square_cfg["WS"] == 3 and square_cfg["WS_COOP"] == 1 and fits(persistent, square, square_cfg)
    assert not fits(persistent, square, dict(square_cfg, WS=4))  # 4 stages of 48 KiB and the outputs: 256 KiB
    assert fits(persistent, square, dict(square_cfg, WS=5, WS_COOP=0))  # ping-pong's 5 stages of 32 KiB
    residual = _info("06_bmm_scale_residual.py", "matmul", "level2_bf16")  # * scale + residual after the bmm
    fp32, l4 = _info("16_bmm.py", "matmul"), dataclasses.replace(bmm, arch=89)
    for other in (residual, fp32, l4):
        keys = set(config_space(persistent, other)) | set(default_config(persistent, other))
        assert not keys & {"WS", "WS_COOP"}, other
    assert not residual.plain_product
    assert not fits(persistent, dataclasses.replace(bmm, smem_bytes=160 * 1024), cfg)  # 5 stages: 224 KiB

    assert target_arch(get_target("nvidia-h200").summary()) == 90 and target_arch(None) == 90
    assert target_arch(get_target("nvidia-l4").summary()) == 89
    source = (bundled_suite_dir("level1_bf16") / "16_bmm.py").read_text()
    on_l4 = parse_meta(write_program(writer_prompt(source, target=get_target("nvidia-l4").summary())).code)
    assert "WS" not in on_l4.config


def test_align_is_a_default_for_every_large_product():
    from kernelwright.providers.offline import write_program
    from kernelwright.tasks.resize import with_sizes

    def root_config(source: str) -> dict:
        return parse_meta(write_program(writer_prompt(source)).code).config

    def bundled(suite: str, stem: str) -> str:
        return (bundled_suite_dir(suite) / f"{stem}.py").read_text()

    irregular = bundled("published", "24_matmul_irregular_8205x2949x5921")  # K = 5921
    assert root_config(irregular).get("ALIGN") == "1"
    # aligned where traced (8192 x 4096 x 4096: nothing to copy there), but the program also runs at other sizes
    assert root_config(bundled("level2", "01_linear_bias_relu")).get("ALIGN") == "1"
    assert "ALIGN" not in root_config(with_sizes(bundled("level1", "14_matmul_square"), {"N": 96}))  # small


def test_split_k_splits_enough_to_give_every_sm_programs():
    info = _info("23_matmul_large_k_256x524288x256.py", "matmul", "published")
    split = find_design("matmul", "split_k")
    assert default_design(info) is split
    cfg = default_config(split, info)
    tiles = (256 // cfg["BLOCK_M"]) * (256 // cfg["BLOCK_N"])
    # 128 x 128 tiles (bf16 parts) in 64 splits: 256 programs (was 8 splits of 64 x 64 tiles: 128 programs)
    # (two per SM would be 66 splits; the space stops at 64)
    assert (cfg["BLOCK_M"], cfg["SPLIT_K"]) == (128, 64) and tiles * cfg["SPLIT_K"] > 1.9 * info.sm_count
    assert cfg["SPLIT_K"] in config_space(split, info)["SPLIT_K"]


def test_a_rule_from_a_program_that_kept_a_convolution_in_torch_stays_with_such_programs():
    """level2/09's cuDNN + fused-epilogue program heads its Triton epilogue with the flat pointwise default
    (the same header as a ReLU's root). A rule learned from its failure says what it kept in torch, so it
    forbids that config where the program keeps conv2d in torch, and not a plain ReLU's default config
    (a mismatch of such programs once forbade it for every pointwise task)."""
    from kernelwright.hardware.result import EvalResult
    from kernelwright.nodes.reflector import signature_rule
    from kernelwright.providers.offline import write_program

    conv = (bundled_suite_dir("level2") / "09_conv2d_bias_relu.py").read_text()
    relu = (bundled_suite_dir("level1") / "01_relu.py").read_text()
    triton_conv = write_program(writer_prompt(conv)).code
    cudnn = write_program(writer_prompt(conv, kind="large_step", parent=triton_conv)).code
    assert parse_meta(cudnn).family == "pointwise" and "conv2d(" in cudnn
    failed = EvalResult(
        correct=False, stage="correctness", error_kind="mismatch", error="max abs error 0.01 > 1e-05"
    )
    rule = signature_rule(cudnn, failed, "NVIDIA H200")
    assert "beside torch's conv2d" in rule, rule
    default = parse_meta(write_program(writer_prompt(relu)).code).config

    def config(source: str, rules: str, **sections: str) -> dict:
        return parse_meta(write_program(writer_prompt(source, rules=rules, **sections)).code).config

    assert config(relu, f"- {rule}") == default
    assert config(conv, f"- {rule}", kind="large_step", parent=triton_conv) != default
    # the same rule without the qualifier forbids the ReLU's default too
    plain = rule.replace(" beside torch's conv2d", "")
    assert config(relu, f"- {plain}") != default


def test_a_rule_from_a_kernel_out_of_shared_memory_names_that_kernels_tiles_and_stages():
    """A program that ran out of shared memory on a smaller GPU: the rule names the tiles and stages of the
    kernel the compile feedback says exceeded the limit (its buffers' sizes), not the first kernel's whole
    header (a SwiGLU's second product once failed while the rule named the first's warps and tile order,
    so the same buffers failed again under other headers). Given the rule, the writer writes no kernel with
    those tiles and stages, whatever its other knobs."""
    from kernelwright.hardware.result import EvalResult
    from kernelwright.nodes.reflector import signature_rule
    from kernelwright.providers.offline import write_program
    from kernelwright.tasks.variant import dtype_variant

    src = dtype_variant((bundled_suite_dir("level2") / "12_linear_swiglu.py").read_text(), "float16")
    code = write_program(writer_prompt(src)).code
    error = (
        "verified on the interpreter, but does not compile for nvidia-l4:\n"
        "compile for nvidia-l4 (cuda:89, full shapes): FAILED (compile_error)\n"
        "  k1_matmul[num_warps=4, num_stages=2, NB=1, BLOCK_M=64, BLOCK_N=128, BLOCK_K=32, GROUP_M=8]: "
        "165 registers, 24576 B shared (limit 101376)\n"
        "  k3_matmul[num_warps=4, num_stages=3, NB=1, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, "
        "NUM_PROGS=8]: 189 registers, 106520 B shared (limit 101376), EXCEEDS shared memory limit: launch "
        "would fail"
    )
    failed = EvalResult(correct=False, stage="compile", error_kind="compile_error", error=error)
    rule = signature_rule(code, failed, "NVIDIA L4 24GB")
    action = rule.split(" on NVIDIA L4")[0]
    assert action == (
        "You cannot use design=persistent with BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,num_stages=3 for matmul"
    ), rule

    def buffers(c: dict) -> tuple:
        return tuple(str(c.get(k)) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages"))

    def kernels(program: str) -> list[tuple]:
        return [buffers(parse_meta(line).config) for line in program.splitlines()
                if line.startswith("# kernelwright:")]  # fmt: skip

    forbidden = ("128", "128", "64", "3")
    assert forbidden in kernels(code)  # without the rule both products take these buffers
    again = write_program(writer_prompt(src, rules=f"- {rule}")).code
    assert again is not None and kernels(again) and forbidden not in kernels(again)
    # a failure that is not about shared memory keeps the header's whole config
    mismatch = EvalResult(correct=False, stage="correctness", error_kind="mismatch", error="max abs error 1")
    assert "GROUP_M=8,num_warps=4" in signature_rule(code, mismatch, "NVIDIA L4 24GB")
