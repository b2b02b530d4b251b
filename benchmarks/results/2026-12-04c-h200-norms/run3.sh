# Third call: where published/09's judged time goes (layer norm over 16 rows of 4M, 0.314 ms judged on
# 2026-12-03 where its kernels took ~0.22 ms without a flush, RESULTS seventh session) and 08's / 11's.
# host_vs_gpu (judged, GPU-only and host time per forward; eager and torch.compile too), and kernel_times for
# 09's root and baselines. Predicted: 09's host work per forward 0.1-0.2 ms against ~0.23 ms of GPU work with
# the flush, so the judged time near the GPU's; if so the gap is in the kernels under a flushed L2.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=benchmarks/results/2026-12-04c-h200-norms
mkdir -p $OUT /tmp/roots; tar xzf $R/roots.tgz -C /tmp/roots; date -u > $OUT/host3.txt
timeout 300 python3 benchmarks/host_vs_gpu.py --tasks published/09,published/08,published/11 --compile --out $OUT/host_vs_gpu.json > $OUT/host_vs_gpu.log 2>&1
tail -20 $OUT/host_vs_gpu.log
timeout 200 python3 benchmarks/kernel_times.py published/09 /tmp/roots/published_09_root.py --baselines --out $OUT/kt09 > $OUT/kt09.log 2>&1
tail -30 $OUT/kt09.log; tar czf $OUT/kt09.tgz -C $OUT kt09 && rm -r $OUT/kt09
nvidia-smi --query-gpu=power.draw,clocks.sm,temperature.gpu --format=csv >> $OUT/host3.txt
