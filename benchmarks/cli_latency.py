"""How long the `kernelwright` command takes to answer without doing work: --help, --version, a bad flag,
and `memory stats` of an empty memory (the memory's imports).

    python benchmarks/cli_latency.py [--runs N] [--kw PATH]

Each command runs N times as a fresh process; prints min / median / max wall seconds per command.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EMPTY_MEMORY = tempfile.mkdtemp(prefix="kw-latency-memory-")
COMMANDS = (
    ["--help"],
    ["--version"],
    ["optimize", "--help"],
    ["optimize", "x.py", "--budget", "0"],
    ["memory", "stats", "--json", "--memory", EMPTY_MEMORY],
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kw", default=str(ROOT / ".venv" / "bin" / "kernelwright"))
    args = ap.parse_args()
    for cmd in COMMANDS:
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([args.kw, *cmd], capture_output=True, check=False)
            times.append(time.perf_counter() - t0)
        print(
            f"kernelwright {' '.join(cmd):<32} min {min(times):.3f}  median {statistics.median(times):.3f}  "
            f"max {max(times):.3f} s"
        )


if __name__ == "__main__":
    main()
