set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt
for f in benchmarks/.evalprog/20_*.py benchmarks/.evalprog/09_*.py; do
  b=$(basename $f .py); t=${b%%_*}
  task=$(ls tasks/level2_bf16/${t}_*.py)
  timeout 120 python3 -m kernelwright.graphs.cli eval $task $f --json > $OUT/eval_$b.json 2>$OUT/eval_$b.err
  python3 - $OUT/eval_$b.json $b <<'PY'
import json,sys
try:
    r=json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], 'no json', e); raise SystemExit
print(sys.argv[2], r.get('correct'), r.get('stage'), r.get('runtime_ms'), r.get('runtime_p20_ms'), r.get('runtime_p80_ms'), r.get('compile_ms'), r.get('timing_note'), (r.get('error') or '')[-200:])
PY
done 2>&1 | tee $OUT/summary.txt
cd $OUT && tar -czf evals.tgz eval_* && rm -f eval_*
