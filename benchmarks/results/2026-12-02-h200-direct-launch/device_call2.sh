set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt 2>/dev/null; nproc >> $OUT/host.txt; lscpu | grep 'Model name' >> $OUT/host.txt
cd benchmarks && timeout 520 python3 host_vs_gpu.py --compile --tasks level2_bf16/20,level2_bf16/24,level2_bf16/27,level2_bf16/09,level2_bf16/11,level2_bf16/04,level2_bf16/01,level1_bf16/11,level1_bf16/16,level2_bf16/10 --out $OUT/host.json > $OUT/host.log 2>&1
echo "exit $?" >> $OUT/host.log
grep -v Warning $OUT/host.log | tail -40
