# level2_bf16 at budget 4 after the word taps (same warm machine as sweep_words.sh, the next call):
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD && BENCH_S=330 BENCH_DIR=/tmp/kw-l2b BENCH_TGZ=none BENCH_ARGS="tasks/level2_bf16 --budget 4 --seed 0" OUT=/tmp/o3 bash benchmarks/bench_device.sh
