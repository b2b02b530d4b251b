# Third call: level1_bf16 at budget 4 with the cooperative schedule the default for plain half-precision products
# with K > 1024 (14, 15, 17), ping-pong where K <= 1024 (16).
# Predicted: 14/15 ~1.02-1.03x eager, 17 1.00-1.01x (0.98x in the last bench), the rest within their spread of the
# last bench (twenty-fourth session: level1_bf16 1.26x eager / 1.17x torch.compile), so ~1.17-1.18x.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv) > $OUT/host3.txt
export PYTHONPATH=/tmp/site:$PWD
BENCH_S=400 BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level1_bf16 --budget 4 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh > $OUT/bench3.log 2>&1
cp /tmp/o1/suite.md $OUT/suite3.md; cp /tmp/o1/suite.json $OUT/suite3.json; cp /tmp/o1/bench.tgz $OUT/bench3.tgz; tail -4 $OUT/bench3.log
