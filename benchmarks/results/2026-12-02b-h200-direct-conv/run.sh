# Not run (written in the thirteenth session after its device time was spent): the dense `direct` conv
# design against flat-K on a short reduction. published/36 (3 -> 64 channels, 3x3x3, 16 x 64^3, strict
# fp32): flat-K 64x64x16 in one stage took 2.13 ms, cuDNN 1.85, torch.compile ~1.83 (0.86x). Predicted for
# direct (40 GFLOP of fp32 FMAs, CUDA-core bound at ~50-60 TFLOP/s, output 0.9 GiB written once): 0.8-1.0 ms.
# design_sweep: flat-K at its default, then four direct tiles. If direct wins, make it published/36's first design (providers/offline/conv.py, conv_designs) and bench the
# five standalone convolutions (issue 17's family goal: >= 1.5x torch.compile, last 1.47x).
# Part 2: level1_bf16/16 (bmm 32 x 2048 x 1024 x 2048, 0.429 ms, cuBLAS 0.403: 0.94x, the one bf16 GEMM
# goal of issue 17 still missed): deeper pipelines for its short K (16 steps of 64). All five configs compile
# for sm_90 without spills (shared memory 180248, 229408, 229392, 163872, 196648 B; the limit is 232448).
#   bash benchmarks/results/next/not_run_direct_conv.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
cd benchmarks
D='direct:BLOCK_M=128,BLOCK_N=64,num_warps=4;direct:BLOCK_M=256,BLOCK_N=64,num_warps=8;direct:BLOCK_M=128,BLOCK_N=32,num_warps=4;direct:BLOCK_M=64,BLOCK_N=32,num_warps=4'
timeout 330 python3 design_sweep.py --time-budget-s 300 --out /tmp/s1 --tasks published/36 \
  --variants "implicit_gemm_flatk;$D" > $OUT/conv36.log 2>&1
cp /tmp/s1/design_sweep.md $OUT/conv36.md; cat $OUT/conv36.md
P='persistent:BLOCK_M=128,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,FLAT=1'
timeout 150 python3 design_sweep.py --no-compile --time-budget-s 130 --out /tmp/s2 --tasks level1_bf16/16 \
  --variants "$P,BLOCK_N=256,num_stages=3;$P,BLOCK_N=256,num_stages=4;$P,BLOCK_N=256,BLOCK_K=128,num_stages=2;$P,BLOCK_N=128,num_stages=4;$P,BLOCK_N=128,num_stages=5" \
  > $OUT/bmm.log 2>&1
cp /tmp/s2/design_sweep.md $OUT/bmm.md; cat $OUT/bmm.md
