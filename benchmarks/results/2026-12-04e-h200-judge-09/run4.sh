# Written in the twenty-third session, run in the twenty-fourth (code at 9cd083b and after). published/09's root judged 0.263 ms (p20-p80 0.237-0.291, 37 / 1
# calls per round) in one evaluation on 2026-12-04 11:2x UTC, against 0.2255-0.2273 on two machines the session
# before and 0.2253 in a plain process on the same machine minutes earlier. Is the judge's figure for a task whose
# eager call takes 8 ms noisy, or was that one evaluation? Three evaluations each of published/09 and level2/24
# (the control: 0.2773 judged vs 0.2770 plain), a plain-process pass first.
# Predicted: 09 at 0.225-0.230 ms in at least two of three, its p20-p80 under 3% of the median.
#   bash benchmarks/results/next/not_run_judge_09_rounds.sh   (carry .whl; ~4 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
timeout 100 python3 benchmarks/host_vs_gpu.py --tasks published/09,level2/24 --out $OUT/plain.json > $OUT/plain.log 2>&1
for t in published/09 level2/24; do
  timeout 200 python3 benchmarks/judge_host_bias.py --task $t --rounds 3 --teardown off --out $OUT/judge_${t//\//_}.json 2>&1 | tail -3
done
grep candidate $OUT/plain.log
