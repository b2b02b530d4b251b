#!/usr/bin/env bash
# One device call for the judge: its GPU tests (transport, timing cross-checks, evidence) and the
# evaluation overhead with a fresh candidate process per candidate. Results land in $OUT.
set -u
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
uname -r > "$OUT/host.txt"; nvidia-smi -L >> "$OUT/host.txt" 2>&1
python3 -c 'import kernelwright.hardware.isolation.confine as c; print("landlock abi", c.landlock_abi())' >> "$OUT/host.txt" 2>&1
timeout ${T_TEST:-240} python3 -m pytest -q -s -p no:cacheprovider tests/kernels/test_judge_gpu.py 2>&1 | tee "$OUT/judge_gpu.log" | grep -E "^[a-z].*: |passed|failed|Error" | tail -20
timeout ${T_OVER:-240} python3 benchmarks/eval_overhead.py --out "$OUT" --device cuda --warm ${WARM:-3} --cold 0 --throughput ${THRU:-30} 2>&1 | tail -12
