# Seventh call: the judge with each side's calls per round from its own time (calls_per_round; before, both
# sides made the slower side's count, one call per round where eager takes 8 ms). `kernelwright eval` on
# published/09's root (twice), level2/24's and the bmm's (level1_bf16/16; its count does not change).
# Predicted: 09 0.226-0.24 ms (run6: 0.297 / 0.391 through the judge, 0.226 in a plain process), 1.35-1.45x
# torch.compile; bmm 0.97x eager as before; level2/24 within 5% of 0.278 ms.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
R=benchmarks/results/2026-12-04c-h200-norms
mkdir -p $OUT/e /tmp/roots; tar xzf $R/roots7.tgz -C /tmp/roots; date -u > $OUT/host7.txt
for c in "published/09_layer_norm_16x64x256x256 published_09_root a" "published/09_layer_norm_16x64x256x256 published_09_root b" \
         "level1_bf16/16_bmm 16_bmm_root a" "level2/24_conv2d_depthwise_batchnorm_relu6 level2_24_root a"; do
  set -- $c
  timeout 100 python3 -m kernelwright.graphs.cli eval --json tasks/$1.py /tmp/roots/$2.py > $OUT/e/$2_$3.json 2> $OUT/e/$2_$3.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), 'run %.4f p20-p80 %s-%s eager %.4f vs_eager %.4f vs_compile %s | %s' % \
(r['runtime_ms'], r.get('runtime_p20_ms'), r.get('runtime_p80_ms'), r['eager_ms'], r['speedup_vs_eager'], r.get('speedup_vs_compile'), r.get('timing_note')))" $OUT/e/$2_$3.json $2 || { echo "$2: no result"; tail -3 $OUT/e/$2_$3.err; }
done | tee $OUT/evals7.txt
tar czf $OUT/evals7.tgz -C $OUT e && rm -r $OUT/e
