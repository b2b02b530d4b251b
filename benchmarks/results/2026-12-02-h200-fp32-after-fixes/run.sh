# After the candidate process took the judge's precision switches (cuDNN TF32 off in strict) and the writer
# stopped starting from lost steps and from designs that won for other ops: the judge's GPU tests, then the
# strict fp32 level 1 at budget 4 (1.14x torch.compile before) with level2/07 and level2/21 after it.
#   BENCH_S=400 bash benchmarks/results/2026-12-02-h200-fp32-after-fixes/run.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT
OUT=$OUT timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_judge_gpu.py > $OUT/judge_gpu.log 2>&1
tail -3 $OUT/judge_gpu.log
BENCH_DIR=/tmp/kw-fp32b BENCH_TGZ=none \
  BENCH_ARGS="tasks/level1 tasks/level2/07_sum_middle_tanh.py tasks/level2/21_conv3d_softmax_maxpool_maxpool.py --budget 4 --seed 0" \
  OUT=$OUT bash benchmarks/bench_device.sh
