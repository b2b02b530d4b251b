# Session 12, call 1: does a profiler session left attached (CUPTI) slow a host-bound forward, and does the judge
# pay it? Then the judge's GPU tests (direct-launch candidates written last session, not run yet).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt; date -u >> $OUT/host.txt
cd benchmarks
timeout 60 python3 host_vs_gpu.py --tasks level2_bf16/20,level2_bf16/01 --out $OUT/plain.json > $OUT/plain.log 2>&1
timeout 60 python3 host_vs_gpu.py --after-profiler --tasks level2_bf16/20,level2_bf16/01 --out $OUT/prof.json > $OUT/prof.log 2>&1
timeout 220 python3 judge_host_bias.py --task level2_bf16/20 --rounds 2 --out $OUT/bias.json > $OUT/bias.log 2>&1
grep -h '"round"' $OUT/bias.log
cd ..
timeout 180 python3 -m pytest -q tests/kernels/test_judge_gpu.py tests/kernels/test_launch_gpu.py -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1; tail -5 $OUT/gpu_tests.txt
python3 - $OUT <<'PY'
import json,sys
for name in ('plain','prof'):
    try: d=json.load(open(f'{sys.argv[1]}/{name}.json'))
    except Exception as e: print(name, e); continue
    print(name,'noop',round(d['noop_host_ms'],3))
    for t in d['tasks']:
        if 'error' in t: print(t['task'], t['error']); continue
        print(' ', t['task'], *[(k, 'host', round(t[k]['host_ms'],3), 'gpu', round(t[k]['gpu_ms'],3), 'judged', round(t[k]['judged_ms'],3), round(t[k]['judged_p20_ms'],3), round(t[k]['judged_p80_ms'],3)) for k in ('candidate','eager')])
PY
date -u >> $OUT/host.txt
