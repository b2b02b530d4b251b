# 2026-12-03, third call: why the teams stop at ~2 reads' time. Call 2: pipelined teams no faster (5.5-6.9 ms
# against 5.04 without), copy 3.49 ms. Here the best team alone, its statistics pass alone, its second pass from
# a copy (no L2 reuse possible), and wider blocks (more bytes in flight per program).
# Predicted: if the second pass does come from L2, "from a copy" is >= 0.8 ms slower than the team itself.
#   bash benchmarks/results/2026-12-03-h200-norm-team/run3.sh     (carry .whl; ~2 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host3.txt; date -u >> $OUT/host3.txt; git log -1 --format=%h >> $OUT/host3.txt
timeout 280 python3 benchmarks/norm_team_probe.py --out /tmp/p3 > $OUT/probe3.log 2>&1; echo "probe exit $?" >> $OUT/probe3.log
cp /tmp/p3/norm_team_probe.json $OUT/norm_team_probe3.json; cat $OUT/probe3.log
