# Ran 2026-12-04 06:39-06:46 UTC (twenty-first session; written in the twentieth). Of its outputs, t24_suite.md/json did not come back (more than 8 files): t24_suite.* here are from the second call (gemm-overlap/run1.sh part 2, the same bench).
#   bash benchmarks/results/2026-12-04b-h200-after-bn-merge/run.sh
# 1. level2/24's host work with the running statistics updated in the statistics kernel (one launch fewer)
#    against the tree before it (revert_bn_merge.patch), interleaved twice. Predicted: host per call -20..-35 us
#    (of 250-350), the judged time down by as much where the host bounds it.
# 2. level2/24 and level2_bf16/24 benched (budget 4): predicted fp32 0.383 -> 0.33-0.36 ms, bf16 ~0.20-0.25.
# 3. level 1 at budget 4 (last 1.20x torch.compile on 2026-12-02, before the fp32 word pairs and ONE_DEPTH).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
D=benchmarks/results/2026-12-04b-h200-after-bn-merge
rm -rf /tmp/old && mkdir /tmp/old && cp -r . /tmp/old/ && (cd /tmp/old && patch -s -p1 < $D/revert_bn_merge.patch) || exit 1
for round in 1 2; do
  for tree in old new; do
    dir=$PWD; [ $tree = old ] && dir=/tmp/old
    (cd $dir && PYTHONPATH=/tmp/site:$dir timeout 60 python3 benchmarks/host_vs_gpu.py --tasks level2/24,level2_bf16/24 \
      --after-profiler --out $OUT/hvg_${tree}_$round.json 2>&1 | grep candidate | sed "s/^/$tree $round /")
  done
done | tee $OUT/hvg.txt
export PYTHONPATH=/tmp/site:$PWD
BENCH_S=120 BENCH_DIR=/tmp/kw-24 BENCH_TGZ=none BENCH_ARGS="tasks/level2/24_conv2d_depthwise_batchnorm_relu6.py tasks/level2_bf16/24_conv2d_depthwise_batchnorm_relu6.py --budget 4 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh
cp /tmp/o1/suite.md $OUT/t24_suite.md; cp /tmp/o1/suite.json $OUT/t24_suite.json
BENCH_S=$((560 - SECONDS)) BENCH_DIR=/tmp/kw-l1 BENCH_TGZ=none BENCH_ARGS="tasks/level1 --budget 4 --seed 0" \
  OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/level1_suite.md; cp /tmp/o2/suite.json $OUT/level1_suite.json; cp /tmp/o2/bench.tgz $OUT/level1_bench.tgz
