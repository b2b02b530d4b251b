# Third call. (1) level2/24's first program was judged at 0.406 ms in run2's bench (p20-p80 0.376-0.480, the
# judge's wall clock 0.34 ms per call) where the eighteenth session's sweep timed it at 0.318: is its judged time
# the host's? host_vs_gpu.py times the root programs judged / GPU-only / host. (2) the whole bf16 level-2 suite
# at budget 4 after ONE_DEPTH and the fp32 word pairs (last measured 2026-12-02 at 1.24x torch.compile).
#   bash benchmarks/results/2026-12-04-h200-after-one-depth/run3.sh     (carry .whl; ~8 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
timeout 150 python3 benchmarks/host_vs_gpu.py --tasks level2/24,level2_bf16/24,published/32 --compile --after-profiler \
  --out $OUT/host_vs_gpu.json > $OUT/host_vs_gpu.log 2>&1; echo "host_vs_gpu rc $?" >> $OUT/host_vs_gpu.log
BENCH_S=$((540 - SECONDS)) BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level2_bf16 --budget 4 --seed 0" \
  OUT=/tmp/o3 bash benchmarks/bench_device.sh
cp /tmp/o3/suite.md $OUT/level2_bf16_suite.md; cp /tmp/o3/suite.json $OUT/level2_bf16_suite.json; cp /tmp/o3/bench.tgz $OUT/level2_bf16_bench.tgz
