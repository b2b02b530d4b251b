# Not run (written at the end of the thirteenth session): what its CPU-only changes do on an H200.
#  1. the roofline stop that waits while torch.compile is faster (commit f04ec48): the strict fp32 level 1
#     at budget 4 (last: 1.18x torch.compile, call 4 of results/2026-12-02-h200-fp32-after-fixes/, where
#     level1/12, 13, 18 and 26 stopped after one kernel at 0.97-0.98x). Predicted: those four reach
#     0.99-1.05x with 2-4 more evaluations each; level 1 ~1.19x.
#  2. half-precision rounding where torch rounds (commits a8d32b6, 1545cbe): the bf16 suites at budget 4
#     (last: level2_bf16 1.25x, level1_bf16 1.14x torch.compile, 22/22 correct). Predicted: 22/22 correct,
#     softmax/norm programs no slower (fewer conversions).
# One call each (~5-6 min):
#   PART=1 bash benchmarks/results/next/not_run_after_thirteenth.sh
#   PART=2 bash benchmarks/results/next/not_run_after_thirteenth.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
if [ "${PART:-1}" = 1 ]; then
  BENCH_S=420 BENCH_DIR=/tmp/kw-l1 BENCH_TGZ=none BENCH_ARGS="tasks/level1 --budget 4 --seed 0" OUT=$OUT bash benchmarks/bench_device.sh
else
  BENCH_S=420 BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level2_bf16 tasks/level1_bf16 --budget 4 --seed 0" \
    OUT=$OUT bash benchmarks/bench_device.sh
fi
