# Second call: the probe again, timed as the judge times (the first call synchronized after each call, so the
# host's launch work was inside every event pair: root bmm 0.54 ms where the bench has 0.43). Three rounds.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=benchmarks/results/2026-12-04b-h200-gemm-overlap
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
tar xzf $R/programs.tgz -C /tmp
timeout 400 python3 benchmarks/gemm_overlap_probe.py --time /tmp/gp --rounds 3 --out $OUT/gemm_overlap_probe.json 2>&1 | grep -v Warning | tee $OUT/probe.log
