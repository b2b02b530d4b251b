"""Written programs at sizes their search never saw, with one launch choice varied, timed on a GPU.

    python benchmarks/probes/unseen_variants.py --out DIR [--reps N] [--tasks SPEC ...]

`kernelwright bench --unseen` judged level-1 best kernels at other sizes (2026-12-05, H200) and some ran far
below their searched speedup there: the square matmul searched at 8192^2 ran 0.39x eager at 6143^2, softmax
searched at 4096 x 16384 ran 0.63x eager at 5120 x 20480 (rows past the single-pass limit take the looped
fallback), argmax over the middle dim searched at 128 x 4096 x 256 ran 0.33x at 95 x 3071 x 191. For each
case this writes the offline writer's first program at the task's own (traced) size, as a search's root is,
runs it on the task resized to the unseen size, and times it as written and with one launch line replaced
(text substitutions on the program). Each variant's output is checked against the task's Model (largest error
over the reference's RMS). Eager is timed on the same inputs. One JSON file: DIR/unseen_variants.json.
--tasks runs only the cases of those tasks (e.g. level1/25); --last N only the last N cases.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from _common import cuda_event_times, cuda_models, environment, load_program, max_err_over_rms, task_path

ROOT = Path(__file__).resolve().parents[2]
ALIGN_OFF = [("    a = _kw_align(a)\n", ""), ("    b = _kw_align(b)\n", "")]
# rows past 8192 through row_registers' looped fallback: as written (1024-wide blocks), 4096-wide, and as the
# two_pass design launches its loops (4096-wide blocks, 16 warps)
REGISTERS_8192 = ("single = npow <= 16384", "single = npow <= 8192")
FALLBACK_4096 = ("if single else 1024", "if single else 4096")
FALLBACK_4096_16 = [
    REGISTERS_8192,
    FALLBACK_4096,
    ("num_warps = 4 if BLOCK_M * BLOCK_R < 2048 else (8 if BLOCK_M * BLOCK_R < 8192 else 16)",
     "num_warps = (4 if BLOCK_M * BLOCK_R < 2048 else (8 if BLOCK_M * BLOCK_R < 8192 else 16)) if single else 16"),
]  # fmt: skip
WIDE_ROW_FALLBACKS = {
    "single up to 8192": [REGISTERS_8192],
    "single up to 8192, fallback BLOCK_R 4096": [REGISTERS_8192, FALLBACK_4096],
    "single up to 8192, fallback BLOCK_R 4096 with 16 warps": FALLBACK_4096_16,
}
# 2026-12-06 (thirty-seventh session): the same fallback given two_pass's eviction hints (EVICT: the statistics passes keep the row in L2,
# the writing pass streams it) and its row length compiled in (STATIC), and the registers limit where a padded row
# loses to it (rows of 10240 and 12288 pad to 16384; 16384 is the whole register row with no padding)
HINTED = {"RMAX": 8192, "BLOCK_R": 4096, "EVICT": 1}
SIXTEEN_WARPS = [FALLBACK_4096_16[2]]
WIDE_ROW_HINTS = {
    "single up to 8192, fallback BLOCK_R 4096, hints": {"design": "row_registers", "config": HINTED},
    "... and 16 warps": {"design": "row_registers", "config": HINTED, "subs": SIXTEEN_WARPS},
    "... and STATIC": {"design": "row_registers", "config": {**HINTED, "STATIC": 1}},
    "... and 16 warps and STATIC": {"design": "row_registers", "config": {**HINTED, "STATIC": 1},
                                    "subs": SIXTEEN_WARPS},
}  # fmt: skip
# level2/10's channel sum in one tile as wide as the channels' power of two (before 01ea730's chunks)
WHOLE_CHANNELS = ("BN = max(16, min(_kw_npow2(CT0), 128))", "BN = max(16, _kw_npow2(CT0))")
WINDOWS_OFF = ("while WS0 * 2 <= PW0", "while False and WS0 * 2 <= PW0")
# the split as before (2026-12-07 third call): wherever the tiles were fewer than two programs per SM
SPLIT_NEAR_WAVE = ("grid[0] * grid[1] < SMS0 and ", "")
PERSIST_21 = {"design": "implicit_gemm", "config": {"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4,
                                                   "num_stages": 3, "PERSIST": 2}}  # fmt: skip
# an implicit GEMM's first conv stage with its channel and K blocks as before _kw_fit_block
FIT_N, FIT_K = "BN = _kw_fit_block(CT0, BN, 16, 16)", "BK = _kw_fit_block(CIN_P, BK, 16, 8)"
FIT_N_OFF = (FIT_N, "BN = max(16, min(BN, _kw_npow2(CT0)))")
FIT_K_OFF = (FIT_K, "BK = max(16, min(BK, _kw_npow2(CIN_P)))")


def PLANE(px: int, fitted: bool) -> list[tuple[str, str]]:  # noqa: N802 (a constant's maker)
    """level2/24's two plane-tile stages at `px`-pixel tiles (written at 2048), their width fitted to the plane
    (_kw_plane_w, as written) or as before it (the narrowest power of two covering a row, at most 128)."""
    subs = []
    for i in (0, 1):
        written = f"BW = _kw_plane_w(R{i}, S{i}[2], 2048, 128)"
        before = f"BW = min(128, {px}, _kw_npow2(S{i}[2]))"
        subs.append((written, f"BW = _kw_plane_w(R{i}, S{i}[2], {px}, {min(128, px)})" if fitted else before))
    return subs + [("min(2048 // BW", f"min({px} // BW")]


Variant = list[tuple[str, str]] | dict[str, Any]
"""Text substitutions on the written program, or {"design": D, "config": {...}, "subs": [...]}: the program
written as design D (with those substitutions on it)."""
CASES: list[tuple[str, dict[str, int], dict[str, Variant]]] = [
    (
        "level1/10",
        {"batch_size": 5120, "dim": 20480},
        {"as written": [], "online design": {"design": "online"}},
    ),
    ("level1/14", {"N": 6143}, {"as written (ALIGN=1)": [], "ALIGN off": ALIGN_OFF}),
    ("level1/15", {"M": 6143, "K": 1535, "N": 6143}, {"as written (ALIGN=1)": [], "ALIGN off": ALIGN_OFF}),
    (
        "level1/09",
        {"batch_size": 5120, "dim": 20480},
        {
            "as written": [],
            "fallback BLOCK_R 2048": [("if single else 1024", "if single else 2048")],
            "fallback BLOCK_R 4096": [("if single else 1024", "if single else 4096")],
            "fallback BLOCK_R 8192": [("if single else 1024", "if single else 8192")],
            "single up to 32768": [("single = npow <= 16384", "single = npow <= 32768")],
            "online design": {"design": "online"},
            "two_pass design": {"design": "two_pass"},
        },
    ),
    (
        "level1/11",
        {"batch_size": 10240, "dim": 10240},
        {
            "as written": [],
            "two_pass design": {"design": "two_pass"},
            "welford design": {"design": "welford"},
        },
    ),
    (
        "level1/08",
        {"batch_size": 95, "dim1": 3071, "dim2": 191},
        {
            "as written": [],
            "BLOCK_I 16": [("BLOCK_I = min(64,", "BLOCK_I = min(16,")],
            "BLOCK_I 32": [("BLOCK_I = min(64,", "BLOCK_I = min(32,")],
            "BLOCK_I 128": [("BLOCK_I = min(64,", "BLOCK_I = min(128,")],
        },
    ),
    # 2026-12-06, H100: the lowest unseen/searched ratios of bench --unseen 2 on level1 16-26 and level2 04-06
    (
        "level1/25",
        {"batch_size": 5120, "dim": 20480},
        {
            "as written": [],
            "single up to 32768": [("single = npow <= 16384", "single = npow <= 32768")],
            "fallback BLOCK_R 4096": [("if single else 1024", "if single else 4096")],
        },
    ),
    (
        "level1/20",
        {"batch_size": 40960, "num_classes": 5120},
        {
            "as written": [],
            "8 warps at 8192": [("else (8 if BLOCK_M * BLOCK_R < 8192 else 16)", "else 8")],
            "4 warps": [("num_warps = 4 if BLOCK_M * BLOCK_R < 2048", "num_warps = 4 if True")],
        },
    ),
    (
        "level2/04",
        {"batch_size": 20480, "dim": 10240},
        {
            "as written": [],
            "8 warps at 16384": [("else (8 if BLOCK_M * BLOCK_R < 8192 else 16)", "else 8")],
            "two_pass design": {"design": "two_pass"},
            **WIDE_ROW_FALLBACKS,
        },
    ),
    (
        "level1/11",
        {"batch_size": 10240, "dim": 10240},
        {
            "as written": [],
            "two_pass design": {"design": "two_pass"},
            **WIDE_ROW_FALLBACKS,
        },
    ),
    # 2026-12-06 (thirty-seventh session): the wide-row fallback with two_pass's hints, at three row lengths past 8192
    *[
        (spec, sizes, {"as written": [], "two_pass design": {"design": "two_pass"}, **WIDE_ROW_HINTS})
        for spec, sizes in [
            ("level1/11", {"batch_size": 10240, "dim": 10240}),
            ("level2/04", {"batch_size": 20480, "dim": 10240}),
            ("level1/11", {"batch_size": 8192, "dim": 12288}),
            ("level1/11", {"batch_size": 4096, "dim": 16384}),
            ("level1/12", {"batch_size": 10240, "dim": 10240}),
            ("level1/09", {"batch_size": 5120, "dim": 20480}),
        ]
    ],
    # ... and rows of 8192 in registers with 8 warps, not the 16 the tile rule gives (cross entropy at 5120 x 8192
    # ran 16% faster with 8 on the H100), in four families
    *[
        (
            spec,
            sizes,
            {
                "as written": [],
                "8 warps at 8192": [("else (8 if BLOCK_M * BLOCK_R < 8192 else 16)", "else 8")],
            },
        )
        for spec, sizes in [
            ("level1/11", {"batch_size": 8192, "dim": 8192}),
            ("level2/04", {"batch_size": 16384, "dim": 8192}),
            ("level1/12", {"batch_size": 8192, "dim": 8192}),
            ("level1/09", {"batch_size": 4096, "dim": 8192}),
            ("level1/20", {"batch_size": 32768, "num_classes": 8192}),
        ]
    ],
    # 2026-12-06 (thirty-eighth session, H200): conv3d + softmax over channels + two pools ran 0.24x eager at this
    # size (1.17 ms; the traced size 1.18x): 2,662 pooled rows, each program looping 64 window positions x 27 taps.
    # As written now (db43c01) the window positions are split across programs where the tiles are few; the
    # variants: not split (as before), and the SM fill down to 16-row tiles
    *[
        (
            "level2/21",
            sizes,
            {
                "as written": [],
                "windows not split": [WINDOWS_OFF],
                "split up to a wave too (before)": [SPLIT_NEAR_WAVE],
                "SM fill down to BLOCK_M 16": [("while BM > 32 and", "while BM > 16 and")],
                # the search's best at the searched size (2026-12-07, H100: 0.22x eager at the small size
                # unsplit, before persistent stages split their windows)
                "persistent (PERSIST=2)": PERSIST_21,
                "persistent, windows not split": {**PERSIST_21, "subs": [WINDOWS_OFF]},
            },
        )
        for sizes in [
            {"batch_size": 11, "in_channels": 11, "out_channels": 23, "depth": 13, "height": 49},
            {"batch_size": 16, "in_channels": 16, "out_channels": 32, "depth": 18, "height": 66},
        ]
    ],
    # ... and a convolution whose channel sum is fused: at 160 output channels (traced 128) the whole-channel tile
    # was 64 x 256 with 16-wide K steps (242 registers, one program per SM): 0.56x eager, the same convolution
    # without the sum (level2/09, 128 x 128 tiles) 1.11x. As written now (01ea730) the tile walks the channels in
    # 128-wide chunks; the variants: one whole-channel tile as before, and that tile's rows, warps and stages
    (
        "level2/10",
        {"batch_size": 80, "in_channels": 80, "out_channels": 160, "height": 160},
        {
            "as written": [],
            "one whole-channel tile": [WHOLE_CHANNELS],
            "one whole-channel tile, BLOCK_M 32": [
                WHOLE_CHANNELS,
                ("while BM * BN > 16384 and", "while BM * BN > 8192 and"),
            ],
            "one whole-channel tile, BLOCK_M 32, 4 warps": [
                WHOLE_CHANNELS,
                ("while BM * BN > 16384 and", "while BM * BN > 8192 and"),
                ("num_warps=8, num_stages=3", "num_warps=4, num_stages=3"),
            ],
        },
    ),
    # 2026-12-07 (thirty-ninth session): implicit-GEMM convolutions at unseen channel counts took the traced
    # size's channel and K blocks, clamped only to the sizes' powers of two: level2/26 (searched at 32 -> 64
    # channels, 64 x 64 x 32 tiles) ran 22.1 ms at 40 -> 80 (0.57x its searched speedup), where the 80 output
    # channels took two 64-wide tiles and each tap's 40 channels two 32-wide K steps: 2.6x the MMA work the sizes
    # need. As written now both blocks are fitted (_kw_fit_block); the variants: the blocks as before, each fit
    # alone, the least padding (no per-block cost), and a wider pixel tile with the narrower channel tile.
    # level2/26 at its searched size is the control (the fit keeps 64 x 32 there).
    *[
        (
            spec,
            sizes,
            {
                "as written (blocks fitted)": [],
                "blocks as before": [FIT_N_OFF, FIT_K_OFF],
                "channel block fitted only": [FIT_K_OFF],
                "K block fitted only": [FIT_N_OFF],
                "least padding": [
                    (FIT_N, FIT_N.replace(", 16)", ", 0)")),
                    (FIT_K, FIT_K.replace(", 8)", ", 0)")),
                ],
                **(
                    {"fitted, BLOCK_M 128": [("BM, BN, BK = 64, 64, 32", "BM, BN, BK = 128, 64, 32")]}
                    if spec == "level2/26"
                    else {}
                ),
            },
        )
        for spec, sizes in [
            (
                "level2/26",
                {
                    "batch_size": 20,
                    "in_channels": 40,
                    "out_channels": 80,
                    "depth": 20,
                    "height": 80,
                    "width": 80,
                },
            ),
            ("level2/09", {"batch_size": 80, "in_channels": 80, "out_channels": 160, "height": 160}),
            ("level2/09", {"batch_size": 47, "in_channels": 47, "out_channels": 95, "height": 95}),
            (
                "level2/26",
                {
                    "batch_size": 16,
                    "in_channels": 32,
                    "out_channels": 64,
                    "depth": 16,
                    "height": 64,
                    "width": 64,
                },
            ),
        ]
    ],
    # ... and a depthwise conv's plane tiles (level2/24, searched at 112 x 112: 0.41x its searched speedup at
    # 83 x 83 and 140 x 140): the first call of 2026-12-07 timed 4096-pixel tiles of 32 x 128 (the default then)
    # against smaller tiles and fitted widths; written now at 2048 pixels, width fitted. The variants: the old
    # default, 2048 with the old width, 1024 fitted
    *[
        (
            "level2/24",
            sizes,
            {
                "as written (2048, width fitted)": [],
                "2048, width as before": PLANE(2048, False),
                "4096, width as before (the default before)": PLANE(4096, False),
                "1024, width fitted": PLANE(1024, True),
            },
        )
        for sizes in [
            {"batch_size": 23, "channels": 95, "height": 83},
            {"batch_size": 40, "channels": 160, "height": 140},
            {"batch_size": 32, "channels": 128, "height": 112},  # the searched size
        ]
    ],
    # the new default's known risk: the bf16 task ran 0.313 ms on 4096-pixel tiles against 0.343 on 2048 at its
    # searched size (H200, 2026-12-02)
    (
        "level2_bf16/24",
        {"batch_size": 32, "channels": 128, "height": 112},
        {
            "as written (2048, width fitted)": [],
            "4096, width as before (the default before)": PLANE(4096, False),
            "4096, width fitted": PLANE(4096, True),
        },
    ),
]


def _median_ms(module: Any, inputs: list[Any], reps: int) -> float:
    return statistics.median(cuda_event_times(lambda: module(*inputs), warmup=3, reps=reps))


def run_case(spec: str, sizes: dict[str, int], variants: dict[str, Variant], out: Path,
             reps: int) -> dict[str, Any]:  # fmt: skip
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from fakes.writer import writer_prompt

    from kernelwright.providers.offline.choice.variants import program_variant
    from kernelwright.providers.offline.writer import write_program
    from kernelwright.tasks.module import exec_task_module
    from kernelwright.tasks.resize import with_sizes

    source = task_path(spec).read_text(encoding="utf-8")
    program = write_program(writer_prompt(source)).code
    resized = with_sizes(source, sizes)
    mod = exec_task_module(resized, "unseen_task")
    entry: dict[str, Any] = {"task": spec, "sizes": sizes, "header": program.splitlines()[0], "variants": {}}
    eager_ms = None
    for label, subs in variants.items():
        code = program
        if isinstance(subs, dict):
            try:
                code = program_variant(source, "t", subs["design"], subs.get("config")).code
            except Exception as exc:
                entry["variants"][label] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
                continue
            subs = subs.get("subs", [])
        for old, new in subs:
            if old not in code:
                entry["variants"][label] = {"error": f"text not in the program: {old!r}"}
                break
            code = code.replace(old, new)
        else:
            try:
                name = f"v_{spec.replace('/', '_')}_{len(entry['variants'])}"
                prog = load_program(code, out / f"{name}.py")
                ref, new, inputs = cuda_models(mod, prog, seed=0)
                with torch.no_grad():
                    err = max_err_over_rms(new(*inputs), ref(*inputs))
                    ms = _median_ms(new, inputs, reps)
                    if eager_ms is None:
                        eager_ms = _median_ms(ref, inputs, reps)
                entry["variants"][label] = {"ms": ms, "err_over_rms": err, "vs_eager": eager_ms / ms}
            except Exception as exc:
                entry["variants"][label] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            torch.cuda.empty_cache()
    entry["eager_ms"] = eager_ms
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--tasks", nargs="*", help="only these tasks' cases (default: every case)")
    parser.add_argument(
        "--last", type=int, default=0, help="only the last N cases (of those --tasks selects)"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"environment": environment("cuda"), "cases": []}
    cases = [case for case in CASES if not args.tasks or case[0] in args.tasks]
    for spec, sizes, variants in cases[-args.last :] if args.last else cases:
        entry = run_case(spec, sizes, variants, args.out, args.reps)
        results["cases"].append(entry)
        print(json.dumps(entry), flush=True)
        (args.out / "unseen_variants.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
