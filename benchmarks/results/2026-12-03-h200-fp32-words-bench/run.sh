# Written in the seventeenth session (its device time spent), run on 2026-12-03. Two questions after fp32 word pairs landed
# in the writer (results/2026-12-02e-h200-fp32-pairs-writer/):
# (1) the published convolutions at budget 3 with them (last: 1.73x torch.compile, 32 at 0.934 ms; predicted 32
#     at ~0.80 ms and the five at 1.75-1.85x);
# (2) why published/32 gained 14% where the standalone probe gained 34%: with every tile masked the writer's
#     word taps took 1.261 ms against 0.799 with interior tiles, while the probe's always-masked kernel took
#     0.649 at 512-wide outputs. published/32 has padding 0 (510-wide output rows: unaligned 4-byte stores, and the
#     last column tile and row tile of every plane take the masked path). Sweep the same tiles on a copy with
#     padding 1 (512-wide rows, aligned): if it runs near the probe, the edge tiles and stores are the cost.
#   bash benchmarks/results/2026-12-03-h200-fp32-words-bench/run.sh     (carry .whl; ~9 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt
mkdir -p /tmp/p1 && sed 's/^padding = 0$/padding = 1/' tasks/published/32_conv_depthwise_2d_16x64x512x512.py > /tmp/p1/32_pad1.py
grep -q '^padding = 1$' /tmp/p1/32_pad1.py || echo "padding not replaced" >> $OUT/host.txt
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1,num_warps=4,BLOCK_M=2048,BLOCK_W=64'
(cd benchmarks && for t in published/32 /tmp/p1/32_pad1.py; do
  timeout 120 python3 design_sweep.py --no-compile --time-budget-s 100 --out /tmp/sw --tasks $t \
    --variants "$P,INTERIOR=1,WORDS=0;$P,INTERIOR=1,WORDS=1;$P,INTERIOR=0,WORDS=1" >> $OUT/sweep.log 2>&1
  cat /tmp/sw/design_sweep.md >> $OUT/sweep.md; done)
cat $OUT/sweep.md
# Part 3 (added 2026-12-03): is level1_bf16/16 (bmm, 4096 output tiles of 128 x 256 on 132 SMs: 31.03 rounds, so
# four programs take a 32nd tile) short of cuBLAS by its last round? Copies with batch 31 and 33 (33 x 128 =
# 4224 tiles = 32 rounds exactly). Prediction if the last round is the cost: t(33) / t(32) ~1.00 for the
# persistent root and ~1.03 for cuBLAS (work ratio); if not, both ~1.03.
mkdir -p /tmp/bmm
for b in 31 33; do sed "s/^batch_size = 32$/batch_size = $b/" tasks/level1_bf16/16_bmm.py > /tmp/bmm/16_bmm_b$b.py; done
Q='persistent:BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,TMA=1,num_warps=8,FLAT=1,num_stages=3'
(cd benchmarks && for t in level1_bf16/16 /tmp/bmm/16_bmm_b31.py /tmp/bmm/16_bmm_b33.py level1_bf16/16; do
  timeout 60 python3 design_sweep.py --no-compile --time-budget-s 45 --out /tmp/sb --tasks $t --variants "$Q" >> $OUT/bmm.log 2>&1
  cat /tmp/sb/design_sweep.md >> $OUT/bmm.md; done)
cat $OUT/bmm.md
BENCH_S=$((575 - SECONDS)) BENCH_DIR=/tmp/kw-conv BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/3[2-6]_*.py | tr '\n' ' ') --budget 3 --seed 0" \
  OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/conv_suite.md; cp /tmp/o2/suite.json $OUT/conv_suite.json; cp /tmp/o2/bench-*.log $OUT/
