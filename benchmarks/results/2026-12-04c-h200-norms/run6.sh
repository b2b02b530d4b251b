# Sixth call: is published/09's judged time (0.347 ms in run4's bench, p20-p80 0.311-0.386) the judge's
# candidate process or that machine's host? On one machine: the root through the judge twice
# (judge_host_bias.py, TEARDOWN_CUPTI unset) and in a plain process (host_vs_gpu.py), twice each, interleaved.
# Predicted: the judge 0.30-0.35 ms against 0.23 in the plain process (the candidate process's launches pass
# the evidence recorder's hooks), i.e. the judge's process, not the machine.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host6.txt; date -u >> $OUT/host6.txt
for i in 1 2; do
  timeout 100 python3 benchmarks/host_vs_gpu.py --tasks published/09 --out $OUT/plain$i.json > $OUT/plain$i.log 2>&1; grep candidate $OUT/plain$i.log
  timeout 150 python3 benchmarks/judge_host_bias.py --task published/09 --rounds 1 --teardown off --out $OUT/judge$i.json > $OUT/judge$i.log 2>&1; tail -3 $OUT/judge$i.log
done
tar czf $OUT/logs6.tgz -C $OUT $(cd $OUT; ls plain* judge*) && rm $OUT/plain* $OUT/judge*
