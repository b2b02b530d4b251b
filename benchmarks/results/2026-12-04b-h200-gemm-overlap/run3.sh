# Third call: a longer A/B after the rounds of the second call drifted with the GPU's clocks (the first round
# ~10% faster for every program). The root soaked for 20 s first; then 10 rounds over root, two_per_sm_w4s3
# and tma_store (order reversed every other round), cuBLAS after each; per-round SM clock, power, temperature.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=benchmarks/results/2026-12-04b-h200-gemm-overlap
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
tar xzf $R/programs.tgz -C /tmp
timeout 420 python3 benchmarks/gemm_overlap_probe.py --time /tmp/gp --rounds 10 --soak-s 20 --only two_per_sm_w4s3,tma_store \
  --out $OUT/gemm_overlap_probe.json 2>&1 | grep -v Warning | tee $OUT/probe.log
