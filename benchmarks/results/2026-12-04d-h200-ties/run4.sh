# The published pools (budget 2) and level 1 (budget 4) after a step within 2% of its parent (or inside the
# speedups' intervals) became a "tie" instead of "partial" / "ineffective" (memory/records.py TIE_R): a tie
# is neither a config other tasks start from nor one they avoid. Predicted: pools 1.86-1.90x torch.compile,
# level 1 1.16-1.20x (within run-to-run spread of 1.18x; 06's small step is a seeded draw either way), and the
# memory's outcome counts with ties where the last run had 16 partial and 13 ineffective within 2%.
#   bash benchmarks/results/2026-12-04d-h200-ties/run4.sh   (carry .whl; ~6 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
BENCH_S=100 BENCH_DIR=/tmp/kw-pools BENCH_TGZ=none BENCH_ARGS="$(ls tasks/published/2[6-9]_*.py tasks/published/3[01]_*.py | tr '\n' ' ') --budget 2 --seed 0" \
  OUT=/tmp/o0 bash benchmarks/bench_device.sh > $OUT/bench_pools.log 2>&1
cp /tmp/o0/suite.md $OUT/pool_suite.md; cp /tmp/o0/suite.json $OUT/pool_suite.json
python3 -m kernelwright.graphs.cli memory stats --memory /tmp/kw-pools/memory > $OUT/memory_stats.txt 2>&1
BENCH_S=$((430 - SECONDS)) BENCH_DIR=/tmp/kw-l1 BENCH_TGZ=none BENCH_ARGS="tasks/level1 --budget 4 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh > $OUT/bench_level1.log 2>&1
cp /tmp/o1/suite.md $OUT/level1_suite.md; cp /tmp/o1/suite.json $OUT/level1_suite.json
python3 -m kernelwright.graphs.cli memory stats --memory /tmp/kw-l1/memory >> $OUT/memory_stats.txt 2>&1
head -4 $OUT/pool_suite.md; head -14 $OUT/level1_suite.md | tail -4; cat $OUT/memory_stats.txt
