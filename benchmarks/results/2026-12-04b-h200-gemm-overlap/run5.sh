# Fifth call: the judge with torch.compile timed in paired rounds with eager and compared through it (after the
# fourth call: the cached torch.compile median of level1_bf16/15, cuBLAS like eager, was 4% below the eager
# medians timed beside each candidate). The same root programs, twice each, and level2/24's
# root once (a train-mode BatchNorm: eager and torch.compile both move its running statistics). Predicted:
# torch.compile's speedup over eager ~1.00 on both GEMMs, so vs torch.compile ~ vs eager (0.93x bmm, 0.99x 15).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
R=benchmarks/results/2026-12-04b-h200-gemm-overlap
tar xzf $R/judged_programs.tgz -C $R  # the programs judged, kept as one tarball
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
for c in "bmm_root tasks/level1_bf16/16_bmm.py 1" "mm15_root tasks/level1_bf16/15_matmul_rect.py 1" \
         "bmm_root tasks/level1_bf16/16_bmm.py 2" "mm15_root tasks/level1_bf16/15_matmul_rect.py 2" \
         "t24_root tasks/level2/24_conv2d_depthwise_batchnorm_relu6.py 1"; do
  set -- $c
  timeout 150 python3 -m kernelwright.graphs.cli eval --json $2 $R/$1.py > $OUT/paired_$1_$3.json 2> $OUT/paired_$1_$3.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); x=r.get('extra',{}); print(sys.argv[2], sys.argv[3], r.get('correct'), \
'run %.4f eager %.4f vs_eager %.4f | compile %s (measured %s, %s x eager) vs_compile %s' % (r['runtime_ms'], r['eager_ms'], \
r['speedup_vs_eager'], r.get('compile_ms'), x.get('compile_ms_measured'), x.get('compile_speedup_vs_eager'), r.get('speedup_vs_compile')))" \
    $OUT/paired_$1_$3.json $1 $3 || { echo "$1 $3: no result"; tail -5 $OUT/paired_$1_$3.err; }
done | tee $OUT/paired.txt
cd $OUT && tar czf paired.tgz paired_* && rm paired_*
