#!/usr/bin/env bash
# device call 1: every level-3 model stitched from the offline writer's first programs (written on the CPU by
# `level3_first_programs.py write` into .l3/stitched, carried as .l3c/l3.tgz), judged on the GPU: first for
# correctness, six models at a time; then the correct ones one at a time with timing (eager, torch.compile)
set -u
export PYTHONUNBUFFERED=1
mkdir -p .l3 && tar -xzf .l3c/l3.tgz -C .l3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a $OUT/gpu.txt
python3 benchmarks/level3_first_programs.py judge --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c \
  --no-time -j ${JOBS:-6} --limit-s 200 --stage-timeout 150 --deadline-s ${CORRECT_S:-290} > $OUT/judge_correct.log 2>&1
echo "correctness exit $?"; cat $OUT/l3c/table.md | cut -c1-260
N=$(python3 -c "import json; print(' '.join(r['model'].split('_')[0] for r in map(json.loads, open('$OUT/l3c/rows.jsonl')) if r.get('correct')))")
echo "timing: $N"
[ -n "$N" ] || exit 0
python3 benchmarks/level3_first_programs.py judge $N --kb .l3/kb --stitched .l3/stitched --out $OUT/l3t \
  -j 1 --limit-s 120 --stage-timeout 90 --deadline-s ${TIMED_S:-220} > $OUT/judge_timed.log 2>&1
echo "timing exit $?"; cat $OUT/l3t/table.md | cut -c1-200
