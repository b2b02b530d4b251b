#!/usr/bin/env bash
# device call 2: graph GPU test, level 2 bench with unseen sizes, the decoder backend, a level-3 sample
set -u
export PYTHONUNBUFFERED=1
mkdir -p $OUT/l2 $OUT/l3 /tmp/x
t0=$(date +%s)
timeout 80 python3 benchmarks/probes/unseen_variants.py --out /tmp/x/uv > /tmp/x/uv.log 2>&1; echo "exit $? at $(( $(date +%s)-t0 )) s" >> /tmp/x/uv.log
cp /tmp/x/uv/unseen_variants.json $OUT/; tail -2 /tmp/x/uv.log | cut -c1-300
timeout -s TERM -k 20 ${L2_S:-170} python3 -m kernelwright bench tasks/level2 --budget 2 --memory fresh --out /tmp/l2 > /tmp/x/l2.log 2>&1; echo "exit $? at $(( $(date +%s)-t0 )) s" >> /tmp/x/l2.log
tail -2 /tmp/x/l2.log; cp /tmp/l2/suite.json /tmp/l2/suite.md $OUT/l2/
timeout -s TERM -k 20 ${DEC_S:-140} python3 benchmarks/decoder_backend.py --out /tmp/dec --budget 1 --device cuda > /tmp/x/dec.log 2>&1; echo "exit $? at $(( $(date +%s)-t0 )) s" >> /tmp/x/dec.log
tail -5 /tmp/x/dec.log
L3="../level3"
timeout -s TERM -k 20 ${L3_S:-90} python3 -m kernelwright bench $L3/1_MLP.py $L3/2_ShallowWideMLP.py $L3/3_DeepNarrowMLP.py $L3/4_LeNet5.py $L3/8_ResNetBasicBlock.py $L3/43_MinGPTCausalAttention.py $L3/50_ReLUSelfAttention.py $L3/44_MiniGPTBlock.py --budget 2 --memory fresh --out /tmp/l3 > /tmp/x/l3.log 2>&1; echo "exit $? at $(( $(date +%s)-t0 )) s" >> /tmp/x/l3.log
tail -4 /tmp/x/l3.log; cp /tmp/l3/suite.json /tmp/l3/suite.md $OUT/l3/ 2>/dev/null
rm -f /tmp/x/uv/*.py; tar -czf $OUT/rest.tgz -C /tmp x dec l3/runs 2>/dev/null
ls -la $OUT $OUT/*
