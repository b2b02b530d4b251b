#!/usr/bin/env bash
# One device call. STEP=correct: every level-3 model stitched from the offline writer's first programs (written on
# the CPU by `level3_first_programs.py write` into .l3/stitched, carried as .l3c/l3.tgz), judged for correctness
# JOBS at a time, the slow ones (recurrences, Swin, big nets) first; then, in what is left of the call, the correct
# ones one at a time with timing. STEP=timed: only the timing, for the model numbers in $MODELS.
set -u
export PYTHONUNBUFFERED=1
mkdir -p .l3 && tar -xzf .l3c/l3.tgz -C .l3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a $OUT/gpu.txt
J=benchmarks/level3_first_programs.py
if [ "${STEP:-correct}" = correct ]; then
  ORDER="33 34 35 36 37 38 39 40 41 42 29 30 2 7 10 16 31 49 48 15 20 22 23 24 26 5 9 18 27 28 32 44 45 46 47 1 3 4 6 8 11 12 13 14 17 19 21 25 43 50"
  python3 $J judge $ORDER --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c --no-time -j ${JOBS:-8} \
    --limit-s 240 --stage-timeout 200 --deadline-s ${CORRECT_S:-330} > $OUT/judge_correct.log 2>&1
  echo "correctness exit $?"; cut -c1-220 $OUT/l3c/table.md
  MODELS=$(python3 -c "import json; print(' '.join(r['model'].split('_')[0] for r in map(json.loads, open('$OUT/l3c/rows.jsonl')) if r.get('correct')))")
fi
echo "timing: ${MODELS:-}"
[ -n "${MODELS:-}" ] || exit 0
python3 $J judge $MODELS --kb .l3/kb --stitched .l3/stitched --out $OUT/l3t -j 1 --limit-s 150 --stage-timeout 120 \
  --deadline-s ${TIMED_S:-200} > $OUT/judge_timed.log 2>&1
echo "timing exit $?"; cut -c1-200 $OUT/l3t/table.md
