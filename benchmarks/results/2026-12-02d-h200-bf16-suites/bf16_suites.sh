# Not run (written in the fifteenth session after its device time was spent): both bf16 suites at budget 4
# after this session's two convolution changes (geometry as compile-time constants, commit a6ad787: 5-17%
# faster fp32 GEMM-design convolutions; depthwise planes of 4096 pixels over 4 warps first where a norm
# follows, level2_bf16/24 0.343 -> 0.313 ms in the sweep). Last: level2_bf16 1.16x, level1_bf16 1.17x
# torch.compile, 22/22 correct (fourteenth session).
# Predicted: 22/22 correct; level2_bf16 09 and 10 (implicit GEMM) 3-8% faster, 24 ~0.31 ms, 20 and 27 (host-
# bound on the lent machine) within their spread; level2_bf16 1.17-1.22x; level1_bf16 unchanged (no conv).
# The bench may need a second call: resume it by carrying $OUT/bf16.tgz as .bench.tgz (bench_device.sh).
#   bash benchmarks/results/next/not_run_bf16_suites.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT
BENCH_S=500 BENCH_DIR=/tmp/kw-bf16 BENCH_TGZ=none BENCH_ARGS="tasks/level2_bf16 tasks/level1_bf16 --budget 4 --seed 0" OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/bf16_suite.md; cp /tmp/o2/suite.json $OUT/bf16_suite.json; cp /tmp/o2/bench.tgz $OUT/bf16.tgz
