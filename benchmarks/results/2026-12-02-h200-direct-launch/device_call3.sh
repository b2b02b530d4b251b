set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt 2>/dev/null
cd benchmarks && timeout 300 python3 host_vs_gpu.py --profile --tasks level2_bf16/27,level2_bf16/20,level2_bf16/24 --out $OUT/prof.json > $OUT/prof.log 2>&1
echo "exit $?" >> $OUT/prof.log
python3 -c "
import json;d=json.load(open('$OUT/prof.json'));n=d['noop_host_ms'];print('noop',n)
for t in d['tasks']:
  c=t['candidate'];print(t['task'], round(c['host_ms'],3), round(c['gpu_ms'],3), round(c['judged_ms'],3));print('\n'.join(c['profile'][:45]))
"
