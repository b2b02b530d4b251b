# Not run (written in the twenty-fourth session, which had no device time left; carry .whl, ~5 min): the
# cooperative Gluon GEMM (benchmarks/candidates/gemm_gluon_cooperative.py: two consumer warpgroups on one
# 128 x 256 tile, a producer warp, 3 stages; compiled offline for sm_90: 168 registers, 213184 B, no spills)
# judged on level1_bf16/14, 15 and 17 (its A.T variant), each beside the writer's root, whose two 4-warp Triton
# programs per SM ran 14 1.02x, 15 1.02x, 17 0.98-0.99x cuBLAS. Predicted: correct; within -3..+4% of the roots.
# If it wins, it is the long-K counterpart of the writer's ping-pong kernel (providers/offline/emit_gluon.py).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
mkdir -p $OUT /tmp/c; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host.txt
C=benchmarks/candidates/gemm_gluon_cooperative.py
sed 's/^TRANSPOSED_A = False/TRANSPOSED_A = True/' $C > /tmp/c/coop_at.py
python3 - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from _common import root_program, task_path
from kernelwright.hardware.targets import get_target
from kernelwright.tasks import load_task
for spec in ("level1_bf16/14", "level1_bf16/15", "level1_bf16/17"):
    code = root_program(load_task(task_path(spec)), get_target("nvidia-h200")).code
    open(f"/tmp/c/root{spec[-2:]}.py", "w").write(code)
PY
for c in "coop14 14_matmul_square $C" "root14 14_matmul_square /tmp/c/root14.py" "coop15 15_matmul_rect $C" \
         "root15 15_matmul_rect /tmp/c/root15.py" "coop17 17_matmul_transposed_a /tmp/c/coop_at.py" \
         "root17 17_matmul_transposed_a /tmp/c/root17.py"; do
  set -- $c
  timeout 100 python3 -m kernelwright.graphs.cli eval --json tasks/level1_bf16/$2.py $3 > /tmp/c/$1.json 2> /tmp/c/$1.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), r.get('error_kind'), 'run %s eager %s vs_eager %s ci %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci')))" /tmp/c/$1.json $1 || { echo "$1: no result"; tail -3 /tmp/c/$1.err; }
done 2>&1 | tee $OUT/judge.txt
tar czf $OUT/evals.tgz -C /tmp/c .
