# Half products whose N = 384 pads to 512 in 256-wide tiles (four generated tasks, seeds 0-2): the new
# default (128-wide tiles; persistent where 128-wide tiles reach two per SM) against the old (256-wide).
#   bash benchmarks/results/2026-12-02-h200-narrow-n-tiles/run.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
for s in 0 1 2; do python3 -m kernelwright.graphs.cli tasks generate --out /tmp/gen$s --count 30 --seed $s > /dev/null; done
cd benchmarks
T=/tmp/gen0/27_bmm_scale_gelu_tanh.py,/tmp/gen1/05_bmm_leaky_relu_hardswish_mean.py,/tmp/gen2/27_bmm_relu_log_softmax.py,/tmp/gen2/29_bmm_gelu_layer_norm.py
timeout 150 python3 design_sweep.py --no-compile --time-budget-s 130 --out /tmp/s --tasks $T \
  --variants 'grouped:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3;grouped:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3;persistent:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=1' > $OUT/sweep.log 2>&1
cp /tmp/s/design_sweep.md $OUT/; cat $OUT/design_sweep.md
