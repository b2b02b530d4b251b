#!/usr/bin/env bash
# One device call of the thirty-third session. STAGE picks the work:
#   a       10 and 16 (300 s limit) in the background; ResNet18's host time against kernel time
#           (benchmarks/probes/model_profile.py); correctness (no timing) of 1-9, 11-15, 17-23, five at a time.
#   b       48 and 49 in the background, then 31 alone; the plain-attribute GPU test; correctness of 24-30, 32-35,
#           38, 43-47 and 50, five at a time.
#   hostprof  where the stitched ResNet18's host time goes: model_profile.py with cProfile over 10 calls, again
#           with the direct launch off (every launch through Triton's JIT), then 8 and 21.
#   tiles   (prepared for a later call) ResNet18 with its 128 x 128 convolution tiles as written, 64 x 64 and 32 x 64.
#   variants  benchmarks/probes/unseen_variants.py on the three lowest unseen/searched ratios of the unseen call.
#   unseen  `kernelwright bench --budget 2 --memory fresh` (unseen sizes on by default) on TASKS until END_S.
# Every stage judges the models stitched with shared kernels (.l3c/l3.tgz, written at e2a09b9).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
END=${END_S:-560}
mkdir -p .l3 && tar -xzf .l3c/l3.tgz -C .l3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.txt
git log -1 --format=%h > $OUT/commit.txt 2>/dev/null
J=benchmarks/level3_first_programs.py
left() { echo $(( END - ($(date +%s) - T0) )); }
judge() {  # judge OUT_NAME JOBS LIMIT MODELS...: correctness only, until the call's end
  local name=$1 jobs=$2 limit=$3; shift 3
  python3 $J judge "$@" --kb .l3/kb --stitched .l3/stitched --out $OUT/$name --no-time -j $jobs --limit-s $limit \
    --stage-timeout $(( limit - 20 )) --deadline-s $(( $(left) - 15 )) > $OUT/$name.log 2>&1
}
case ${STAGE:-a} in
a)
  judge big 2 320 10 16 &
  timeout 110 python3 benchmarks/probes/model_profile.py .l3/kb .l3/stitched 9 --out $OUT/profile.jsonl \
    > $OUT/profile.log 2>&1; echo "profile exit $?"; tail -25 $OUT/profile.log
  judge small 5 150 1 2 3 4 5 6 7 8 9 11 12 13 14 15 17 18 19 20 21 22 23
  wait ;;
b)
  ( judge mamba 2 200 48 49; judge vit 1 200 31 ) &
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_region_plain_attribute.py -k on_the_gpu \
    > $OUT/plain_gpu.log 2>&1; echo "plain test exit $?"; tail -3 $OUT/plain_gpu.log
  judge rest 4 150 24 25 26 27 28 29 30 32 33 34 35 38 43 44 45 46 47 50
  wait ;;
hostprof)
  P="python3 benchmarks/probes/model_profile.py .l3/kb .l3/stitched"
  timeout 150 $P 9 --cprofile 10 --out $OUT/hostprof.jsonl > $OUT/hostprof.log 2>&1; echo "exit $?" >> $OUT/hostprof.log
  KERNELWRIGHT_DIRECT_LAUNCH=0 timeout 100 $P 9 --out $OUT/hostprof_jit.jsonl > $OUT/hostprof_jit.log 2>&1
  timeout 80 $P 8 21 --cprofile 10 --out $OUT/hostprof.jsonl >> $OUT/hostprof.log 2>&1
  grep -v Warn $OUT/hostprof.log $OUT/hostprof_jit.log | cut -c1-220 ;;
tiles)  # prepared, not run this session: ResNet18's late convolutions (8-14 programs on 132 SMs) on smaller tiles
  P="python3 benchmarks/probes/model_profile.py .l3/kb .l3/stitched 9 --out $OUT/tiles.jsonl"
  T="BM, BN, BK = (128, 128, 32)"
  timeout 150 $P > $OUT/tiles.log 2>&1
  timeout 120 $P --sub "$T=>BM, BN, BK = (64, 64, 32)" >> $OUT/tiles.log 2>&1
  timeout 120 $P --sub "$T=>BM, BN, BK = (32, 64, 32)" >> $OUT/tiles.log 2>&1
  grep -v Warn $OUT/tiles.log | cut -c1-220 ;;
variants)
  PYTHONPATH=.:$PYTHONPATH timeout $(( $(left) - 10 )) python3 benchmarks/probes/unseen_variants.py --out /tmp/uv --tasks ${VTASKS:-level1/25 level1/20 level2/04} \
    > $OUT/variants.log 2>&1; echo "exit $?"; cp /tmp/uv/unseen_variants.json $OUT/ 2>/dev/null
  python3 -c "import json,sys; [print(c['task'], c['sizes'], 'eager', c['eager_ms'], {k: v.get('ms', v.get('error')) for k, v in c['variants'].items()}) for c in json.load(open(sys.argv[1]))['cases']]" $OUT/unseen_variants.json ;;
unseen)
  timeout -s TERM -k 20 $(left) python3 -m kernelwright bench ${TASKS} --budget 2 --memory fresh --out /tmp/bench \
    > $OUT/bench.log 2>&1; echo "bench exit $?"
  cp /tmp/bench/suite.json /tmp/bench/suite.md $OUT/ 2>/dev/null; tail -5 $OUT/bench.log ;;
esac
for d in $OUT/*/; do [ -f $d/table.md ] && cut -c1-200 $d/table.md; done
# at most eight files come back: the judges' folders and logs as one archive
tar -czf $OUT/judged.tgz -C $OUT $(cd $OUT && ls -d */ *.log 2>/dev/null) && rm -rf $OUT/*/ $OUT/*.log
