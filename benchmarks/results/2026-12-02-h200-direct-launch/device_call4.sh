set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt
timeout 120 python3 -m pytest -q tests/kernels/test_launch_gpu.py -p no:cacheprovider > $OUT/launch_gpu.txt 2>&1; tail -3 $OUT/launch_gpu.txt
T=level2_bf16/20,level2_bf16/27,level2_bf16/24,level2_bf16/09,level2_bf16/10
cd benchmarks
KERNELWRIGHT_DIRECT_LAUNCH=0 timeout 200 python3 host_vs_gpu.py --tasks $T --out $OUT/jit.json > $OUT/jit.log 2>&1
timeout 200 python3 host_vs_gpu.py --tasks $T --out $OUT/direct.json > $OUT/direct.log 2>&1
python3 - $OUT <<'PY'
import json,sys
for name in ('jit','direct'):
    d=json.load(open(f'{sys.argv[1]}/{name}.json')); n=d['noop_host_ms']; print(name,'noop',round(n,3))
    for t in d['tasks']:
        if 'error' in t: print(t['task'], t['error']); continue
        print(' ', t['task'], 'err', round(t['max_err_over_rms'],4), *[(k, 'host', round(t[k]['host_ms'],3), 'gpu', round(t[k]['gpu_ms'],3), 'judged', round(t[k]['judged_ms'],3), round(t[k]['judged_p20_ms'],3), round(t[k]['judged_p80_ms'],3)) for k in ('candidate','eager')])
PY
