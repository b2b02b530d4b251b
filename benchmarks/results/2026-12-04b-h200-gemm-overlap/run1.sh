# One device call (2026-12-04, twenty-first session; carry .whl):
# 1. benchmarks/gemm_overlap_probe.py on the programs in programs.tgz (written on CPU: the main tree's root and
#    two-per-SM variants, the TMA_STORE patch's tree for tma_store). Predicted: the bmm (level1_bf16/16) 2-6%
#    faster with one of them, the long-K GEMMs (15, 17) within 1%.
# 2. level2/24 and level2_bf16/24 benched again at budget 4 (the first call's per-task figures did not come back).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=benchmarks/results/2026-12-04b-h200-gemm-overlap
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
tar xzf $R/programs.tgz -C /tmp
timeout 300 python3 benchmarks/gemm_overlap_probe.py --time /tmp/gp --out $OUT/gemm_overlap_probe.json 2>&1 | grep -v Warning | tee $OUT/probe.log
BENCH_S=150 BENCH_DIR=/tmp/kw-24 BENCH_TGZ=none BENCH_ARGS="tasks/level2/24_conv2d_depthwise_batchnorm_relu6.py tasks/level2_bf16/24_conv2d_depthwise_batchnorm_relu6.py --budget 4 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh > $OUT/t24_bench.log 2>&1
cp /tmp/o1/suite.md $OUT/t24_suite.md; cp /tmp/o1/suite.json $OUT/t24_suite.json; tail -3 $OUT/t24_bench.log
