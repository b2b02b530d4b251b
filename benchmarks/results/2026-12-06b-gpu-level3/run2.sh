#!/usr/bin/env bash
# Device call 2: the plain-attribute test on a GPU, the BatchNorm running-statistics probe, correctness for the
# models call 1 did not reach or that changed (33 re-stitched, 38/41/42 loading faster), then 31, 48 and 49 two at
# a time (31 ran out of memory beside seven others; 48/49 had no float64 anchor), then timing in what is left.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
END=${END_S:-540}
mkdir -p .l3 && tar -xzf .l3c/l3.tgz -C .l3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.txt
D=benchmarks/results/2026-12-06b-gpu-level3
J=benchmarks/level3_first_programs.py
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_region_plain_attribute.py > $OUT/plain_gpu.log 2>&1; echo "plain test exit $?"; tail -3 $OUT/plain_gpu.log
timeout 60 python3 $D/bn_probe.py .l3/kb .l3/stitched 27 26 > $OUT/bn_probe.log 2>&1; echo "probe exit $?"; cut -c1-250 $OUT/bn_probe.log | head -40
KERNELWRIGHT_DIRECT_LAUNCH=0 timeout 40 python3 $D/bn_probe.py .l3/kb .l3/stitched 27 > $OUT/bn_probe_jit.log 2>&1; echo "probe (JIT launches) exit $?"; cut -c1-250 $OUT/bn_probe_jit.log | head -20
left=$(( END - ($(date +%s) - T0) ))
python3 $J judge 30 33 38 41 42 8 19 21 25 13 14 11 1 3 4 6 12 17 43 45 50 --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c \
  --no-time -j 6 --limit-s 150 --stage-timeout 120 --deadline-s $(( left * ${CORRECT_PCT:-50} / 100 )) > $OUT/judge_correct.log 2>&1
left=$(( END - ($(date +%s) - T0) ))
[ $left -gt 150 ] && python3 $J judge 31 48 49 --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c --no-time -j 2 --limit-s 100 --stage-timeout 90 \
  --deadline-s 110 >> $OUT/judge_correct.log 2>&1
cut -c1-220 $OUT/l3c/table.md
left=$(( END - ($(date +%s) - T0) ))
echo "timing with $left s left"
[ $left -gt 60 ] && python3 $J judge 4 5 18 28 46 47 44 32 2 9 23 22 20 7 29 --kb .l3/kb --stitched .l3/stitched --out $OUT/l3t -j 1 --limit-s 100 \
  --stage-timeout 90 --deadline-s $left > $OUT/judge_timed.log 2>&1
cut -c1-200 $OUT/l3t/table.md
