# Run on 2026-12-02 (fifteenth session), written in the fourteenth: Triton's warp specialization
# of the persistent bf16 GEMM's TMA twin (WS=1: `tl.range(..., warp_specialize=True)` over the tiles, an
# unflattened loop as Hopper requires), matmul_warp_specialize.patch here. The bf16 GEMMs sit at 0.98-0.99x
# cuBLAS and the bmm (level1_bf16/16) at 0.94x; deeper pipelines, other tiles and a TMA store epilogue
# (this session, results/2026-12-02b-h200-tma-store/) changed nothing. Compiled for sm_90 without a GPU (Triton
# 3.6): at num_warps=4 the kernel runs 12 warps, 168 registers, no spills, 180448 B of shared memory in 3
# stages (229608 in 4), for level1_bf16 14-17 and level2_bf16 01-02 alike; at num_warps=8 Triton leaves the
# loop unspecialized. Verified under the interpreter (2-D and 3-D bmm descriptors, values against Model).
# Predicted: 0-5% faster than the flattened default; if it wins, the patch lands with WS=1 as the default.
#   bash benchmarks/results/2026-12-02c-h200-matmul-ws/run.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
git apply benchmarks/results/2026-12-02c-h200-matmul-ws/matmul_warp_specialize.patch || exit 1
W='persistent:WS=1,FLAT=0,num_warps=4'
cd benchmarks
timeout 280 python3 design_sweep.py --no-compile --time-budget-s 250 --out /tmp/ws \
  --tasks level1_bf16/16,level1_bf16/15,level2_bf16/01,level1_bf16/17,level1_bf16/14 \
  --variants "persistent;$W;$W,num_stages=4;persistent:WS=0,FLAT=0,num_warps=8" > $OUT/ws.log 2>&1
cp /tmp/ws/design_sweep.md /tmp/ws/design_sweep.json $OUT/; cat $OUT/design_sweep.md
