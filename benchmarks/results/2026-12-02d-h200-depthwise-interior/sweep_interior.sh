# Not run (written in the fifteenth session after its device time was spent): depthwise plane tiles with
# INTERIOR=1 (commit 2fb5809): a tile whose taps all lie inside the input loads
# without masks. sm_90 SASS of published/32's conv kernel (benchmarks/sass_counts.py, instructions per output,
# masked / interior path): 1024 x 128 106 / 68, 1024 x 64 99 / 64, 2048 x 128 91 / 52; interior tiles are
# 48%, 70% and 47% of each plane. The planes' counts tracked their times on level2_bf16/24 this session.
# Predicted: published/32 (1.42 ms, 1.34x torch.compile) 10-20% faster with INTERIOR at 1024 x 64 or 1024 x 128;
# level2/24 (112 columns: no interior tile at 128-wide planes) unchanged.
#   bash benchmarks/results/next/not_run_depthwise_interior.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1,num_warps=4'
V=""
for t in "1024,128" "1024,64" "2048,64" "2048,128"; do
  IFS=, read m w <<< "$t"; V="$V;$P,BLOCK_M=$m,BLOCK_W=$w,INTERIOR=0;$P,BLOCK_M=$m,BLOCK_W=$w,INTERIOR=1"; done
cd benchmarks
timeout 260 python3 design_sweep.py --time-budget-s 230 --out /tmp/dw32 --tasks published/32 --variants "${V#;}" > $OUT/dw32.log 2>&1
timeout 150 python3 design_sweep.py --no-compile --time-budget-s 120 --out /tmp/dw24 --tasks level2/24 \
  --variants "$P,BLOCK_M=4096,BLOCK_W=128,INTERIOR=0;$P,BLOCK_M=4096,BLOCK_W=128,INTERIOR=1;$P,BLOCK_M=1024,BLOCK_W=32,INTERIOR=1" > $OUT/dw24.log 2>&1
cat /tmp/dw32/design_sweep.md /tmp/dw24/design_sweep.md > $OUT/design_sweep.md; cp /tmp/dw32/design_sweep.json $OUT/dw32.json; cat $OUT/design_sweep.md
