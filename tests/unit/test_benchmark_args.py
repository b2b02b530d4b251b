"""Argument parsing of the benchmark scripts that take structured values (no benchmark runs here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _script(name: str):
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import their shared `_common` module
    try:
        spec = importlib.util.spec_from_file_location(f"kw_bench_{name}", BENCHMARKS / f"{name}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_design_sweep_variants_name_exactly_the_programs_to_measure():
    sweep = _script("design_sweep")
    got = sweep.parse_variants(
        "split:BLOCK_R=2048,num_stages=2; split:WRITE_CHUNKS=1;welford;two_pass:PREC=ieee"
    )
    assert [(v.design, v.config) for v in got] == [
        ("split", {"BLOCK_R": 2048, "num_stages": 2}),
        ("split", {"WRITE_CHUNKS": 1}),
        ("welford", {}),
        ("two_pass", {"PREC": "ieee"}),
    ]
    for bad in ("split:BLOCK_R", "split:=3", ":BLOCK_R=1"):
        with pytest.raises(SystemExit, match="--variants entry"):
            sweep.parse_variants(bad)


def test_conv_half_probe_configs_are_overrides_of_the_default_one_entry_each():
    probe = _script("probes/conv_half_probe")
    assert probe._parse_configs("") == [{}]
    assert probe._parse_configs(";PERSIST=2;design=implicit_gemm, BLOCK_N=64") == [
        {},
        {"PERSIST": "2"},
        {"design": "implicit_gemm", "BLOCK_N": "64"},
    ]


def test_a_task_spec_is_a_bundled_name_or_a_task_file(tmp_path):
    common = _script("_common")
    assert common.task_path("level1_bf16/16").name == "16_bmm.py"
    generated = tmp_path / "23_bmm_softmax.py"
    generated.write_text("# a task file\n")
    assert common.task_path(str(generated)) == generated
    for bad in ("level9/01", "level1/99", str(tmp_path / "missing.py")):
        with pytest.raises(SystemExit, match="expected level1/NN|no bundled task"):
            common.task_path(bad)


def test_sass_counts_reads_opcodes_and_kinds_from_a_cuobjdump_listing():
    sass = _script("sass_counts")
    listing = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                       /* 0x00000a00ff017b82 */
        /*0010*/              @!P0 LDG.E.U16 R4, desc[UR4][R2.64] ;             /* 0x000000040204a981 */
        /*0020*/                   FFMA R5, R4, R6, R5 ;                        /* 0x0000000604057223 */
        /*0030*/                   ISETP.GE.AND P0, PT, R0, 0x70, PT ;          /* 0x000000700000780c */
        /*0040*/               @P1 PLOP3.LUT P2, PT, P0, P1, PT, 0x80, 0x0 ;    /* 0x000000000000781c */
        /*0050*/                   NOP ;                                        /* 0x0000000000007918 */
        /*0060*/                   FFMA R7, R4, R6, R7 ;                        /* 0x0000000604077223 */
    """
    ops = sass.count_sass(listing)
    assert ops == {"LDC": 1, "LDG": 1, "FFMA": 2, "ISETP": 1, "PLOP3": 1}  # predicated ones too, NOP out
    assert sass.by_kind(ops) == {"fp32 math": 2, "predicate": 2, "other": 1, "global load": 1}
