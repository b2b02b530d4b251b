#!/usr/bin/env bash
# One device call of a long `kernelwright bench`, continued across calls: the bench folder travels as a
# tarball (BENCH_TGZ, carried in; written to $OUT/bench.tgz on the way out). The bench is stopped with
# SIGTERM after BENCH_S seconds (it writes its suite files and exits 130; `--resume` continues it).
#   BENCH_ARGS="tasks/level1 tasks/level2 tasks/published --budget 2" bash benchmarks/bench_device.sh
set -u
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
BENCH_TGZ=${BENCH_TGZ:-.bench.tgz}
BENCH_DIR=${BENCH_DIR:-/tmp/kw-bench}
nvidia-smi -L > "$OUT/host.txt" 2>&1; uname -r >> "$OUT/host.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$OUT/host.txt"
if [ -f "$BENCH_TGZ" ]; then
  mkdir -p "$(dirname "$BENCH_DIR")" && tar -xzf "$BENCH_TGZ" -C "$(dirname "$BENCH_DIR")"
  set -- --resume "$BENCH_DIR"
else
  set -- ${BENCH_ARGS} --out "$BENCH_DIR" --memory fresh
fi
start=$(date +%s)
timeout -s TERM -k 30 "${BENCH_S:-470}" python3 -m kernelwright.cli.main bench "$@" > "$OUT/bench-$start.log" 2>&1
echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/bench-$start.log"
tail -3 "$OUT/bench-$start.log"
cp "$BENCH_DIR"/suite.md "$BENCH_DIR"/suite.json "$OUT/" 2>/dev/null
tar -czf "$OUT/bench.tgz" -C "$(dirname "$BENCH_DIR")" "$(basename "$BENCH_DIR")"
ls -la "$OUT"
