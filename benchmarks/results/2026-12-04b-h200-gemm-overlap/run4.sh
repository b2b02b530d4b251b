# Fourth call: does the judge's fixed order (candidate first in every round) favour one side? The real judge
# (`kernelwright eval --json`) on the writer's root programs for level1_bf16/16 (bmm) and level1_bf16/15, in
# the tree before alternate_order.patch (fixed order) and after it (each side first in every other round),
# three times each, interleaved. Predicted: if the first side of a round gains from the pause before it, the
# fixed order's speedup vs eager is higher than the alternating one's by up to a few %; else equal within noise.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
R=benchmarks/results/2026-12-04b-h200-gemm-overlap
tar xzf $R/judged_programs.tgz -C $R  # the programs judged, kept as one tarball
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
rm -rf /tmp/fixed && mkdir /tmp/fixed && cp -r . /tmp/fixed/ && (cd /tmp/fixed && patch -s -R -p1 < $R/alternate_order.patch) || exit 1
export KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
for i in 1 2 3; do
  for tree in fixed alternating; do
    dir=$PWD; [ $tree = fixed ] && dir=/tmp/fixed
    for c in "bmm_root tasks/level1_bf16/16_bmm.py" "mm15_root tasks/level1_bf16/15_matmul_rect.py"; do
      set -- $c
      (cd $dir && PYTHONPATH=/tmp/site:$dir timeout 120 python3 -m kernelwright.graphs.cli eval --json $2 $R/$1.py \
        > $OUT/${tree}_$1_$i.json 2> /dev/null)
      python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], sys.argv[4], r.get('correct'), \
'run %.4f eager %.4f compile %s vs_eager %.4f ci %s vs_compile %s' % (r['runtime_ms'], r['eager_ms'], r.get('compile_ms'), \
r['speedup_vs_eager'], r.get('speedup_vs_eager_ci'), r.get('speedup_vs_compile')))" $OUT/${tree}_$1_$i.json $tree $1 $i \
        || echo "$tree $1 $i: no result"
    done
  done
done | tee $OUT/order.txt
cd $OUT && tar czf evals.tgz *_root_*.json && rm *_root_*.json
