# The device call that ran this folder's run.sh and then ../2026-12-02c-h200-matmul-ws/run.sh (then still under results/next/).
set -u
export OUT0=$OUT
mkdir -p $OUT/k24 $OUT/ws
OUT=$OUT0/k24 bash benchmarks/results/next/not_run_bf16_24_kernels.sh > $OUT0/k24.out 2>&1
OUT=$OUT0/ws bash benchmarks/results/next/not_run_matmul_ws.sh > $OUT0/ws.out 2>&1
cd $OUT0 && tar czf k24.tgz k24 && tar czf ws.tgz ws && cat k24/kernel_times.md ws/design_sweep.md; tail -5 ws.out
