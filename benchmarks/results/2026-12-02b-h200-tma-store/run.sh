# One device call (fourteenth session): the TMA store epilogue (TMA_STORE=1: two half tiles through a
# descriptor over the output) against the pointer store, on the bf16 GEMMs of issue 17 that sit at
# 0.94-0.99x cuBLAS. Compiled for sm_90 without a GPU: 154-167 registers with it against 189-208 without,
# no spills, the same 180248 B of shared memory in the flattened 3-stage loop. Predicted: 1-4% faster.
#   bash benchmarks/results/next/run_tma_store.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
cd benchmarks
timeout 130 python3 design_sweep.py --no-compile --time-budget-s 100 --out /tmp/s1 \
  --tasks level1_bf16/16,level1_bf16/15,level2_bf16/01,level1_bf16/17 \
  --variants "persistent:TMA_STORE=0;persistent:TMA_STORE=1" > $OUT/store.log 2>&1
cp /tmp/s1/design_sweep.md /tmp/s1/design_sweep.json $OUT/; cat $OUT/design_sweep.md
