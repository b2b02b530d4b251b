"""Where a conv launcher's Python goes, by part of its forward (CPU, no kernel runs).

    PYTHONPATH=$PWD python benchmarks/results/2026-12-02b-cpu-conv-host-segments/host_segments.py 20_conv

The root program of the matching level2_bf16 task, its Triton kernels replaced by no-ops (as
benchmarks/host_overhead.py does), with perf_counter checkpoints added to its `_kw_forward`: after the
convolution's geometry, before each stage, at the return. Called on meta tensors of the task's full input
shapes; prints the median of each part over 2000 calls, in microseconds.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, "benchmarks")
import host_overhead  # noqa: E402
from _common import suite_roots  # noqa: E402

from kernelwright.hardware.targets import get_target  # noqa: E402


def with_checkpoints(code: str) -> str:
    """The program with `_T.append(time.perf_counter())` at each part's start and `_TIMES` collecting them."""
    out: list[str] = []
    inside = False
    for line in code.split("\n"):
        stripped = line.strip()
        if line.startswith("def _kw_forward"):
            inside = True
            out += [line, "    _T = [time.perf_counter()]"]
            continue
        if inside and (stripped.startswith("# stage") or stripped.startswith("xk = ")):
            out.append("    _T.append(time.perf_counter())")
        if inside and stripped.startswith("return "):
            out.append("    _T.append(time.perf_counter()); _TIMES.append(_T)")
            inside = False
        out.append(line)
    return "import time\n_TIMES = []\n" + "\n".join(out)


def main() -> None:
    want = sys.argv[1]
    name, path, answer = next(
        r for r in suite_roots(["level2_bf16"], get_target("nvidia-h200")) if want in r[0]
    )
    module, model, inputs = host_overhead.meta_model(
        with_checkpoints(answer.code), path, Path(tempfile.mkdtemp())
    )
    for _ in range(300):
        model(*inputs)
    module._TIMES.clear()
    for _ in range(2000):
        model(*inputs)
    times = module._TIMES
    parts = [
        round(statistics.median((t[i + 1] - t[i]) * 1e6 for t in times), 1) for i in range(len(times[0]) - 1)
    ]
    total = round(statistics.median((t[-1] - t[0]) * 1e6 for t in times), 1)
    print(name, "parts (us, median):", parts, "total", total)


if __name__ == "__main__":
    main()
