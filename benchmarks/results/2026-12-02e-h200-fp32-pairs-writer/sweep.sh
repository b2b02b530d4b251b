# fp32 depthwise planes with their taps read as 64-bit pairs (WORDS, extended to fp32 this session), after the
# probe (results/2026-12-02e-h200-fp32-pairs-probe/: the convolution alone -25% at 32x128x112^2, -34% at
# 16x64x512^2). sm_90 SASS (sass_counts.py): level2/24's conv + statistics stage (4096 x 128) 1873 -> 1517
# instructions, 128 -> 95 registers; published/32 (2048 x 64) 1746 -> 1366, 162 -> 72. Predicted: level2/24
# 0.370 -> 0.30-0.33 ms (the conv is about half of it), published/32 0.934 -> 0.65-0.75 ms.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1,num_warps=4'
cd benchmarks
timeout 120 python3 design_sweep.py --no-compile --time-budget-s 100 --out /tmp/s24 --tasks level2/24 \
  --variants "$P,BLOCK_M=4096,BLOCK_W=128,INTERIOR=0,WORDS=0;$P,BLOCK_M=4096,BLOCK_W=128,INTERIOR=0,WORDS=1;$P,BLOCK_M=2048,BLOCK_W=64,INTERIOR=1,WORDS=1;$P,BLOCK_M=4096,BLOCK_W=64,INTERIOR=1,WORDS=1" > $OUT/s24.log 2>&1
cp /tmp/s24/design_sweep.md $OUT/s24.md; cat $OUT/s24.md
timeout 150 python3 design_sweep.py --no-compile --time-budget-s 130 --out /tmp/s32 --tasks published/32 \
  --variants "$P,BLOCK_M=2048,BLOCK_W=64,INTERIOR=1,WORDS=0;$P,BLOCK_M=2048,BLOCK_W=64,INTERIOR=1,WORDS=1;$P,BLOCK_M=4096,BLOCK_W=128,INTERIOR=1,WORDS=1" > $OUT/s32.log 2>&1
cp /tmp/s32/design_sweep.md $OUT/s32.md; cat $OUT/s32.md
# Then, on the same machine (call 2, s32b.*), four more published/32 tiles with WORDS=1:
#   design_sweep.py --no-compile --tasks published/32 --variants "$P,num_warps=4,BLOCK_M=2048,BLOCK_W=64,INTERIOR=0,WORDS=1;
#   ...num_warps=2,BLOCK_M=1024,BLOCK_W=64,INTERIOR=1;...num_warps=4,BLOCK_M=4096,BLOCK_W=64,INTERIOR=1;...num_warps=4,BLOCK_M=2048,BLOCK_W=128,INTERIOR=1"
