"""Do the offline writer's programs compile for a GPU? Its root program for every task of the suites,
compiled for the target without a GPU (hardware.compile.feedback: real ptxas, registers, spills, shared
memory), for suites the CPU interpreter cannot verify (bf16 `tl.dot` is wrong there).

    python benchmarks/compile_suite.py [SUITE ...] [--target nvidia-h200] [--json OUT]

SUITE: a bundled suite name (default: level1_bf16 level2_bf16) or a folder of tasks. Nothing runs on a GPU
and no output is checked: this finds compile errors and resource use, not correctness or speed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelwright.hardware.compile.feedback import compile_for_target
from kernelwright.hardware.targets import get_target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import suite_roots  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suites", nargs="*", default=["level1_bf16", "level2_bf16"])
    ap.add_argument("--target", default="nvidia-h200")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    target = get_target(args.target)
    rows = []
    for name, path, answer in suite_roots(args.suites, target):
        if not answer.code:
            rows.append({"task": name, "ok": False, "why": f"no program: {answer.unsupported}"})
            print(f"{name}: no program", flush=True)
            continue
        report = compile_for_target(answer.code, path, target, timeout_s=300)
        header = answer.code.splitlines()[0].removeprefix("# kernelwright:").strip()
        rows.append(
            {"task": name, "ok": report.ok, "design": header, "report": report.model_dump(mode="json")}
        )
        print(f"{name} [{header}]\n  " + report.summary().replace("\n", "\n  "), flush=True)
    print(f"{sum(r['ok'] for r in rows)}/{len(rows)} compile for {target.name}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
