# Second call: the writer's programs with WS (the Gluon ping-pong kernel in the persistent design, commit after
# 4c6ced8). Its host helper at odd sizes and layouts (layouts2.py), then the judge (kernelwright eval) on
# level1_bf16 16, 17, 15 and 14: WS=4 (the new root), WS=0 (the root before: two Triton programs per SM), WS=5.
# Predicted: 16 ~1.02x cuBLAS (0.96x before); 17 and 15 within +-2% of their 0.99x / 1.01x; 14 (K = 8192) the
# same or a little slower than 1.026x (its tiles' epilogue is a small share).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
R=benchmarks/results/2026-12-04e-h200-gluon-bmm
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv) > $OUT/host2.txt
tar xzf $R/programs2.tgz -C /tmp
timeout 120 python3 $R/layouts2.py /tmp/programs2/t16_ws4.py 2>&1 | tail -12 | tee $OUT/layouts2.txt
for c in 16_ws4:16_bmm 16_ws0:16_bmm 17_ws4:17_matmul_transposed_a 17_ws0:17_matmul_transposed_a 15_ws4:15_matmul_rect 15_ws0:15_matmul_rect 14_ws4:14_matmul_square 14_ws0:14_matmul_square 16_ws5:16_bmm; do
  p=${c%%:*}; t=${c##*:}
  timeout 100 python3 -m kernelwright.graphs.cli eval --json tasks/level1_bf16/$t.py /tmp/programs2/t$p.py > /tmp/eval_$p.json 2> /tmp/eval_$p.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), r.get('error_kind'), 'run %s eager %s vs_eager %s ci %s vs_compile %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci'), r.get('speedup_vs_compile')))" /tmp/eval_$p.json $p || { echo "$p: no result"; tail -3 /tmp/eval_$p.err; }
done 2>&1 | tee $OUT/judge2.txt
tar czf $OUT/evals2.tgz -C /tmp $(cd /tmp && ls eval_*.json eval_*.err)
