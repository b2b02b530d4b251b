# Second call: the fp32 level-2 bench of run1.sh stopped after 16 of 22 tasks (its 570 s were spent); resume it
# from its tarball (carried as runs/l2_part1.tgz), then the two bf16 level-2 tasks with plane programs (24, 27).
#   bash benchmarks/results/2026-12-04-h200-after-one-depth/run2.sh     (carry .whl, runs/l2_part1.tgz; ~6 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
BENCH_S=300 BENCH_DIR=/tmp/kw-l2 BENCH_TGZ=runs/l2_part1.tgz OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/level2_suite.md; cp /tmp/o2/suite.json $OUT/level2_suite.json; cp /tmp/o2/bench.tgz $OUT/level2_bench.tgz
BENCH_S=$((480 - SECONDS)) BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level2_bf16/24_conv2d_depthwise_batchnorm_relu6.py tasks/level2_bf16/27_conv1d_gelu_max_over_length.py --budget 4 --seed 0" \
  OUT=/tmp/o3 bash benchmarks/bench_device.sh
cp /tmp/o3/suite.md $OUT/bf16_planes_suite.md; cp /tmp/o3/suite.json $OUT/bf16_planes_suite.json
