# Not run (written in the seventeenth session, its device time spent). Two questions after fp32 word pairs landed
# in the writer (results/2026-12-02e-h200-fp32-pairs-writer/):
# (1) the published convolutions at budget 3 with them (last: 1.73x torch.compile, 32 at 0.934 ms; predicted 32
#     at ~0.80 ms and the five at 1.75-1.85x);
# (2) why published/32 gained 14% where the standalone probe gained 34%: with every tile masked the writer's
#     word taps took 1.261 ms against 0.799 with interior tiles, while the probe's always-masked kernel took
#     0.649 at 512-wide outputs. published/32 has padding 0 (510-wide output rows: unaligned 4-byte stores, and the
#     last column tile and row tile of every plane take the masked path). Sweep the same tiles on a copy with
#     padding 1 (512-wide rows, aligned): if it runs near the probe, the edge tiles and stores are the cost.
#   bash benchmarks/results/next/not_run_fp32_words_followup.sh     (carry .whl; ~5 min)
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
BENCH_S=240 BENCH_DIR=/tmp/kw-conv BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/3[2-6]_*.py | tr '\n' ' ') --budget 3 --seed 0" \
  OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/conv_suite.md; cp /tmp/o2/suite.json $OUT/conv_suite.json; cp /tmp/o2/bench-*.log $OUT/
