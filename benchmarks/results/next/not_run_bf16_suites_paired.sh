# Not run (written in the twenty-first session, its device time spent). One call of ~9 min (carry .whl), and a
# second if the bench stops at BENCH_S (copy the first call's bench.tgz into the tree, carry it, and run
# `BENCH_TGZ=<it> bash benchmarks/bench_device.sh`: it resumes):
#   bash benchmarks/results/next/not_run_bf16_suites_paired.sh
# Both bf16 suites at budget 4 with this session's two changes: the writer's two programs per SM for short-K
# half-precision products (level1_bf16/15 and /16, level2_bf16/06 start there) and the judge's torch.compile
# baseline timed in paired rounds with eager (every baseline timed again: the cache key changed).
# Predicted: level1_bf16/16 0.93x -> 0.96-0.97x eager, 15 0.99x -> 1.00-1.01x, level2_bf16/06 2-5% faster than
# its 0.448 ms of 2026-12-02; the suites' geomeans vs torch.compile within a few % of 1.14x / 1.29x, their
# per-task vs-compile figures closer to vs-eager / (torch.compile's own paired speedup) than before.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
export PYTHONPATH=/tmp/site:$PWD
BENCH_S=520 BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level1_bf16 tasks/level2_bf16 --budget 4 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh > $OUT/bench.log 2>&1
cp /tmp/o1/suite.md $OUT/suite.md; cp /tmp/o1/suite.json $OUT/suite.json; cp /tmp/o1/bench.tgz $OUT/bench.tgz; tail -4 $OUT/bench.log
