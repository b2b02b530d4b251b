# Two benches in one device call (fourteenth session):
#  1. strict fp32 level 1 at budget 4, after the roofline stop that waits while torch.compile is faster
#     (commit f04ec48). Last: 1.18x torch.compile, where level1/12, 13, 18 and 26 stopped after one kernel at
#     0.97-0.98x. Predicted: those four 0.99-1.05x with 2-4 more evaluations each; level 1 ~1.19x.
#  2. the five standalone published convolutions at budget 3 with `direct` first for published/36 (design
#     sweep of this session: 1.69 ms, 1.09x torch.compile, against flat-K's 2.13). Last: 1.47-1.48x.
#     Predicted: 36 ~1.05-1.09x, the five ~1.53x.
#   bash benchmarks/results/next/run_fp32_and_convs.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT
BENCH_S=330 BENCH_DIR=/tmp/kw-l1 BENCH_TGZ=none BENCH_ARGS="tasks/level1 --budget 4 --seed 0" OUT=/tmp/o1 bash benchmarks/bench_device.sh
cp /tmp/o1/suite.md $OUT/l1_suite.md; tar -czf $OUT/l1.tgz -C /tmp o1
BENCH_S=200 BENCH_DIR=/tmp/kw-conv BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/3[2-6]_*.py | tr '\n' ' ') --budget 3 --seed 0" OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/conv_suite.md; tar -czf $OUT/conv.tgz -C /tmp o2
