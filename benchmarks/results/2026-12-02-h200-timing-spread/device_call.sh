set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt
for t in 01 02; do for p in 1 2 3; do
  timeout 60 python3 benchmarks/timing_spread.py --task level2_bf16/$t --rounds 4 --reps 60 --out $OUT/spread_${t}_$p.json > /dev/null 2>$OUT/err_${t}_$p.txt
  python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print(sys.argv[2], ' '.join('%.3f/%.3f' % (r['candidate_ms'], r['eager_ms']) for r in d['rounds']))" $OUT/spread_${t}_$p.json "$t proc$p" || tail -3 $OUT/err_${t}_$p.txt
done; done 2>&1 | tee $OUT/summary.txt
cd $OUT && tar -czf spread.tgz spread_* err_* && rm -f spread_* err_*
