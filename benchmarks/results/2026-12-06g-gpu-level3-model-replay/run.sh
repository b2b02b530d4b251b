#!/usr/bin/env bash
# One device call of the thirty-fifth session. STAGE picks the work:
#   replay  ResNet18's host time with the stitched regions' launches replayed (the default) and without
#           (KERNELWRIGHT_REPLAY=0), then 8 and 21 with replay; then ResNet18's convolution tiles 64x64, 32x64.
#   a / b   correctness (no timing) of every level-3 model with a kernel, in two calls, as the thirty-third
#           session's run.sh did, with replay on.
#   correct the same in one call: 10 and 16 two at a time beside the rest JOBS (default 7) at a time.
#   sweep   (with AGAIN: those models' correctness first, three at a time) the GPU launch tests, ResNet18's profile (cProfile over 10 calls; again with replay off if NOREPLAY is set),
#           then model_profile.py on REGIONS with KERNELWRIGHT_MODEL_REPLAY=0 and on MODELS, one at a time (40 s each
#           at most): eager against stitched wall.
#   again   correctness of AGAIN one at a time.
#   time    the judge with timing on MODELS (default: every model the correctness calls found correct), one at a time.
#   variants  benchmarks/probes/unseen_variants.py on VTASKS.
#   unseen  `kernelwright bench --budget 2 --memory fresh` (unseen sizes on by default) on TASKS until END_S.
# Every stage judges the models in .l3c/l3.tgz (the results README names the commit they were stitched at).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
END=${END_S:-560}
mkdir -p .l3 && tar -xzf .l3c/${TGZ:-l3.tgz} -C .l3  # TGZ: another set of stitched models (and kb)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.txt
git log -1 --format=%h > $OUT/commit.txt 2>/dev/null
J=benchmarks/level3_first_programs.py
P="python3 benchmarks/probes/model_profile.py .l3/kb .l3/stitched"
left() { echo $(( END - ($(date +%s) - T0) )); }
judge() {  # judge OUT_NAME JOBS LIMIT MODELS...: correctness only, until the call's end
  local name=$1 jobs=$2 limit=$3; shift 3
  python3 $J judge "$@" --kb .l3/kb --stitched .l3/stitched --out $OUT/$name ${TIMING---no-time} -j $jobs --limit-s $limit \
    --stage-timeout $(( limit - 20 )) --deadline-s $(( $(left) - 15 )) > $OUT/$name.log 2>&1
}
case ${STAGE:-replay} in
replay)
  timeout 120 $P 9 --out $OUT/replay.jsonl > $OUT/replay.log 2>&1; echo "exit $?" >> $OUT/replay.log
  KERNELWRIGHT_REPLAY=0 timeout 100 $P 9 --out $OUT/noreplay.jsonl > $OUT/noreplay.log 2>&1
  timeout 100 $P 8 21 --out $OUT/replay.jsonl >> $OUT/replay.log 2>&1
  T="BM, BN, BK = (128, 128, 32)"
  timeout 100 $P 9 --sub "$T=>BM, BN, BK = (64, 64, 32)" --out $OUT/tiles.jsonl > $OUT/tiles.log 2>&1
  timeout $(( $(left) - 10 )) $P 9 --sub "$T=>BM, BN, BK = (32, 64, 32)" --out $OUT/tiles.jsonl >> $OUT/tiles.log 2>&1
  grep -v -i warn $OUT/replay.log $OUT/noreplay.log $OUT/tiles.log | grep -v "^ *_warn" | cut -c1-220 ;;
a)
  judge big 2 320 10 16 &
  judge small 5 150 1 2 3 4 5 6 7 8 9 11 12 13 14 15 17 18 19 20 21 22 23
  wait ;;
b)
  ( judge mamba 2 200 48 49; judge vit 1 200 31 ) &
  judge rest 4 150 24 25 26 27 28 29 30 32 33 34 35 38 43 44 45 46 47 50
  wait ;;
correct)
  judge big 2 320 10 16 &
  judge all ${JOBS:-7} 150 1 2 3 4 5 6 7 8 9 11 12 13 14 15 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 38 43 44 45 46 47 48 49 50
  wait ;;
sweep)
  [ -n "${AGAIN:-}" ] && judge again 3 200 ${AGAIN}  # correctness of AGAIN first, three at a time
  if [ -z "${NOPROFILE:-}" ]; then  # NOPROFILE: straight to MODELS
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_launch_gpu.py > $OUT/launch_gpu.log 2>&1; echo "launch tests exit $?"; tail -2 $OUT/launch_gpu.log
  timeout 120 $P 9 --cprofile 10 --out $OUT/profile.jsonl > $OUT/profile.log 2>&1
  [ -n "${NOREPLAY:-}" ] && KERNELWRIGHT_REPLAY=0 timeout 60 $P 9 --out $OUT/profile.jsonl >> $OUT/profile.log 2>&1
  grep -v -i warn $OUT/profile.log | grep -v "^ *_warn" | cut -c1-200 | head -40
  fi
  for m in ${REGIONS:-}; do  # REGIONS: these first with the model replay off (region by region, as before)
    KERNELWRIGHT_MODEL_REPLAY=0 timeout 40 $P $m --out $OUT/regions.jsonl >> $OUT/sweep.log 2>&1 || echo "$m: exit $?" >> $OUT/sweep.log
  done
  for m in ${MODELS}; do
    [ $(left) -lt 50 ] && { echo "stopped before $m: the call's time"; break; }
    timeout 40 $P $m --out $OUT/sweep.jsonl >> $OUT/sweep.log 2>&1 || echo "$m: exit $?" >> $OUT/sweep.log
  done
  grep -v -i warn $OUT/sweep.log | grep -v "^ *_warn" | cut -c1-200 ;;
again)
  judge again 1 200 ${AGAIN} ;;
time)
  TIMING= judge timed 1 ${LIMIT:-150} ${MODELS} ;;
variants)
  PYTHONPATH=.:$PYTHONPATH timeout $(( $(left) - 10 )) python3 benchmarks/probes/unseen_variants.py --out /tmp/uv --tasks ${VTASKS} \
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
