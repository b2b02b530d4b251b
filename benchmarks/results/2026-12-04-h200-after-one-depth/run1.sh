# Not run (written in the eighteenth session, its device time spent). After ONE_DEPTH (commit 6e3c283: planes of
# one output depth skip the per-row division; published/32's first program 0.798 -> 0.605 ms, level2/24's 0.368
# -> 0.318 in a same-call sweep): the benches that contain plane programs, to see it through the search.
# Predicted: published convolutions 1.93x -> 2.0-2.1x torch.compile (32 at ~0.61 ms, 3.1x); strict fp32 level 2
# 1.69x -> 1.70-1.72x (24 alone moves, ~14%).
#   bash benchmarks/results/next/not_run_after_one_depth.sh     (carry .whl; ~8 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
BENCH_S=200 BENCH_DIR=/tmp/kw-conv BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/3[2-6]_*.py | tr '\n' ' ') --budget 3 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh
cp /tmp/o1/suite.md $OUT/conv_suite.md; cp /tmp/o1/suite.json $OUT/conv_suite.json
BENCH_S=$((570 - SECONDS)) BENCH_DIR=/tmp/kw-l2 BENCH_TGZ=none BENCH_ARGS="tasks/level2 --budget 4 --seed 0" \
  OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/level2_suite.md; cp /tmp/o2/suite.json $OUT/level2_suite.json; cp /tmp/o2/bench.tgz $OUT/level2_bench.tgz
