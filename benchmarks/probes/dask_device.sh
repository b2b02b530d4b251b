#!/usr/bin/env bash
# Bench on a local Dask cluster: one GPU worker against two (issue: past one machine), one device call on a
# 2-GPU host. The same suite is benched twice with `--memory off` (so that neither search depends on which
# task the other worker finished first): `--cluster local --gpus 0`, then `--cluster local --gpus 0,1`.
# Wall times, both suites and their comparison (same tasks, same statuses) land in $OUT.
# Needs dask and distributed importable (their wheels in .whl, installed with the rest).
#   SUITE=tasks/level2 BUDGET=2 bash benchmarks/probes/dask_device.sh
#   ONE="--cluster local:1 --device cpu" TWO="--cluster local:2 --device cpu" SUITE=... bash benchmarks/probes/dask_device.sh
set -u
OUT=${OUT:-dask-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
KW="python3 -m kernelwright.cli.main"
SUITE=${SUITE:-tasks/level2}
ONE=${ONE:---cluster local --gpus 0}
TWO=${TWO:---cluster local --gpus 0,1}
nvidia-smi -L > "$OUT/host.txt" 2>&1; uname -r >> "$OUT/host.txt"
python3 -c 'import dask, distributed, torch, triton; print("dask", dask.__version__, "torch", torch.__version__, "triton", triton.__version__)' >> "$OUT/host.txt" 2>&1
for mode in one two; do
  args=$ONE; [ "$mode" = two ] && args=$TWO
  rm -rf "/tmp/kw-dask-$mode"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # the cluster arguments are words
  timeout -s TERM -k 30 "${BENCH_S:-280}" $KW bench $SUITE --budget "${BUDGET:-2}" --seed 0 --memory off $args \
    --out "/tmp/kw-dask-$mode" > "$OUT/bench-$mode.log" 2>&1
  code=$?
  end=$(date +%s.%N)
  echo "$mode: exit $code, wall $(python3 -c "print(round($end - $start, 1))") s" | tee -a "$OUT/walls.txt"
  cp "/tmp/kw-dask-$mode/suite.json" "$OUT/suite-$mode.json" 2>/dev/null
done
python3 - "$OUT" <<'EOF' | tee "$OUT/compare.txt"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
suites = {m: json.loads((out / f"suite-{m}.json").read_text()) for m in ("one", "two")}
rows = {m: {t["id"]: t for t in s["tasks"]} for m, s in suites.items()}
same = sorted(set(rows["one"]) & set(rows["two"]))
differ = [t for t in same if rows["one"][t]["status"] != rows["two"][t]["status"]]
print(f"tasks: one worker {len(rows['one'])}, two {len(rows['two'])}; statuses differ on {len(differ)}: {differ}")
print({m: s["bench"].get("finished") for m, s in suites.items()})
EOF
