# Fourth call, after the two consumers became one function (COOP a constexpr of it; the PTX compiled offline for
# sm_90 is the same but for a multiply per tile in the cooperative schedule): layouts3.py on a written 17 root,
# then 17 (cooperative) and 16 (ping-pong) judged. Predicted: all correct, 0.366-0.375 and 0.39-0.40 ms as in run2.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
D=benchmarks/results/2026-12-04f-h200-gluon-coop
mkdir -p $OUT /tmp/c; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host4.txt
python3 - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from _common import root_program, task_path
from kernelwright.hardware.targets import get_target
from kernelwright.tasks import load_task
for spec in ("level1_bf16/16", "level1_bf16/17"):
    code = root_program(load_task(task_path(spec)), get_target("nvidia-h200")).code
    open(f"/tmp/c/root_{spec.replace('/', '_')}.py", "w").write(code)
PY
timeout 60 python3 $D/layouts3.py /tmp/c/root_level1_bf16_17.py 2>&1 | tail -25 | tee $OUT/layouts4.txt
for c in "coop17 level1_bf16/17_matmul_transposed_a /tmp/c/root_level1_bf16_17.py" "pingpong16 level1_bf16/16_bmm /tmp/c/root_level1_bf16_16.py"; do
  set -- $c
  timeout 100 python3 -m kernelwright.graphs.cli eval --json tasks/$2.py $3 > /tmp/c/$1.json 2> /tmp/c/$1.err
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], r.get('correct'), r.get('error_kind'), 'run %s eager %s vs_eager %s ci %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci')))" /tmp/c/$1.json $1 || { echo "$1: no result"; tail -3 /tmp/c/$1.err; }
done 2>&1 | tee $OUT/judge4.txt
tar czf $OUT/evals4.tgz -C /tmp/c .
