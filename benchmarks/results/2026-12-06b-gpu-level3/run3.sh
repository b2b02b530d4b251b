#!/usr/bin/env bash
# Device call 3 (the session's last 110 s): bn_probe.py on 27_RegNet in the judge's strict precision.
set -u
mkdir -p .l3 && tar -xzf .l3c/l3.tgz -C .l3 ./stitched/27_RegNet_stitched.py ./kb/27_RegNet.py
STRICT=1 timeout 45 python3 benchmarks/results/2026-12-06b-gpu-level3/bn_probe.py .l3/kb .l3/stitched 27 > $OUT/bn_probe_strict.log 2>&1
echo "exit $?"; cut -c1-250 $OUT/bn_probe_strict.log
