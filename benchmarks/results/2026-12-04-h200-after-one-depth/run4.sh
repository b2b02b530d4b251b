# Fourth call (same machine, warm): level2/24's root program's host work per forward, by function (cProfile).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
timeout 100 python3 benchmarks/host_vs_gpu.py --tasks level2/24,level2_bf16/24 --profile --after-profiler --out $OUT/profile.json > $OUT/profile.log 2>&1
