# First call: judged A/B of GEMM variants (`kernelwright eval --json`, the real judge, one program per eval).
# bmm level1_bf16/16 (root: two programs per SM, 128 x 128 x 64, 0.968x cuBLAS last session) against
#   ctas2 / ctas2p1: the root launched as clusters of two CTAs (num_ctas=2; 264 / 132 programs);
#   k32s6, k32s5: 32-wide K steps in 6 / 5 stages; g1: GROUP_M=1.
# level1_bf16/17 (K = 4096) and /14 (K = 8192): the root (one 128 x 256 program per SM) against `two`
#   (two 128 x 128 programs per SM, the short-K default). level2_bf16/06: old root vs new (PER_SM=2).
# Predicted: bmm variants within 1% of the root (ctas2 unknown: Triton may not multicast), 17 two 0-2% faster,
# 14 two within 1%, l2b06 new 2-5% faster.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
R=benchmarks/results/2026-12-04c-h200-gemm-variants
tar xzf $R/programs.tgz -C /tmp
tar xzf $R/l2b06_programs.tgz -C /tmp/programs
mkdir -p $OUT/evals; nvidia-smi -L > $OUT/host1.txt; date -u >> $OUT/host1.txt
T0=$(date +%s)
one() {  # name task
  [ $(( $(date +%s) - T0 )) -gt 470 ] && { echo "$1: skipped (time)"; return; }
  timeout 90 python3 -m kernelwright.graphs.cli eval --json $2 /tmp/programs/$1.py > $OUT/evals/$1.json 2> $OUT/evals/$1.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), 'run %.4f eager %.4f vs_eager %.4f ci %s vs_compile %s' % \
(r['runtime_ms'], r['eager_ms'], r['speedup_vs_eager'], r.get('speedup_vs_eager_ci'), r.get('speedup_vs_compile')))" $OUT/evals/$1.json $1 || { echo "$1: no result"; tail -3 $OUT/evals/$1.err; }
}
L1=tasks/level1_bf16
{
one 16_bmm_root $L1/16_bmm.py
one 16_bmm_ctas2p1 $L1/16_bmm.py
one 16_bmm_ctas2 $L1/16_bmm.py
one 16_bmm_k32s6 $L1/16_bmm.py
one 17_matmul_transposed_a_two $L1/17_matmul_transposed_a.py
one 17_matmul_transposed_a_root $L1/17_matmul_transposed_a.py
one l2b06_new_root tasks/level2_bf16/06_bmm_scale_residual.py
one l2b06_old_root tasks/level2_bf16/06_bmm_scale_residual.py
one 14_matmul_square_two $L1/14_matmul_square.py
one 14_matmul_square_root $L1/14_matmul_square.py
one 16_bmm_root $L1/16_bmm.py
one 16_bmm_k32s5 $L1/16_bmm.py
one 16_bmm_g1 $L1/16_bmm.py
} 2>&1 | tee $OUT/evals1.txt
tar czf $OUT/evals1.tgz -C $OUT evals && rm -r $OUT/evals
nvidia-smi --query-gpu=power.draw,clocks.sm,temperature.gpu --format=csv >> $OUT/host1.txt
