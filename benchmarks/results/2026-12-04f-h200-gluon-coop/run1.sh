# Run in the twenty-fifth session (2026-12-04, 17:20 UTC; output under run1/), written in the twenty-fourth. One call:
# 1. the writer's bmm root (level1_bf16/16, WS=5) after the commits that followed that session's GPU runs (Triton
#    >= 3.6 gate, empty products to the Triton kernels, shared layouts cached): its helper at odd sizes and
#    layouts (layouts2.py) and one judge evaluation. Predicted: all correct, 1.03-1.05x eager as before.
# 2. the cooperative Gluon GEMM (benchmarks/candidates/gemm_gluon_cooperative.py: two consumer warpgroups on one
#    128 x 256 tile, a producer warp, 3 stages; compiled offline for sm_90: 168 registers, 213184 B, no spills) on
#    level1_bf16/14, 15 and 17 (its A.T variant), each beside the writer's root (two 4-warp Triton programs per SM:
#    14 1.02x, 15 1.02x, 17 0.98-0.99x cuBLAS). Predicted: correct; within -3..+4% of the roots.
# 3. the ping-pong bmm with the epilogue in its consumers (benchmarks/candidates/bmm_residual_gluon_pingpong.py,
#    5 stages; offline: 168 registers, 229656 B, no spills) on level2_bf16/06 beside the writer's root (0.481 ms,
#    1.53x eager). Predicted: correct; 0.43-0.46 ms (the bmm alone gained 6% with the ping-pong kernel).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
mkdir -p $OUT /tmp/c; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host.txt
C=benchmarks/candidates
sed 's/^TRANSPOSED_A = False/TRANSPOSED_A = True/' $C/gemm_gluon_cooperative.py > /tmp/c/coop_at.py
python3 - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from _common import root_program, task_path
from kernelwright.hardware.targets import get_target
from kernelwright.tasks import load_task
for spec in ("level1_bf16/16", "level1_bf16/14", "level1_bf16/15", "level1_bf16/17", "level2_bf16/06"):
    code = root_program(load_task(task_path(spec)), get_target("nvidia-h200")).code
    open(f"/tmp/c/root_{spec.replace('/', '_')}.py", "w").write(code)
PY
timeout 40 python3 benchmarks/results/2026-12-04e-h200-gluon-bmm/layouts2.py /tmp/c/root_level1_bf16_16.py 2>&1 | tail -10 | tee $OUT/layouts.txt
for c in "root16 level1_bf16/16_bmm /tmp/c/root_level1_bf16_16.py" \
         "coop14 level1_bf16/14_matmul_square $C/gemm_gluon_cooperative.py" "root14 level1_bf16/14_matmul_square /tmp/c/root_level1_bf16_14.py" \
         "coop15 level1_bf16/15_matmul_rect $C/gemm_gluon_cooperative.py" "root15 level1_bf16/15_matmul_rect /tmp/c/root_level1_bf16_15.py" \
         "coop17 level1_bf16/17_matmul_transposed_a /tmp/c/coop_at.py" "root17 level1_bf16/17_matmul_transposed_a /tmp/c/root_level1_bf16_17.py" \
         "res06 level2_bf16/06_bmm_scale_residual $C/bmm_residual_gluon_pingpong.py" "root06 level2_bf16/06_bmm_scale_residual /tmp/c/root_level2_bf16_06.py"; do
  set -- $c
  timeout 100 python3 -m kernelwright.graphs.cli eval --json tasks/$2.py $3 > /tmp/c/$1.json 2> /tmp/c/$1.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), r.get('error_kind'), 'run %s eager %s vs_eager %s ci %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci')))" /tmp/c/$1.json $1 || { echo "$1: no result"; tail -3 /tmp/c/$1.err; }
done 2>&1 | tee $OUT/judge.txt
tar czf $OUT/evals.tgz -C /tmp/c .
