#!/usr/bin/env bash
# One device call: judges the programs benchmarks/probes/matmul_cases.py wrote (CASES, a folder carried or written
# here) with `kernelwright eval --json`, two at a time on a 2-GPU host (one per GPU). A line per case in
# $OUT/cases.txt (correct, ms, eager ms, compile ms, error kind); the full results in $OUT/results.tgz.
#   CASES=/tmp/cases bash benchmarks/probes/matmul_cases_device.sh
#   ONLY="root_ 24_bf16" ...    # the cases whose names start so
set -u
OUT=${OUT:-cases-out}; mkdir -p "$OUT"
CASES=${CASES:-/tmp/kw-matmul-cases}
[ -f "$CASES/cases.txt" ] || python3 benchmarks/probes/matmul_cases.py --out "$CASES" > "$OUT/written.txt"
J=/tmp/kw-case-json; mkdir -p "$J"
judge() {  # GPU NAME TASK
  CUDA_VISIBLE_DEVICES=$1 timeout "${CASE_S:-200}" python3 -m kernelwright.cli.main eval --json "$CASES/$3" \
    "$CASES/$2.py" > "$J/$2.json" 2> "$J/$2.err"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), r.get('runtime_ms'), \
r.get('eager_ms'), r.get('compile_ms'), r.get('error_kind'))" "$J/$2.json" "$2" 2>/dev/null || echo "$2: no result"
}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$gpus" -ge 1 ] || gpus=1
i=0
while read -r name task; do
  if [ -n "${ONLY:-}" ]; then
    keep=0; for p in $ONLY; do [[ $name == "$p"* ]] && keep=1; done; [ $keep = 1 ] || continue
  fi
  judge $((i % gpus)) "$name" "$task" >> "$OUT/cases.txt" &
  i=$((i + 1)); [ $((i % gpus)) -eq 0 ] && wait
done < "$CASES/cases.txt"
wait
cat "$OUT/cases.txt"
tar czf "$OUT/results.tgz" -C "$(dirname "$J")" "$(basename "$J")"
