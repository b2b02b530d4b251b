# (root16.py, the writer's root program judged here, is kept in programs1.tgz: tar xzf it here first.)
# First call: does the Gluon ping-pong bmm (benchmarks/candidates/bmm_gluon_pingpong.py) run, is it correct, and
# how does it time against cuBLAS and the writer's root (two Triton programs per SM, 0.97x cuBLAS in the judge)?
# Predicted: correct; 0.98-1.03x cuBLAS in the probe; then the judge's verdict on the task.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
R=benchmarks/results/2026-12-04e-h200-gluon-bmm
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv) > $OUT/host1.txt
for v in "4 8" "3 8" "5 8" "4 16"; do
  timeout 90 python3 $R/probe.py $v 2>&1 | tail -12 || echo "variant $v: rc $?"
done 2>&1 | tee $OUT/probe1.log
for c in "gluon benchmarks/candidates/bmm_gluon_pingpong.py" "root $R/root16.py" "gluon2 benchmarks/candidates/bmm_gluon_pingpong.py"; do
  set -- $c
  timeout 150 python3 -m kernelwright.graphs.cli eval --json tasks/level1_bf16/16_bmm.py $2 > $OUT/eval_$1.json 2> $OUT/eval_$1.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), r.get('verdict', ''), 'run %s eager %s vs_eager %s ci %s vs_compile %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci'), r.get('speedup_vs_compile')))" $OUT/eval_$1.json $1 || { echo "$1: no result"; tail -5 $OUT/eval_$1.err; }
done 2>&1 | tee $OUT/judge1.txt
