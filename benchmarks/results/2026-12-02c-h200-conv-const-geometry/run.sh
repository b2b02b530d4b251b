# Run on 2026-12-02 (fifteenth session), written in the fourteenth: conv kernels with their
# geometry (kernel size, stride, dilation) as compile-time constants, conv_const_geometry.patch here.
# Today only the direct designs take KD/KH/KW/dilation as tl.constexpr; the GEMM designs divide a K index
# into channel and taps by runtime values, per element per K step in flat-K. Compiled for sm_90 (PTX div/rem
# instructions before -> after): published/35 flat-K 35 -> 11, its implicit_gemm root 14 -> 12, level2/09
# 27 -> 20, published/33 34 -> 24, 34 27 -> 20, level2/21 33 -> 26; registers 255 -> 255, 232 -> 238,
# 233 -> 252, 170 -> 174, 159 -> 166, 240 -> 242, no spills. The interpreter's conv tests pass with it (112).
# Predicted: flat-K on published/35 (gather half its 15 ms) a few % faster; the others within +-3%.
# Measures the same programs before and after applying the patch on the device's copy of the tree.
#   bash benchmarks/results/2026-12-02c-h200-conv-const-geometry/run.sh (before commit a6ad787, which applied the patch)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
V='implicit_gemm_flatk:BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,num_warps=8,num_stages=3,LAYOUT=nchw'
sweep() {  # $1: tag
  (cd benchmarks && timeout 100 python3 design_sweep.py --no-compile --time-budget-s 80 --out /tmp/$1-35 \
     --tasks published/35 --variants "$V;implicit_gemm" > $OUT/$1-35.log 2>&1
   timeout 130 python3 design_sweep.py --no-compile --time-budget-s 110 --out /tmp/$1-rest \
     --tasks level2/09,published/33,published/34,level2/21 --variants "implicit_gemm" > $OUT/$1-rest.log 2>&1)
  cat /tmp/$1-35/design_sweep.md /tmp/$1-rest/design_sweep.md > $OUT/$1.md
}
sweep before
git apply benchmarks/results/2026-12-02c-h200-conv-const-geometry/conv_const_geometry.patch && sweep after
cat $OUT/before.md $OUT/after.md
