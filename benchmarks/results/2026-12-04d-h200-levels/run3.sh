# Written in the twenty-second session, run in the twenty-third. Does the judge's candidate process charge host work a plain
# process does not? The writer's roots of published/09, level2/24 and level2_bf16/20 in a plain process with and
# without the judge's evidence hooks on every Triton launch (host_vs_gpu.py --launch-hooks), interleaved, then
# the same roots through the judge (judge_host_bias.py, calls queued per round since commit ae8cc2f).
# Predicted: the hooks add 1-3 us per launch (a property, two closures, one call when not recording), under 5%
# of these forwards' host work; the judge within 5% of the plain process's judged time now that calls queue.
#   bash benchmarks/results/2026-12-04d-h200-levels/run3.sh   (carry .whl; ~4 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
T=published/09,level2/24,level2_bf16/20
for i in 1 2; do
  timeout 100 python3 benchmarks/host_vs_gpu.py --tasks $T --out $OUT/plain$i.json > $OUT/plain$i.log 2>&1; grep candidate $OUT/plain$i.log
  timeout 100 python3 benchmarks/host_vs_gpu.py --tasks $T --launch-hooks --out $OUT/hooks$i.json > $OUT/hooks$i.log 2>&1; grep candidate $OUT/hooks$i.log
done
for t in published/09 level2/24; do
  timeout 120 python3 benchmarks/judge_host_bias.py --task $t --rounds 1 --teardown off --out $OUT/judge_${t//\//_}.json 2>&1 | tail -1
done
tar czf $OUT/logs.tgz -C $OUT $(cd $OUT; ls plain* hooks* judge_*) && rm $OUT/plain* $OUT/hooks* $OUT/judge_*
