"""What a program's kernels compile to on a GPU this machine does not have: sm_90 SASS instructions by kind.

A CPU-side diagnostic beside kernel_times.py (which needs the GPU): it compiles every kernel one forward
launches for the target (hardware.compile.feedback.compile_for_target, at the task's full sizes), disassembles
the cubins with the cuobjdump shipped in Triton's wheel, and counts the static instructions of each kernel by
opcode and by kind (loads, stores, FMAs, predicates, integer and address arithmetic, conversions). For a
kernel without loops (the direct conv designs unroll their taps) the static count is what one program runs;
divide by the outputs a program writes per thread for instructions per output. It says where a kernel's
instructions go, not how fast it is: the figures RESULTS.md quotes come from the GPU.

Usage, from the repository root:
    python benchmarks/sass_counts.py TASK [--variant 'design:KEY=VAL,...'] [--program FILE] [--target T]
                                      [--out DIR] [--dump DIR]
TASK is a path or a bundled name (level2_bf16/24); without --variant or --program the writer's root program
is compiled. Prints one table per kernel and writes sass_counts.json under --out when given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import root_program, task_path  # noqa: E402

# Opcode (before its first dot) -> kind; anything else is "other".
KINDS = {
    "LDG": "global load", "LDS": "shared load", "LDSM": "shared load", "LDGSTS": "global load",
    "STG": "global store", "STS": "shared store",
    "FFMA": "fp32 math", "FADD": "fp32 math", "FMUL": "fp32 math", "FMNMX": "fp32 math", "FSEL": "select",
    "HMMA": "tensor core", "HGMMA": "tensor core", "IMMA": "tensor core",
    "ISETP": "predicate", "FSETP": "predicate", "PLOP3": "predicate", "P2R": "predicate", "R2P": "predicate",
    "IMAD": "integer / address", "IADD3": "integer / address", "LEA": "integer / address",
    "VIADD": "integer / address", "IABS": "integer / address", "SHF": "integer / address",
    "LOP3": "integer / address", "IMNMX": "integer / address",
    "PRMT": "conversion", "F2FP": "conversion", "F2F": "conversion", "I2F": "conversion", "F2I": "conversion",
    "SHFL": "warp shuffle", "BAR": "barrier",
}  # fmt: skip
_INSTR = re.compile(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)")


def count_sass(sass: str) -> Counter[str]:
    """Opcodes (without modifiers) of a cuobjdump -sass listing, NOPs (alignment padding) left out."""
    ops: Counter[str] = Counter()
    for line in sass.splitlines():
        m = _INSTR.match(line)
        if m and m.group(1) != "NOP":
            ops[m.group(1)] += 1
    return ops


def by_kind(ops: Counter[str]) -> dict[str, int]:
    kinds: Counter[str] = Counter()
    for op, n in ops.items():
        kinds[KINDS.get(op, "other")] += n
    return dict(kinds.most_common())


def _cuobjdump() -> str:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not path.exists():
        raise SystemExit(f"no cuobjdump at {path}: this script needs Triton's NVIDIA backend binaries")
    return str(path)


def compile_and_count(code: str, task: Any, target: str, keep: str = "") -> list[dict[str, Any]]:
    """Each kernel's name, registers, spills and SASS opcode counts, compiled for `target`; `keep`: a folder
    that keeps Triton's dump of every compile stage (.ttir, .ttgir, .llir, .ptx, .cubin per kernel)."""
    from kernelwright.hardware.compile.feedback import compile_for_target

    with tempfile.TemporaryDirectory(prefix="kw-sass-") as tmp:
        dump = keep or tmp
        env = {"TRITON_KERNEL_DUMP": "1", "TRITON_DUMP_DIR": dump, "TRITON_ALWAYS_COMPILE": "1"}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)  # compile_for_target's child processes inherit them
        try:
            report = compile_for_target(code, task, target)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        rows = []
        for k in report.kernels:
            cubins = sorted(Path(dump).rglob(f"{k.name}.cubin"), key=lambda p: p.stat().st_mtime)
            row: dict[str, Any] = {"kernel": k.name, "registers": k.registers, "spills": k.spills,
                                   "num_warps": k.num_warps, "error": k.error_brief}  # fmt: skip
            if cubins:
                sass = subprocess.run([_cuobjdump(), "-sass", str(cubins[-1])], capture_output=True, text=True,
                                      check=True).stdout  # fmt: skip
                ops = count_sass(sass)
                row.update(
                    instructions=sum(ops.values()), kinds=by_kind(ops), opcodes=dict(ops.most_common())
                )
            rows.append(row)
        return rows


def _program(args: argparse.Namespace, task: Any) -> str:
    from kernelwright.hardware.targets import get_target

    if args.program:
        return Path(args.program).read_text()
    if args.variant:
        from design_sweep import parse_variants  # beside this script, as _common is

        from kernelwright.providers.offline.choice.variants import program_variant

        (v,) = parse_variants(args.variant)
        return program_variant(task.source, task.name, v.design, v.config).code
    return root_program(task, get_target(args.target)).code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", help="task file or bundled name (level2_bf16/24)")
    ap.add_argument("--variant", default="", help="one 'design:KEY=VAL,...' program instead of the root")
    ap.add_argument("--program", default="", help="a program file instead of the root")
    ap.add_argument("--target", default="nvidia-h200")
    ap.add_argument("--out", default="", help="folder for sass_counts.json")
    ap.add_argument(
        "--dump", default="", help="keep Triton's IR of every kernel (layouts: .ttgir) in this folder"
    )
    args = ap.parse_args(argv)
    from kernelwright.tasks import load_task

    task = load_task(task_path(args.task))
    code = _program(args, task)
    print(code.splitlines()[0])
    rows = compile_and_count(code, task, args.target, args.dump)
    for r in rows:
        if "instructions" not in r:
            print(f"\n{r['kernel']}: not compiled ({r['error']})")
            continue
        print(f"\n{r['kernel']}: {r['instructions']} instructions, {r['registers']} registers, "
              f"{r['num_warps']} warps{', SPILLS' if r['spills'] else ''}")  # fmt: skip
        for kind, n in r["kinds"].items():
            print(f"  {kind:20s} {n:6d}  {100 * n / r['instructions']:5.1f}%")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "sass_counts.json").write_text(json.dumps({"task": args.task, "header": code.splitlines()[0],
                                                          "target": args.target, "kernels": rows}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
