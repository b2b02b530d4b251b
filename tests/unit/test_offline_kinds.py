"""The kernel kinds behind the offline writer's designs (providers/offline/kinds/kind*.py): one registered
kind per kernel kind, facts read without a generator, and the target's SM count in the defaults."""

from __future__ import annotations

import dataclasses

from kernelwright.providers.offline.choice.context import read_context
from kernelwright.providers.offline.choice.designs import (
    DEFAULT_SM_COUNT,
    KINDS,
    REGISTRY,
    default_config,
    default_design,
    designs_for,
    find_design,
    fits,
    kernel_info,
    target_sm_count,
)
from kernelwright.providers.offline.choice.schedule import schedule
from kernelwright.providers.offline.emit import emit_rows
from kernelwright.providers.offline.frontend.analysis import analyze_cached
from kernelwright.providers.offline.writer import CONFIG_KEYS
from kernelwright.providers.protocol import parse_sections
from kernelwright.tasks import bundled_suite_dir


def _kernel(task_file: str):
    analysed = analyze_cached((bundled_suite_dir("level1") / task_file).read_text(), task_file)
    sched = schedule(analysed.graph)
    return sched, sched.triton_kernels()[0]


def test_every_kind_registers_its_designs():
    assert set(KINDS) == {"rows", "matmul", "pointwise"}
    for kind in KINDS.values():
        for family, designs in kind.designs().items():
            assert [d.name for d in REGISTRY[family]] == [d.name for d in designs]
            assert all(d.kind == kind.name for d in designs)


def test_facts_are_read_without_building_a_generator(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("kernel_info built a generator")

    monkeypatch.setattr(emit_rows.RowKernelGen, "__init__", refuse)
    sched, k = _kernel("05_sum_last_dim.py")
    info = kernel_info(sched, k)
    assert info.kind == "rows" and info.layout == "rows" and info.NR > 1
    assert {d.kind for d in designs_for(info)} == {"rows"}


def test_sm_count_comes_from_the_target_section():
    assert target_sm_count(None) == DEFAULT_SM_COUNT == 132
    assert target_sm_count("name: a100\nsm_count: 108") == 108
    assert target_sm_count("sm_count: 0") == DEFAULT_SM_COUNT
    prompt = "<task name='t'>x</task>\n<target>\nname: h100\nsm_count: 114\n</target>"
    assert read_context(parse_sections(prompt), 0, CONFIG_KEYS).sm_count == 114


def test_few_long_rows_split_against_the_targets_sm_count():
    sched, k = _kernel("23_sum_all.py")
    info = dataclasses.replace(kernel_info(sched, k), NK=300, NR=1 << 17, split_ok=True)
    assert default_design(dataclasses.replace(info, sm_count=132)).mode == "split"  # 300 rows < 4 x 132
    assert default_design(dataclasses.replace(info, sm_count=64)).mode != "split"  # 300 rows fill 64 SMs


def test_a_split_norm_starts_from_chunks_whose_welford_partials_fit_one_wave():
    """Mean and variance in one pass keep three accumulators per element, so a split norm starts from
    2048-wide chunks (4096 x 8 warps needed 79 registers: the 4-per-SM grid ran in two waves on an H200);
    a split without a variance keeps 4096."""
    split = find_design("norm", "split")
    assert split is not None
    norm = kernel_info(*_kernel("11_layer_norm.py"))
    assert norm.welford and default_config(split, norm)["BLOCK_R"] == 2048
    total = kernel_info(*_kernel("23_sum_all.py"))
    assert not total.welford
    assert default_config(find_design("reduction", "split"), total)["BLOCK_R"] == 4096


def test_a_split_over_few_rows_writes_in_short_programs_of_its_own():
    """Fewer rows than 4 per SM: the write pass gets one chunk per program (its own grid); many rows
    keep the statistics passes' grid."""
    split = find_design("norm", "split")
    assert split is not None
    norm = kernel_info(*_kernel("11_layer_norm.py"))
    few = dataclasses.replace(norm, NK=64, sm_count=132)
    many = dataclasses.replace(norm, NK=7168, sm_count=132)
    assert default_config(split, few)["WRITE_CHUNKS"] == 1
    assert "WRITE_CHUNKS" not in default_config(split, many)


def test_a_half_precision_product_of_many_tiles_starts_persistent():
    """bf16 Linear + epilogue at 8192 x 4096 x 4096 (1024 tiles of 128 x 256): one program per SM walking the
    tiles; with fewer than two such tiles per SM, fp32 operands, or a batch (not measured), one program per
    tile."""

    def design(suite: str, task_file: str, **change) -> str:
        analysed = analyze_cached((bundled_suite_dir(suite) / task_file).read_text(), task_file)
        sched = schedule(analysed.graph)
        info = dataclasses.replace(kernel_info(sched, sched.triton_kernels()[0]), **change)
        return default_design(info).name

    assert design("level2_bf16", "01_linear_bias_relu.py") == "persistent"
    assert (
        design("level2_bf16", "01_linear_bias_relu.py", sm_count=1024) == "grouped"
    )  # 1024 tiles < 2 x 1024
    # batched too: 0.429 ms against 0.464 for a bf16 bmm on an H200
    assert design("level2_bf16", "06_bmm_scale_residual.py") == "persistent"
    assert design("level2", "01_linear_bias_relu.py") == "grouped"  # fp32 (tf32x3) roots as measured


def test_a_matmul_config_whose_accumulators_spill_does_not_fit():
    """More than 128 fp32 accumulator registers per thread spill (128 x 256 over 4 warps ran ten times slower
    than over 8 on an H200): such configs are not written, so a small step never proposes them."""
    analysed = analyze_cached((bundled_suite_dir("level2_bf16") / "01_linear_bias_relu.py").read_text(), "01")
    sched = schedule(analysed.graph)
    info = kernel_info(sched, sched.triton_kernels()[0])
    grouped = find_design("matmul", "grouped")
    tile = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 3}
    assert fits(grouped, info, {**tile, "num_warps": 8})
    assert not fits(grouped, info, {**tile, "num_warps": 4})
    assert not fits(grouped, info, {**tile, "BLOCK_M": 256, "num_warps": 8})


def test_whole_row_kernels_preload_their_weights_in_fp32_only():
    """PRELOAD=1 (every per-element load before the statistics) is the register design's default for rows of
    at most 8192 fp32 values (RMSnorm * SiLU(gate) on an H200: 0.207 -> 0.191 ms); in bf16 the same task ran
    slower with it (0.119 against 0.104 ms), so half-precision rows start without it."""

    def root(suite: str, task_file: str) -> dict:
        analysed = analyze_cached((bundled_suite_dir(suite) / task_file).read_text(), task_file)
        sched = schedule(analysed.graph)
        k = next(k for k in sched.triton_kernels() if k.family == "norm")
        info = kernel_info(sched, k)
        return default_config(default_design(info), info)

    assert root("level2", "05_rmsnorm_silu_gate.py").get("PRELOAD") == 1
    assert "PRELOAD" not in root("level2_bf16", "05_rmsnorm_silu_gate.py")


_BMM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b{t})


def get_inputs():
    return [torch.randn(2048, {m}, 100), torch.randn(2048, {b})]


def get_init_inputs():
    return []
"""


def test_a_product_whose_b_copy_outweighs_it_stays_on_ieee_dots():
    """NetVLAD's 2048 products of 32 x 100 by 100 x 512: tf32x3 reads B K-major, and the copy that makes it so
    (with its padded twin) took 1.01 ms on an H100 beside the product's 0.41. A K-major B (W.T-like) or a taller
    A (more FLOPs per byte of B) keeps tf32x3 and ALIGN."""

    def root(m: int, b: str, t: str = "") -> dict:
        source = _BMM.format(m=m, b=b, t=t)
        sched = schedule(analyze_cached(source, f"bmm_{m}_{t}").graph)
        k = next(k for k in sched.triton_kernels() if k.family == "matmul")
        info = kernel_info(sched, k)
        return default_config(default_design(info), info)

    netvlad = root(32, "100, 512")
    assert netvlad["PREC"] == "ieee" and netvlad["KMAJOR"] == 0 and "ALIGN" not in netvlad, netvlad
    kmajor = root(32, "512, 100", ".transpose(1, 2)")
    assert kmajor["PREC"] == "tf32x3" and kmajor.get("ALIGN") == 1, kmajor
    taller = root(256, "100, 512")
    assert taller["PREC"] == "tf32x3" and taller.get("ALIGN") == 1, taller


_LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({k}, {n})

    def forward(self, x):
        return torch.tanh(self.fc(x))


def get_inputs():
    return [torch.randn({m}, {k})]


def get_init_inputs():
    return []
"""


def test_a_small_linear_starts_on_tf32x3_tiles_that_fill_the_sms():
    """Below BIG_MATMUL an fp32 product whose B is K-contiguous (nn.Linear's W.T: tf32x3 copies nothing)
    starts on tf32x3 dots, in 64 x 64 tiles where 128 x 128 ones would leave SMs idle: on an H100 IEEE dots ran
    at 0.18-0.73x cuBLAS for level 3's ViT and RNN Linear layers, tf32x3 64 x 64 at 0.57-1.62x. An 8-row
    product with a long K (split-K before) is one grouped launch."""

    def root(m: int, k: int, n: int) -> tuple[str, dict]:
        source = _LINEAR.format(m=m, k=k, n=n)
        sched = schedule(analyze_cached(source, f"linear_{m}_{k}_{n}").graph)
        kern = next(x for x in sched.triton_kernels() if x.family == "matmul")
        info = kernel_info(sched, kern)
        design = default_design(info)
        return design.name, default_config(design, info)

    tile = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "PREC", "KMAJOR")
    design, vit = root(394, 512, 1536)  # 48 tiles of 128 x 128 for 132 SMs
    assert design == "grouped" and tuple(vit[t] for t in tile) == (64, 64, 32, 4, "tf32x3", 1), vit
    design, rnn = root(8, 1280, 256)
    assert design == "grouped" and (rnn["PREC"], rnn["BLOCK_N"]) == ("tf32x3", 64), (design, rnn)
    design, tall = root(1536, 256, 1536)  # 144 tiles of 128 x 128: they fill the SMs
    assert tuple(tall[t] for t in tile) == (128, 128, 32, 8, "tf32x3", 1), tall
    # aligned copies where rows are unaligned at run time (ALIGN_MIN: an odd size at 2.5x the product's time)
    assert vit.get("ALIGN") == 1 and tall.get("ALIGN") == 1, (vit, tall)
    assert "ALIGN" not in rnn  # 2.6 M multiply-adds: a copy would be most of the product
