#!/usr/bin/env bash
# Transfer of experience to tasks no one wrote (issue: learning, measured), one device call: generated tasks
# (`kernelwright tasks generate`, seeded) benched twice at the same budget, once with a memory filled by
# the bundled suites (MEMORY, copied first) and once with --memory off. Suite files land in $OUT/with and
# $OUT/without.
#   MEMORY=.mem-bundled PICK="02 03 04 05 06 08" BUDGET=4 bash benchmarks/transfer_device.sh
#   MODES=without PICK="02 03" bash benchmarks/transfer_device.sh      # one mode per call
set -u
OUT=${OUT:-transfer-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
KW="python3 -m kernelwright.cli.main"
GEN=/tmp/kw-generated
$KW tasks generate --out "$GEN" --count ${COUNT:-30} --seed ${SEED:-0} > "$OUT/generate.log" 2>&1
tasks=(); for p in ${PICK:-}; do tasks+=("$GEN/${p}_"*.py); done
[ ${#tasks[@]} -gt 0 ] || tasks=("$GEN")
MODES=${MODES:-with without}
case " $MODES " in *" with "*)
  rm -rf /tmp/kw-memory && cp -r "${MEMORY:?a memory folder filled by the bundled suites}" /tmp/kw-memory ;;
esac
for mode in $MODES; do
  mem=/tmp/kw-memory; [ "$mode" = without ] && mem=off
  timeout -s TERM -k 20 "${BENCH_S:-120}" $KW bench "${tasks[@]}" --budget "${BUDGET:-4}" --memory "$mem" \
    --out "/tmp/kw-transfer-$mode" > "$OUT/bench-$mode.log" 2>&1
  echo "$mode: exit $?" >> "$OUT/bench-$mode.log"
  mkdir -p "$OUT/$mode" && cp /tmp/kw-transfer-$mode/suite.{json,md} /tmp/kw-transfer-$mode/tasks.jsonl "$OUT/$mode/" 2>/dev/null
  tail -2 "$OUT/bench-$mode.log"
done
