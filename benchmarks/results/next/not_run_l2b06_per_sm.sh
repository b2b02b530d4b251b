# Not run (the twenty-first session's device time ran out; ~3 min, carry .whl): level2_bf16/06 (the bmm with scale and residual, K = 1024), the root
# before PER_SM=2 and after it, judged once each. Predicted: 2-5% faster after (the bmm alone gained 4.3%).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
tar xzf benchmarks/results/next/l2b06_programs.tgz -C benchmarks/results/next
R=benchmarks/results/next
mkdir -p $OUT; date -u > $OUT/host7.txt
for c in l2b06_new_root l2b06_old_root; do
  timeout 75 python3 -m kernelwright.graphs.cli eval --json tasks/level2_bf16/06_bmm_scale_residual.py $R/$c.py > $OUT/e_$c.json 2> /dev/null
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), 'run %.4f eager %.4f vs_eager %.4f ci %s vs_compile %s' % \
(r['runtime_ms'], r['eager_ms'], r['speedup_vs_eager'], r.get('speedup_vs_eager_ci'), r.get('speedup_vs_compile')))" $OUT/e_$c.json $c || echo "$c: no result"
done | tee $OUT/l2b06.txt
