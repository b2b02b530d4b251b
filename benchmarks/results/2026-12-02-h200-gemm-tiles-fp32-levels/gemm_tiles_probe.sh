# Call 1 of 2026-12-02 (thirteenth session; written at the end of the twelfth). Issue 17's GEMM gaps.
# 1) Half-precision products of few tiles: the generated fp16 bmm tasks 23 (4 x 512 x 2048 x 1024: 64 tiles
#    of 128 x 256 for 132 SMs) and 27 (16 x 256 x 256 x 384: 64 tiles, N=384 padded to 512), and 12 (a
#    1024 x 2048 x 4096 fp16 matmul: 128 tiles): is a smaller tile that fills the SMs faster than the default?
# 2) level1_bf16/16 (bmm, 0.94x cuBLAS with FLAT=1): group size and a 256 x 128 tile.
# 3) level2_bf16/12 (SwiGLU, 1.05x eager): the dual persistent kernel flattened, against the unfused root.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
python3 -m kernelwright.graphs.cli tasks generate --out /tmp/gen --count 30 --seed 0 > /dev/null
cd benchmarks
G=/tmp/gen
timeout 180 python3 design_sweep.py --no-compile --time-budget-s 160 --out /tmp/s1 \
  --tasks $G/23_bmm_silu_tanh_clamp_softmax.py,$G/27_bmm_scale_gelu_tanh.py,$G/12_matmul_gelu_logsumexp.py \
  --variants 'grouped:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3;grouped:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=4;grouped:BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=4,num_stages=4;grouped:BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=4,num_stages=4;persistent:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=1' > $OUT/s1.log 2>&1
cp /tmp/s1/design_sweep.md $OUT/s1.md
timeout 110 python3 design_sweep.py --no-compile --time-budget-s 90 --out /tmp/s2 --tasks level1_bf16/16 \
  --variants 'persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=1;persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=4,TMA=1,num_warps=8,num_stages=3,FLAT=1;persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=16,TMA=1,num_warps=8,num_stages=3,FLAT=1;persistent:BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=1' > $OUT/s2.log 2>&1
cp /tmp/s2/design_sweep.md $OUT/s2.md
timeout 110 python3 design_sweep.py --no-compile --time-budget-s 90 --out /tmp/s3 --tasks level2_bf16/12 \
  --variants 'persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=1;dual_persistent:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=0;dual_persistent:BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=1' > $OUT/s3.log 2>&1
cp /tmp/s3/design_sweep.md $OUT/s3.md
cat $OUT/s*.md
# 4) level2_bf16/11 (linear + LayerNorm, 0.433 ms, torch.compile 0.407) with its product now written as bf16
#    for the norm (Schedule.stored): predicted ~0.405 ms (128 MiB fewer bytes moved at ~4.7 TB/s).
timeout 110 python3 design_sweep.py --time-budget-s 90 --out /tmp/s4 --tasks level2_bf16/11 \
  --variants 'persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,num_stages=3,FLAT=1' > $OUT/s4.log 2>&1
cp /tmp/s4/design_sweep.md $OUT/s4.md; cat $OUT/s4.md
