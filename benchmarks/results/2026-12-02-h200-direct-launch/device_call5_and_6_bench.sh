set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt 2>/dev/null
timeout 60 python3 -m pytest -q tests/kernels/test_launch_gpu.py -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1; tail -2 $OUT/gpu_tests.txt
BENCH_S=400 BENCH_DIR=/tmp/kw-bf16 BENCH_ARGS="tasks/level2_bf16 tasks/level1_bf16 --budget 4 --seed 0" OUT=$OUT/b bash benchmarks/bench_device.sh > /dev/null 2>&1
cp $OUT/b/bench.tgz $OUT/bench.tgz; cp $OUT/b/suite.md $OUT/ 2>/dev/null; cp $OUT/b/bench-*.log $OUT/bench.log 2>/dev/null
rm -rf $OUT/b
grep -A40 '^## Tasks' $OUT/suite.md | cut -c1-200; tail -3 $OUT/bench.log
