# Fourth call: the channel-dim norms at the published sizes through the search (budget 3, as on 2026-12-03:
# 0.97x torch.compile; 09 judged 0.314 ms there), now with the paired torch.compile baseline. run3.sh measured
# 09's root at 0.230 ms judged / 0.225 GPU / 0.246 host per forward on this call's kind of machine.
# Predicted: 09 0.22-0.25 ms (1.3-1.45x torch.compile) if the judge's host keeps ahead, 0.30+ if not; 08
# 0.84-0.93x, 10 ~1.06x, 11 ~0.98x; the family 1.0-1.1x.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host4.txt; date -u >> $OUT/host4.txt
BENCH_S=400 BENCH_DIR=/tmp/kw-norms BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/0[89]_*.py tasks/published/1[01]_*.py | tr '\n' ' ') --budget 3 --seed 0" \
  OUT=/tmp/o2 bash benchmarks/bench_device.sh > $OUT/bench4.log 2>&1
cp /tmp/o2/suite.md $OUT/norm_suite.md; cp /tmp/o2/suite.json $OUT/norm_suite.json; head -8 $OUT/norm_suite.md; grep "^| published" $OUT/norm_suite.md | cut -d'|' -f2,5,6,7
