"""The writer's root program for each bundled task, compiled for an H200 without a GPU at the task's own size and
at the two sizes `bench --unseen 2` picks on a GPU: which kernels spill (or fail) only at unseen sizes.

    python benchmarks/results/2026-12-05b-cpu-conv-align/sweep.py OUT.jsonl [SUITE ...]   (default level1 level2)

One JSON line per task: its program's header and, per size (None: its own), whether the compile was ok and each
kernel's (name, registers, spill store bytes, BLOCK_K, BLOCK_M, BLOCK_N). A copy of
../2026-12-05-cpu-unseen-spills/sweep.py that also records BLOCK_M and BLOCK_N.
"""

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from fakes.writer import writer_prompt  # noqa: E402

from kernelwright.bench.unseen import unseen_sizes  # noqa: E402
from kernelwright.hardware.compile.feedback import compile_for_target  # noqa: E402
from kernelwright.providers.offline.writer import write_program  # noqa: E402
from kernelwright.tasks import bundled_suite_dir  # noqa: E402


def sweep_task(suite: str, path: Path) -> dict | None:
    src = path.read_text()
    t0 = time.time()
    try:
        prog = write_program(writer_prompt(src)).code
    except Exception as exc:
        return {"task": f"{suite}/{path.stem}", "error": f"write: {exc}"[:200]}
    if not prog:
        return None
    rows: list[dict] = []
    sizes = [(None, src)]
    try:
        picked, _ = unseen_sizes(src, path.stem, 2, "cuda", None)
        sizes += [(u.sizes, u.source) for u in picked]
    except Exception as exc:
        rows.append({"unseen_error": str(exc)[:200]})
    for changed, source in sizes:
        try:
            report = compile_for_target(prog, source, shapes="full", timeout_s=300)
        except Exception as exc:
            rows.append({"sizes": changed, "exc": str(exc)[:200]})
            continue
        kernels = [
            (
                k.name,
                k.registers,
                k.spill_store_bytes,
                *(k.constexprs.get(b) for b in ("BLOCK_K", "BLOCK_M", "BLOCK_N")),
            )
            for k in report.kernels
        ]
        rows.append({"sizes": changed, "ok": report.ok, "err": report.error_kind or "", "kernels": kernels})
    return {"task": f"{suite}/{path.stem}", "header": prog.splitlines()[0][14:120], "rows": rows,
            "s": round(time.time() - t0, 1)}  # fmt: skip


def main() -> None:
    with open(sys.argv[1], "a") as out:
        for suite in sys.argv[2:] or ["level1", "level2"]:
            for path in sorted(bundled_suite_dir(suite).glob("*.py")):
                row = sweep_task(suite, path)
                if row is not None:
                    out.write(json.dumps(row) + "\n")
                    out.flush()


if __name__ == "__main__":
    main()
