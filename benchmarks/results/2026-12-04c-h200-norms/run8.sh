# Eighth call: run4.sh again after the judge change (each side's calls per round from its own time, commit ae8cc2f).
# Predicted: 09 0.225-0.235 ms (1.4x torch.compile; run7 judged its root at 0.227 / 0.226), 08, 10, 11 as in
# run4 (their candidates run 3.5-5.9 ms, so their counts barely change); the family ~1.05x.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host8.txt; date -u >> $OUT/host8.txt
BENCH_S=200 BENCH_DIR=/tmp/kw-norms BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/0[89]_*.py tasks/published/1[01]_*.py | tr '\n' ' ') --budget 3 --seed 0" \
  OUT=/tmp/o2 bash benchmarks/bench_device.sh > $OUT/bench8.log 2>&1
cp /tmp/o2/suite.md $OUT/norm_suite8.md; cp /tmp/o2/suite.json $OUT/norm_suite8.json; head -8 $OUT/norm_suite8.md; grep "^| published" $OUT/norm_suite8.md | cut -d'|' -f2,5,6,7
