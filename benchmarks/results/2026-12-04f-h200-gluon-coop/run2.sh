# The cooperative schedule in the writer (emit_gluon COOP; kind_matmul: WS=3, WS_COOP=1 where K > 1024). One call,
# carry .whl, ~5 min:
# 1. layouts3.py: both schedules' `_kw_ws_gemm` at odd sizes and layouts (a written 17 root's helper).
#    Predicted: all correct, declined where expected.
# 2. the writer's roots judged: 14, 15, 17 (cooperative), 14 and 17 with the Gluon call cut (the Triton program
#    alone), 16 (ping-pong) and 16 with the cooperative schedule. Predicted: 14/15/17 as the hand-written twin
#    (1.501, 0.375, 0.369 ms; 1-4% ahead of the Triton program), 16 cooperative slower than ping-pong (K = 1024).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
D=benchmarks/results/2026-12-04f-h200-gluon-coop
mkdir -p $OUT /tmp/c; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host.txt
python3 - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from _common import root_program, task_path
from kernelwright.hardware.targets import get_target
from kernelwright.tasks import load_task
for spec in ("level1_bf16/16", "level1_bf16/14", "level1_bf16/15", "level1_bf16/17"):
    code = root_program(load_task(task_path(spec)), get_target("nvidia-h200")).code
    open(f"/tmp/c/root_{spec.replace('/', '_')}.py", "w").write(code)
PY
for n in 14 17; do sed 's/if _kw_ws_gemm(/if False and _kw_ws_gemm(/' /tmp/c/root_level1_bf16_$n.py > /tmp/c/triton_$n.py; done
sed 's/out0, M, N, K, NB, 8, 5, 0)/out0, M, N, K, NB, 8, 3, 1)/' /tmp/c/root_level1_bf16_16.py > /tmp/c/coop_16.py
grep -c "_kw_ws_gemm(a, sa, b, sb, out0, M, N, K, NB, 8, 3, 1)" /tmp/c/coop_16.py /tmp/c/root_level1_bf16_1[457].py > $OUT/calls.txt
timeout 60 python3 $D/layouts3.py /tmp/c/root_level1_bf16_17.py 2>&1 | tail -25 | tee $OUT/layouts.txt
for c in "coop14 level1_bf16/14_matmul_square /tmp/c/root_level1_bf16_14.py" "triton14 level1_bf16/14_matmul_square /tmp/c/triton_14.py" \
         "coop15 level1_bf16/15_matmul_rect /tmp/c/root_level1_bf16_15.py" \
         "coop17 level1_bf16/17_matmul_transposed_a /tmp/c/root_level1_bf16_17.py" "triton17 level1_bf16/17_matmul_transposed_a /tmp/c/triton_17.py" \
         "pingpong16 level1_bf16/16_bmm /tmp/c/root_level1_bf16_16.py" "coop16 level1_bf16/16_bmm /tmp/c/coop_16.py"; do
  set -- $c
  timeout 100 python3 -m kernelwright.graphs.cli eval --json tasks/$2.py $3 > /tmp/c/$1.json 2> /tmp/c/$1.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), r.get('error_kind'), 'run %s eager %s vs_eager %s ci %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci')))" /tmp/c/$1.json $1 || { echo "$1: no result"; tail -3 /tmp/c/$1.err; }
done 2>&1 | tee $OUT/judge.txt
tar czf $OUT/evals.tgz -C /tmp/c .
