# Ninth call (the session's last device minutes, the machine still warm): the published pooling tasks 26-31
# at budget 2 after the judge change (1.84x torch.compile on 2026-12-01, their candidates 1.5-4x faster than
# eager, so their calls per round rise). Stops starting tasks at BENCH_S. Predicted: 1.84-1.95x.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host9.txt; date -u >> $OUT/host9.txt
BENCH_S=140 BENCH_DIR=/tmp/kw-pools BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/2[6-9]_*.py tasks/published/3[01]_*.py | tr '\n' ' ') --budget 2 --seed 0" \
  OUT=/tmp/o3 bash benchmarks/bench_device.sh > $OUT/bench9.log 2>&1
cp /tmp/o3/suite.md $OUT/pool_suite9.md; cp /tmp/o3/suite.json $OUT/pool_suite9.json; head -4 $OUT/pool_suite9.md; grep "^| published" $OUT/pool_suite9.md | cut -d'|' -f2,5,6,7
