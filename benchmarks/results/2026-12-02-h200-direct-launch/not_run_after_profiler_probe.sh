# Not run (no device time left in the session that wrote it): the next session's first call.
# Does a profiler session left attached (CUPTI) slow a host-bound forward, and does the judge pay it?
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt
cd benchmarks
timeout 60 python3 host_vs_gpu.py --tasks level2_bf16/20,level2_bf16/01 --out $OUT/plain.json > $OUT/plain.log 2>&1
timeout 60 python3 host_vs_gpu.py --after-profiler --tasks level2_bf16/20,level2_bf16/01 --out $OUT/prof.json > $OUT/prof.log 2>&1
timeout 300 python3 judge_host_bias.py --task level2_bf16/20 --rounds 2 --out $OUT/bias.json > $OUT/bias.log 2>&1
grep -h '"round"' $OUT/bias.log
