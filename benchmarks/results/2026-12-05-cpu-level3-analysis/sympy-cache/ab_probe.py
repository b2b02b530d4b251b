"""benchmarks/level3_analysis.py's analyse() on one level-3 model, with or without the writer's two caches.

Usage (KernelBench at /work/kb), from the repository root:
    SYMPY_CACHE_SIZE=1000 python ab_probe.py before N   # sympy's default cache, simplify not remembered
    python ab_probe.py after N
Prints one JSON row (model, signatures, programs, first_programs_s, total_s)."""

import glob
import json
import os
import sys
from pathlib import Path

mode, number = sys.argv[1], sys.argv[2]
if mode == "before":
    assert os.environ.get("SYMPY_CACHE_SIZE") == "1000", "run 'before' with SYMPY_CACHE_SIZE=1000"
    import sympy

    from kernelwright.providers.offline.frontend import ir

    ir._simplified = sympy.simplify  # type: ignore[assignment]
sys.path.insert(0, str(Path.cwd() / "benchmarks"))
analyse = __import__("level3_analysis").analyse
row = analyse(Path(glob.glob(f"/work/kb/KernelBench/level3/{number}_*.py")[0]))
keys = ("model", "signatures", "programs", "first_programs_s", "total_s")
print(json.dumps({"mode": mode} | {k: row.get(k) for k in keys}))
