#!/usr/bin/env bash
# One device call of the thirty-second session. STAGE picks the work:
#   correct  the plain-attribute GPU test, then correctness (no timing) for the models fixed since they were last
#            judged wrong (10 13 15 16 25 26 27), those with no verdict yet (24 31 43 45 48 49 50), six at a time,
#            the large ones (31 48 49) last and three at a time.
#   again    correctness for the models the first call's limits killed (10 16, three at a time with 31, which ran
#            out of memory beside Mamba2), then 48 alone (its harness failure), then timing of MODELS until END_S.
#   timed    timing, one model at a time, of MODELS (the models judged correct), until END_S.
#   profile  benchmarks/probes/model_profile.py on MODELS: host issue time against kernel time per forward.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
END=${END_S:-540}
mkdir -p .l3 && tar -xzf .l3c/l3.tgz -C .l3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.txt
git log -1 --format=%h > $OUT/commit.txt 2>/dev/null
J=benchmarks/level3_first_programs.py
left() { echo $(( END - ($(date +%s) - T0) )); }
case ${STAGE:-correct} in
correct)
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_region_plain_attribute.py -k on_the_gpu > $OUT/plain_gpu.log 2>&1
  echo "plain test exit $?"; tail -3 $OUT/plain_gpu.log
  python3 $J judge 10 13 15 16 25 26 27 24 43 45 50 --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c \
    --no-time -j 6 --limit-s 150 --stage-timeout 120 --deadline-s $(( $(left) - 130 )) > $OUT/judge_correct.log 2>&1
  python3 $J judge 31 48 49 --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c --no-time -j 3 --limit-s 110 \
    --stage-timeout 100 --deadline-s $(( $(left) - 10 )) >> $OUT/judge_correct.log 2>&1
  cut -c1-220 $OUT/l3c/table.md ;;
again)
  python3 $J judge 10 16 31 --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c --no-time -j 3 --limit-s 300 \
    --stage-timeout 280 --deadline-s 310 > $OUT/judge_correct.log 2>&1
  python3 $J judge 48 --kb .l3/kb --stitched .l3/stitched --out $OUT/l3c --no-time -j 1 --limit-s 120 \
    --stage-timeout 110 --deadline-s 125 >> $OUT/judge_correct.log 2>&1
  cut -c1-220 $OUT/l3c/table.md; grep -o '"error_end": "[^"]*' $OUT/l3c/rows.jsonl | cut -c1-1600
  ;&
timed)
  python3 $J judge ${MODELS} --kb .l3/kb --stitched .l3/stitched --out $OUT/l3t -j 1 --limit-s 120 \
    --stage-timeout 110 --deadline-s $(( $(left) - 10 )) > $OUT/judge_timed.log 2>&1
  cut -c1-200 $OUT/l3t/table.md ;;
profile)
  timeout $(( $(left) - 10 )) python3 benchmarks/probes/model_profile.py .l3/kb .l3/stitched ${MODELS} --out $OUT/profile.jsonl \
    > $OUT/profile.log 2>&1; cat $OUT/profile.log ;;
esac
