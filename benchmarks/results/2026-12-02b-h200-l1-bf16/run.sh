# One device call (fourteenth session): finish the level-1 bench of the call before (level1/26 left; resumed
# from .bench.tgz, carried), then the bf16 suites at budget 4 after the half-precision rounding change
# (commits a8d32b6, 1545cbe). Last bf16: level2_bf16 1.25x, level1_bf16 1.14x torch.compile, 22/22 correct.
# Predicted: 22/22 correct, softmax/norm programs no slower.
#   bash benchmarks/results/next/run_l1_rest_and_bf16.sh   (with .bench.tgz in the repo root)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT
BENCH_S=120 BENCH_DIR=/tmp/kw-l1 BENCH_TGZ=.bench.tgz OUT=/tmp/o1 bash benchmarks/bench_device.sh
cp /tmp/o1/suite.md $OUT/l1_suite.md; tar -czf $OUT/l1.tgz -C /tmp o1
BENCH_S=360 BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level2_bf16 tasks/level1_bf16 --budget 4 --seed 0" OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/bf16_suite.md; tar -czf $OUT/bf16.tgz -C /tmp o2
