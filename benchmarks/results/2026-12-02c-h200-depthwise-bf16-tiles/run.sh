# Follow-up (warm machine): level2_bf16/24's depthwise stage took 231 us of its 284 us (kernel_times, this
# session) at the fp32-tuned 2048 x 128 NCHW plane over 4 warps: bf16 halves the bytes, not the instructions
# (in NCHW a tap's column shift breaks 16-byte alignment: scalar 2-byte loads). In the design's NHWC flat
# tiles (input copied channels-last first, as torch.compile does) every tap's load is channel-contiguous and
# aligned. Predicted: NHWC tiles 0.20-0.24 ms (copy ~50 us + conv ~100 us + normalise 48 us); planes +-10%.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1'
F='direct_depthwise:LAYOUT=nhwc,BLOCK_W=0,num_stages=1'
V="direct_depthwise"
for t in "64,32,4" "32,64,4" "16,128,4" "128,32,8" "64,64,8" "32,128,8"; do
  IFS=, read m n nw <<< "$t"; V="$V;$F,BLOCK_M=$m,BLOCK_N=$n,num_warps=$nw"; done
for t in "2048,128,8" "4096,128,4" "1024,64,4" "512,128,4"; do
  IFS=, read m w nw <<< "$t"; V="$V;$P,BLOCK_M=$m,BLOCK_W=$w,num_warps=$nw"; done
cd benchmarks && timeout 230 python3 design_sweep.py --time-budget-s 200 --out /tmp/dw --tasks level2_bf16/24 \
  --variants "$V" > $OUT/dw.log 2>&1; cp /tmp/dw/design_sweep.md /tmp/dw/design_sweep.json $OUT/; cat $OUT/design_sweep.md
