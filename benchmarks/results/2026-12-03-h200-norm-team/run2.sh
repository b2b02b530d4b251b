# 2026-12-03, second call: the team kernel pipelined (a member sums its chunk of the team's next row before
# it waits for this row's sums), beside a copy of the tensor (one read, one write: the floor). First call:
# teams of 16 at 5.03 ms against torch.compile's 5.51 (instance norm), 0.303 against 0.322 (layer norm), far
# from the one-read prediction (3.9-4.3): either the wait stalls the SMs or the second pass misses L2.
# Predicted: if it is the wait, pipelined teams of 16-32 at 4.0-4.5 ms; if it is L2, no better than 5.0.
#   bash benchmarks/results/2026-12-03-h200-norm-team/run2.sh     (carry .whl; ~3 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host2.txt; date -u >> $OUT/host2.txt; git log -1 --format=%h >> $OUT/host2.txt
timeout 280 python3 benchmarks/norm_team_probe.py --out /tmp/p2 > $OUT/probe2.log 2>&1; echo "probe exit $?" >> $OUT/probe2.log
cp /tmp/p2/norm_team_probe.json $OUT/norm_team_probe2.json; cat $OUT/probe2.log
