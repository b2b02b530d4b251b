# What torch.compile writes for the bf16 row norms the writer trails (level1_bf16/12 RMS norm 0.95x, 11 layer norm
# 1.00x torch.compile): Inductor's kernels and picked configs, and the writer's roots, to compare offline (~1.5 min).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host.txt
python3 benchmarks/inductor_code.py --tasks level1_bf16/12,level1_bf16/11 --out /tmp/ind 2>&1 | tail -4
python3 - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from _common import root_program, task_path
from kernelwright.hardware.targets import get_target
from kernelwright.tasks import load_task
for spec in ("level1_bf16/12", "level1_bf16/11"):
    code = root_program(load_task(task_path(spec)), get_target("nvidia-h200")).code
    open(f"/tmp/ind/root_{spec.replace('/', '_')}.py", "w").write(code)
PY
tar czf $OUT/code.tgz -C /tmp ind
