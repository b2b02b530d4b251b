set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt 2>/dev/null
BENCH_S=520 BENCH_DIR=/tmp/kw-bf16 BENCH_ARGS="tasks/level2_bf16 tasks/level1_bf16 --budget 4 --seed 0" OUT=$OUT/b bash benchmarks/bench_device.sh > /dev/null 2>&1
cp $OUT/b/bench.tgz $OUT/bench.tgz; cp $OUT/b/suite.md $OUT/ 2>/dev/null; cp $OUT/b/bench-*.log $OUT/bench.log 2>/dev/null
rm -rf $OUT/b
tail -45 $OUT/suite.md; tail -5 $OUT/bench.log
