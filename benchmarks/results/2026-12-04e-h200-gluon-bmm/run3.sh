# Third call: both bf16 suites at budget 4 with the ping-pong kernel in the writer (WS=5 the default for a plain
# half-precision product with K <= 1024: level1_bf16/16 only; WS in the search space of every plain one), then
# level1_bf16/16's root judged twice more on its own.
# Predicted: level1_bf16/16 1.00-1.04x eager (0.97x in the last bench), the other tasks within their spread of
# the last bench (2026-12-04, twenty-second session: level1_bf16 1.15x, level2_bf16 1.28x torch.compile), so
# level1_bf16 ~1.16x.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv) > $OUT/host3.txt
export PYTHONPATH=/tmp/site:$PWD
BENCH_S=420 BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level1_bf16 tasks/level2_bf16 --budget 4 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh > $OUT/bench3.log 2>&1
cp /tmp/o1/suite.md $OUT/suite3.md; cp /tmp/o1/suite.json $OUT/suite3.json; cp /tmp/o1/bench.tgz $OUT/bench3.tgz; tail -4 $OUT/bench3.log
export KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
tar xzf benchmarks/results/2026-12-04e-h200-gluon-bmm/programs2.tgz -C /tmp
for i in 1 2; do
  timeout 100 python3 -m kernelwright.graphs.cli eval --json tasks/level1_bf16/16_bmm.py /tmp/programs2/t16_ws5.py > /tmp/e$i.json 2> /dev/null
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('16_ws5 eval', sys.argv[2], r.get('correct'), 'run %s eager %s vs_eager %s ci %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci')))" /tmp/e$i.json $i
done 2>&1 | tee $OUT/judge3.txt
