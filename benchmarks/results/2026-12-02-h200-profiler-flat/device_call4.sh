# Session 12, call 4: transfer on the generated convolution tasks, part 2: the same 7 tasks with the memory that
# call 3 filled from the bundled level-2 convolutions; then FLAT=1 against FLAT=0 on the bf16 GEMM roots
# that are below cuBLAS (level1_bf16 15, 16, 17) and level2_bf16/02.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT/t; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt; date -u >> $OUT/host.txt
export PYTHONUNBUFFERED=1
mkdir -p /tmp/kwfill && tar -xzf benchmarks/.mem.tgz -C /tmp/kwfill
OUT=$OUT/t MODES=with MEMORY=/tmp/kwfill/memory PICK="01 07 09 14 21 24 28" BENCH_S=240 bash benchmarks/transfer_device.sh
date -u >> $OUT/host.txt
cd benchmarks
timeout 200 python3 design_sweep.py --tasks level1_bf16/16,level1_bf16/15,level1_bf16/17,level2_bf16/02 --no-compile --time-budget-s 170 --out /tmp/flat --variants 'persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3,TMA=1;persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,num_warps=8,num_stages=3,TMA=1,FLAT=1' > /tmp/flat.log 2>&1
tail -12 /tmp/flat.log; cp /tmp/flat/design_sweep.json /tmp/flat/design_sweep.md $OUT/ 2>/dev/null
tar -czf $OUT/transfer-with.tgz -C $OUT t && rm -rf $OUT/t
date -u >> $OUT/host.txt
