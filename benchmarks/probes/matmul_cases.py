"""Writes chosen matmul programs for the published large-K and irregular tasks, to judge one by one on a GPU.

The search at a small budget tries two or three configs; this writes the ones a question is about (split-K
with split-precision dots and more splits for K = 524288 (the root: IEEE dots, SPLIT_K=32), aligned operand copies for 8205 x 2949 x 5921 in fp32 and bf16) as
candidate files beside their task, for `benchmarks/probes/matmul_cases_device.sh` to judge with `kernelwright eval`.

    python benchmarks/probes/matmul_cases.py --out DIR       # DIR/<case>.py, DIR/tasks/*.py, DIR/cases.txt
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from kernelwright.hardware.targets import get_target
from kernelwright.providers.offline.choice.variants import program_variant
from kernelwright.tasks import load_task

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import root_program  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LARGE_K = ROOT / "tasks/published/23_matmul_large_k_256x524288x256.py"
IRREGULAR = ROOT / "tasks/published/24_matmul_irregular_8205x2949x5921.py"
X3 = {"PREC": "tf32x3", "KMAJOR": 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    tasks = args.out / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    for path in (LARGE_K, IRREGULAR):
        shutil.copy(path, tasks / path.name)
    bf16 = args.out / "bf16"
    subprocess.run([sys.executable, "-m", "kernelwright.cli.main", "tasks", "variant", "--dtype", "bfloat16",
                    "--out", str(bf16), str(IRREGULAR)], check=True, capture_output=True)  # fmt: skip
    shutil.move(str(bf16 / IRREGULAR.name), tasks / f"bf16_{IRREGULAR.name}")
    bf16.rmdir()
    k23, k24 = load_task(LARGE_K), load_task(IRREGULAR)
    h24 = load_task(tasks / f"bf16_{IRREGULAR.name}")
    cases = {  # name: (task file, program)
        "23_splitk_x3_k8": (LARGE_K.name, program_variant(k23.source, k23.name, "split_k", {**X3, "SPLIT_K": 8})),
        "23_splitk_x3_k16": (LARGE_K.name, program_variant(k23.source, k23.name, "split_k", {**X3, "SPLIT_K": 16})),
        "23_splitk_x3_nokmajor_k16": (
            LARGE_K.name,
            program_variant(k23.source, k23.name, "split_k", {"PREC": "tf32x3", "KMAJOR": 0, "SPLIT_K": 16}),
        ),
        "23_splitk_x3_nokmajor_k32": (
            LARGE_K.name,
            program_variant(k23.source, k23.name, "split_k", {"PREC": "tf32x3", "KMAJOR": 0, "SPLIT_K": 32}),
        ),
        "23_splitk_x3_nokmajor_k64": (
            LARGE_K.name,
            program_variant(k23.source, k23.name, "split_k", {"PREC": "tf32x3", "KMAJOR": 0, "SPLIT_K": 64}),
        ),
        "23_splitk_ieee_k8": (LARGE_K.name, program_variant(k23.source, k23.name, "split_k", {"SPLIT_K": 8})),
        "24_grouped_x3_align": (IRREGULAR.name, program_variant(k24.source, k24.name, "grouped", {**X3, "ALIGN": 1})),
        "24_persist_x3_align": (
            IRREGULAR.name,
            program_variant(k24.source, k24.name, "persistent", {**X3, "ALIGN": 1}),
        ),
        "24_grouped_ieee_align": (
            IRREGULAR.name,
            program_variant(k24.source, k24.name, "grouped", {"PREC": "ieee", "KMAJOR": 0, "ALIGN": 1, "BLOCK_K": 16}),
        ),
        "24_bf16_tma": (f"bf16_{IRREGULAR.name}", program_variant(h24.source, h24.name, "grouped", {"TMA": 1, "ALIGN": 0})),
        "24_bf16_tma_align": (
            f"bf16_{IRREGULAR.name}",
            program_variant(h24.source, h24.name, "grouped", {"TMA": 1, "ALIGN": 1}),
        ),
        "root_23": (LARGE_K.name, root_program(k23, get_target("nvidia-h200"))),
        "root_24": (IRREGULAR.name, root_program(k24, get_target("nvidia-h200"))),
    }  # fmt: skip
    lines = []
    for name, (task, answer) in cases.items():
        (args.out / f"{name}.py").write_text(answer.code)
        lines.append(f"{name} tasks/{task}")
        print(f"{name}: {answer.code.splitlines()[0][15:]}")
    (args.out / "cases.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
