# Calls 2 and 3 of 2026-12-02 (thirteenth session): the strict fp32 levels after the direct launches (eleventh session) and the flattened persistent
# GEMM and narrow stores (twelfth), for issue 17's "stays >= 1.15x / >= 1.5x torch.compile" (last measured
# 1.166x and 1.537x on 2026-11-30). Two device calls: the second continues the first's bench folder
# (carry the returned bench.tgz as .bench.tgz).
#   call 1: BENCH_S=480 BENCH_ARGS="tasks/level1 tasks/level2 --budget 4 --seed 0" bash benchmarks/results/next/not_run_fp32_levels.sh
#   call 2: BENCH_S=480 BENCH_TGZ=.bench.tgz bash benchmarks/results/next/not_run_fp32_levels.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
BENCH_DIR=/tmp/kw-fp32 OUT=$OUT bash benchmarks/bench_device.sh
