# Depthwise planes over bf16 with their taps read as 32-bit words (WORDS, this session), after the standalone
# probe (depthwise_words_probe.py, this folder: the convolution alone at 32x128x112^2, 0.194-0.215 ms with
# 2-byte taps, 0.117-0.128 with words). sm_90 SASS of level2_bf16/24's conv + statistics stage (4096 x 128, 4
# warps): 2199 -> 1521 instructions, 134 -> 92 registers. Predicted: level2_bf16/24 0.31 -> 0.24-0.26 ms
# (torch.compile ~0.24); a bf16 variant of published/32 (no norm) 30-40% faster with words.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
python3 -m kernelwright.graphs.cli tasks variant --dtype bfloat16 --out /tmp/v32 tasks/published/32_conv_depthwise_2d_16x64x512x512.py > $OUT/variant.log 2>&1
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1'
cd benchmarks
timeout 170 python3 design_sweep.py --no-compile --time-budget-s 150 --out /tmp/s24 --tasks level2_bf16/24 \
  --variants "$P,num_warps=4,BLOCK_M=4096,BLOCK_W=128,INTERIOR=0,WORDS=0;$P,num_warps=4,BLOCK_M=4096,BLOCK_W=128,INTERIOR=0,WORDS=1;$P,num_warps=4,BLOCK_M=2048,BLOCK_W=64,INTERIOR=1,WORDS=1;$P,num_warps=4,BLOCK_M=4096,BLOCK_W=64,INTERIOR=1,WORDS=1;$P,num_warps=8,BLOCK_M=8192,BLOCK_W=128,INTERIOR=0,WORDS=1" > $OUT/s24.log 2>&1
cp /tmp/s24/design_sweep.md $OUT/s24.md; cat $OUT/s24.md
timeout 200 python3 design_sweep.py --time-budget-s 180 --out /tmp/s32 --tasks /tmp/v32/32_conv_depthwise_2d_16x64x512x512.py \
  --variants "$P,num_warps=4,BLOCK_M=2048,BLOCK_W=64,INTERIOR=1,WORDS=0;$P,num_warps=4,BLOCK_M=2048,BLOCK_W=64,INTERIOR=1,WORDS=1;$P,num_warps=4,BLOCK_M=1024,BLOCK_W=128,INTERIOR=1,WORDS=1;$P,num_warps=4,BLOCK_M=4096,BLOCK_W=128,INTERIOR=1,WORDS=1" > $OUT/s32.log 2>&1
cp /tmp/s32/design_sweep.md $OUT/s32_bf16.md; cat $OUT/s32_bf16.md
