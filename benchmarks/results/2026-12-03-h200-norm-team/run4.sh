# 2026-12-03, fourth call: more bytes in flight per SM. Call 3: the statistics pass alone ran at 2.9 TB/s
# (instance) and 2.1 TB/s (layer), and a BLOCK of 8192 took instance norm 5.04 -> 4.58 ms; the second pass from
# a copy was 0.75 ms slower (so L2 does serve part of it). Predicted: 16 warps per program and 16384-wide
# blocks 4.0-4.4 ms (instance), 0.22-0.28 (layer).
#   bash benchmarks/results/2026-12-03-h200-norm-team/run4.sh     (carry .whl; ~2 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host4.txt; date -u >> $OUT/host4.txt; git log -1 --format=%h >> $OUT/host4.txt
timeout 280 python3 benchmarks/norm_team_probe.py --out /tmp/p4 > $OUT/probe4.log 2>&1; echo "probe exit $?" >> $OUT/probe4.log
cp /tmp/p4/norm_team_probe.json $OUT/norm_team_probe4.json; cat $OUT/probe4.log
