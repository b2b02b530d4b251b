# 2026-12-03: (1) benchmarks/norm_team_probe.py: norms over long rows with one read from memory (a team of
# programs per row meets once per row; each re-reads its own chunk from L2). Predicted: instance norm
# (published/11 shape) S = 1 ~5.5 ms like torch.compile (two reads, one write), teams of 16 at 2 programs per SM
# 3.9-4.3 ms (1.3-1.4x torch.compile); layer norm (published/09 shape) ~0.17 ms against torch.compile's ~0.32.
# (2) the channel-dim norms at the published sizes through the search, budget 3 (last measured 2026-12-01:
# 0.87x / 0.91x / 1.05x / 0.91x torch.compile for 08-11), for the family's figure today.
#   bash benchmarks/results/2026-12-03-h200-norm-team/run.sh     (carry .whl; ~9 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt
timeout 260 python3 benchmarks/norm_team_probe.py --out $OUT > $OUT/probe.log 2>&1; echo "probe exit $?" >> $OUT/probe.log
cat $OUT/probe.log
BENCH_S=$((570 - SECONDS)) BENCH_DIR=/tmp/kw-norms BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/0[89]_*.py tasks/published/1[01]_*.py | tr '\n' ' ') --budget 3 --seed 0" \
  OUT=/tmp/o2 bash benchmarks/bench_device.sh
cp /tmp/o2/suite.md $OUT/norm_suite.md; cp /tmp/o2/suite.json $OUT/norm_suite.json; cp /tmp/o2/bench-*.log $OUT/
