#!/usr/bin/env bash
# One device call: measured ceilings, eager/torch.compile baselines vs the roofline floor, and the
# evaluation harness's overhead. Results land in $OUT (or ./bench-out); each step is bounded.
set -u
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c 'import torch,triton;print(torch.__version__,triton.__version__,torch.cuda.get_device_name())' >> "$OUT/gpu.txt"
timeout ${T_CEIL:-90} python3 benchmarks/ceilings.py --out "$OUT" 2>&1 | tail -20
timeout ${T_BASE:-330} python3 benchmarks/baselines.py --out "$OUT" --ceilings "$OUT/ceilings.json" --levels ${LEVELS:-level1,level2} 2>&1 | tail -60
timeout ${T_OVER:-150} python3 benchmarks/eval_overhead.py --out "$OUT" --device cuda 2>&1 | tail -30
ls -la "$OUT"
