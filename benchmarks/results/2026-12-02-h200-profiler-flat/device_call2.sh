# Session 12, call 2: which CUPTI setting takes a profiler session's cost off later host work (level2_bf16/20,
# 24 after three CUDA profiler sessions, as a candidate process runs them), and FLAT=1 against FLAT=0 for the
# persistent bf16 GEMM roots.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt; date -u >> $OUT/host.txt
cd benchmarks
T=level2_bf16/20,level2_bf16/24
timeout 60 python3 host_vs_gpu.py --tasks $T --out $OUT/c_plain.json > /tmp/c_plain.log 2>&1
timeout 60 python3 host_vs_gpu.py --after-profiler 3 --tasks $T --out $OUT/c_unset.json > /tmp/c_unset.log 2>&1
TEARDOWN_CUPTI=1 timeout 60 python3 host_vs_gpu.py --after-profiler 3 --tasks $T --out $OUT/c_td.json > /tmp/c_td.log 2>&1
TEARDOWN_CUPTI=1 DISABLE_CUPTI_LAZY_REINIT=1 timeout 60 python3 host_vs_gpu.py --after-profiler 3 --tasks $T --out $OUT/c_td_nolazy.json > /tmp/c_td_nolazy.log 2>&1
TEARDOWN_CUPTI=0 timeout 60 python3 host_vs_gpu.py --after-profiler 3 --tasks $T --out $OUT/c_td0.json > /tmp/c_td0.log 2>&1
tail -3 /tmp/c_*.log
python3 - $OUT <<'PY'
import json,sys,glob
for f in sorted(glob.glob(sys.argv[1]+'/c_*.json')):
    d=json.load(open(f)); print(f.split('/')[-1], d.get('cupti_env'), 'sessions', [round(x,2) for x in d.get('profiler_sessions_s',[])], 'noop', round(d['noop_host_ms'],3))
    for t in d['tasks']:
        if 'error' in t: print(t['task'], t['error']); continue
        print(' ', t['task'], *[(k, 'host', round(t[k]['host_ms'],3), 'gpu', round(t[k]['gpu_ms'],3), 'judged', round(t[k]['judged_ms'],3)) for k in ('candidate','eager')])
PY
timeout 230 python3 design_sweep.py --tasks level2_bf16/01,level1_bf16/14 --no-compile --time-budget-s 200 --out /tmp/flat --variants 'persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3,TMA=1;persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3,TMA=1,FLAT=1;persistent:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3,TMA=1,FLAT=1;persistent:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=4,TMA=1,FLAT=1' > /tmp/flat.log 2>&1
tail -12 /tmp/flat.log; cp /tmp/flat/design_sweep.json /tmp/flat/design_sweep.md $OUT/ 2>/dev/null
date -u >> $OUT/host.txt
