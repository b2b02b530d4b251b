# run2: two_pass (Inductor's schedule: the row re-read from cache, evict_last then evict_first) beat row_registers on
# level1_bf16/12 (0.068 vs 0.071 ms) and 11 (0.071 at 8 warps vs 0.077). The fused bf16 norms of level2_bf16 (04
# layer norm + GELU, 05 RMS norm * SiLU(gate), rows of 8192) before any default changes. Predicted: two_pass at
# 8192 / 8 warps / EVICT=1 within -2..+6% of the root on both.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host3.txt
V='row_registers;two_pass:BLOCK_R=8192,BLOCK_M=1,num_warps=8,EVICT=1,STATIC=1;two_pass:BLOCK_R=4096,BLOCK_M=1,num_warps=16,EVICT=1,STATIC=1'
V="$V;two_pass:BLOCK_R=8192,BLOCK_M=1,num_warps=16,EVICT=1,STATIC=1"
python3 benchmarks/design_sweep.py --tasks level2_bf16/04,level2_bf16/05 --variants "$V" --time-budget-s 150 --out /tmp/ds3 > $OUT/sweep3.log 2>&1
cp /tmp/ds3/design_sweep.md $OUT/design_sweep3.md; cp /tmp/ds3/design_sweep.json $OUT/design_sweep3.json; grep "norm" $OUT/design_sweep3.md
