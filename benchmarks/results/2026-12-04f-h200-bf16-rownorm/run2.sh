# Inductor's kernel for the bf16 RMS norm (run1: one program a row, R0_BLOCK = 8192, 16 warps, the row read twice,
# evict_last then evict_first) is the writer's two_pass design at BLOCK_R=8192, EVICT=1, STATIC=1, which the
# design_sweep of the twenty-fourth session never reached (its 14 programs were row_registers variants). Measured
# here beside the root for 12 and 11. Predicted: two_pass at 8192 / 16 warps / EVICT=1 within 2% of torch.compile
# (0.066 ms on 12), i.e. 3-6% ahead of row_registers (0.070).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host2.txt
V='row_registers;two_pass:BLOCK_R=8192,BLOCK_M=1,num_warps=16,EVICT=1,STATIC=1;two_pass:BLOCK_R=8192,BLOCK_M=1,num_warps=16,EVICT=0,STATIC=1'
V="$V;two_pass:BLOCK_R=8192,BLOCK_M=1,num_warps=8,EVICT=1,STATIC=1;two_pass:BLOCK_R=4096,BLOCK_M=1,num_warps=16,EVICT=1,STATIC=1"
python3 benchmarks/design_sweep.py --tasks level1_bf16/12,level1_bf16/11 --variants "$V" --time-budget-s 220 --out /tmp/ds > $OUT/sweep2.log 2>&1
cp /tmp/ds/design_sweep.md /tmp/ds/design_sweep.json $OUT/; tail -3 $OUT/sweep2.log; cat $OUT/design_sweep.md | grep "rms\|layer"
