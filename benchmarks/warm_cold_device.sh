#!/usr/bin/env bash
# Warm vs cold (issue: learning, measured), one pass per device call. The cold pass benches SUITES with
# `--memory fresh` (an empty store in the bench folder that fills as it goes) and leaves the folder as
# $OUT/cold.tgz. The warm pass, given that tarball as COLD_TGZ (carried in), benches the same tasks again
# with a copy of the cold pass's store: same seed, same budget. Compare with benchmarks/warm_cold.py.
#   PASS=cold BUDGET=4 bash benchmarks/warm_cold_device.sh
#   PASS=warm COLD_TGZ=.cold.tgz BUDGET=4 bash benchmarks/warm_cold_device.sh
#   PASS=cold RESUME_TGZ=.cold.tgz bash benchmarks/warm_cold_device.sh      # continue a pass cut short
#   PASS=warm COLD_TGZ=.cold.tgz RESUME_TGZ=.warm.tgz bash benchmarks/warm_cold_device.sh
set -u
OUT=${OUT:-warm-cold-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
KW="python3 -m kernelwright.cli.main"
SUITES=${SUITES:-tasks/level1 tasks/level2}
nvidia-smi -L > "$OUT/host.txt" 2>&1; uname -r >> "$OUT/host.txt"; git log -1 --format=%h >> "$OUT/host.txt" 2>/dev/null
# A tarball of an unfinished pass (RESUME_TGZ) is continued with --resume; the warm pass needs the cold
# one's folder (here already, or from COLD_TGZ).
set -- $SUITES --budget "${BUDGET:-4}" --seed 0 --out "/tmp/kw-$PASS"
case "${PASS:?cold or warm}" in
  cold) set -- "$@" --memory fresh ;;
  warm) [ -d /tmp/kw-cold ] || tar -xzf "${COLD_TGZ:?the cold pass tarball}" -C /tmp
        rm -rf /tmp/kw-warm-memory && cp -r /tmp/kw-cold/memory /tmp/kw-warm-memory
        set -- "$@" --memory /tmp/kw-warm-memory ;;
esac
# A resumed warm pass gets back the store as its first part left it (kw-warm-memory is in its tarball).
if [ -n "${RESUME_TGZ:-}" ]; then
  rm -rf "/tmp/kw-$PASS" /tmp/kw-warm-memory
  tar -xzf "$RESUME_TGZ" -C /tmp && set -- --resume "/tmp/kw-$PASS"
fi
start=$(date +%s)
timeout -s TERM -k 30 "${BENCH_S:-500}" $KW bench "$@" > "$OUT/bench-$PASS-$start.log" 2>&1
echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/bench-$PASS-$start.log"
tail -3 "$OUT/bench-$PASS-$start.log"
cp /tmp/kw-$PASS/suite.md "$OUT/suite-$PASS.md"; cp /tmp/kw-$PASS/tasks.jsonl "$OUT/tasks-$PASS.jsonl"
cp /tmp/kw-$PASS/suite.json "$OUT/suite-$PASS.json"
keep="kw-$PASS"; [ "$PASS" = warm ] && keep="$keep kw-warm-memory"
tar -czf "$OUT/$PASS.tgz" --exclude="kw-$PASS/runs" -C /tmp $keep
ls -la "$OUT"
