# Session 12, call 5: both bf16 suites after the flattened persistent GEMM became the default (commit 9523514).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; git log -1 --format=%h > $OUT/commit.txt; date -u >> $OUT/commit.txt
BENCH_S=380 BENCH_DIR=/tmp/kw-bf16 BENCH_ARGS="tasks/level2_bf16 tasks/level1_bf16 --budget 4 --seed 0" OUT=$OUT/b bash benchmarks/bench_device.sh > /dev/null 2>&1
cp $OUT/b/suite.md $OUT/ 2>/dev/null; tail -3 $OUT/b/bench-*.log
cd /tmp && tar -czf $OUT/bench.tgz --exclude='memory' kw-bf16/suite.json kw-bf16/suite.md kw-bf16/tasks.jsonl $(cd /tmp && ls -d kw-bf16/runs/*/*/ 2>/dev/null | sed 's#$#evaluations.jsonl#') $(cd /tmp && ls -d kw-bf16/runs/*/*/ 2>/dev/null | sed 's#$#kernel.py#') 2>/dev/null
cp $OUT/b/host.txt $OUT/b/bench-*.log $OUT/; rm -rf $OUT/b; date -u >> $OUT/commit.txt; ls $OUT
