# Issue 16's warm-vs-cold figure where the cold search has room: strict fp32 level 1 (26 tasks) at budget 8
# (level 2 at budget 8 needs ~12 device minutes a pass: more than this session has for two passes). Call 1
# of 2: the cold pass (--memory fresh), then the fp32 word-pair probe of depthwise planes with what is left.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
PASS=cold SUITES=tasks/level1 BUDGET=8 BENCH_S=430 OUT=$OUT bash benchmarks/warm_cold_device.sh
rm -f $OUT/tasks-cold.jsonl
P=/tmp/probe; mkdir -p $P
timeout 50 python3 benchmarks/depthwise_words_probe.py --dtype float32 --shape 16,64,512,512 --out $P > $P/fp32_512.log 2>&1
mv $P/depthwise_words_float32.json $P/fp32_512.json 2>/dev/null
timeout 40 python3 benchmarks/depthwise_words_probe.py --dtype float32 --out $P > $P/fp32_112.log 2>&1
tar -czf $OUT/probe.tgz -C /tmp probe
tail -8 $P/fp32_512.log $P/fp32_112.log
