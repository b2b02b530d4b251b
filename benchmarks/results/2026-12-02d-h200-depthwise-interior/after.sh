# After the sweep (sweep_interior.sh, this folder): every plane tile carries INTERIOR except the first where a
# norm follows, and a plain depthwise convolution starts at 2048 x 64 (0.934 ms in the sweep against 1.421 for
# the old default). 1) the five published convolutions at budget 3 with the new defaults (last: 1.71x
# torch.compile, 32 at 1.35x); predicted 32 ~0.93 ms (~2.0x torch.compile), the four others unchanged, suite
# ~1.85x. 2) level2_bf16/24 (112-wide planes, a norm follows) with interior tiles at narrower planes, to decide
# its first tile: predicted 1024 x 32 within 3% of 4096 x 128 (as fp32 level2/24: 0.364 vs 0.370).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
BENCH_S=240 BENCH_DIR=/tmp/kw-conv BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/3[2-6]_*.py | tr '\n' ' ') --budget 3 --seed 0" OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/conv_suite.md; cp /tmp/o2/suite.json $OUT/conv_suite.json
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1,num_warps=4'
cd benchmarks
timeout 200 python3 design_sweep.py --no-compile --time-budget-s 170 --out /tmp/dw24 --tasks level2_bf16/24 \
  --variants "$P,BLOCK_M=4096,BLOCK_W=128,INTERIOR=0;$P,BLOCK_M=1024,BLOCK_W=32,INTERIOR=1;$P,BLOCK_M=2048,BLOCK_W=64,INTERIOR=1;$P,BLOCK_M=2048,BLOCK_W=32,INTERIOR=1;$P,BLOCK_M=4096,BLOCK_W=64,INTERIOR=1" > $OUT/dw24_bf16.log 2>&1
cp /tmp/dw24/design_sweep.md $OUT/dw24_bf16.md; cat $OUT/dw24_bf16.md; grep -i geomean $OUT/conv_suite.md | head -3
