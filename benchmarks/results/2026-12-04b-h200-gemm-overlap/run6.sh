# Sixth call (the session's last device minutes): the real judge on the two-per-SM variant (128 x 128 tiles, 4 warps,
# 3 stages), whose paired ratios in the probe were the best (bmm 0.984 vs root 0.936) while position-matched
# times were not. Predicted: within 1% of the root's 0.922-0.931x eager, i.e. the probe's ratio gain a position
# artifact.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
R=benchmarks/results/2026-12-04b-h200-gemm-overlap
tar xzf $R/judged_programs.tgz -C $R  # the programs judged, kept as one tarball
mkdir -p $OUT; date -u > $OUT/host6.txt
for c in "bmm_w4s3 tasks/level1_bf16/16_bmm.py" "bmm_root tasks/level1_bf16/16_bmm.py" "mm15_w4s3 tasks/level1_bf16/15_matmul_rect.py"; do
  set -- $c
  timeout 60 python3 -m kernelwright.graphs.cli eval --json $2 $R/$1.py > $OUT/w_$1.json 2> /dev/null
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), 'run %.4f eager %.4f vs_eager %.4f ci %s vs_compile %s' % \
(r['runtime_ms'], r['eager_ms'], r['speedup_vs_eager'], r.get('speedup_vs_eager_ci'), r.get('speedup_vs_compile')))" $OUT/w_$1.json $1 || echo "$1: no result"
done | tee $OUT/w4s3.txt
