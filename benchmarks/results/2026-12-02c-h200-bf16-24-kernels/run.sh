# Run on 2026-12-02 (fifteenth session), written in the fourteenth: where level2_bf16/24's time goes, kernel by kernel. Its
# program (depthwise 3x3 + train-mode batch norm + ReLU6, bf16, 32 x 128 x 112^2) took 0.317-0.333 ms on
# the GPU against torch.compile's 0.243; four passes over the 98 MiB tensor would take ~0.1 ms at 4.3 TB/s,
# so the kernels, not the bytes, are the gap. Root program (stored conv output) and its RECOMPUTE twin, with
# eager's and torch.compile's kernels beside them (benchmarks/kernel_times.py --baselines).
# Predicted: the conv + statistics stage well above its ~0.05 ms of bytes; torch.compile in 2-3 kernels.
#   bash benchmarks/results/2026-12-02c-h200-bf16-24-kernels/run.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT /tmp/p24; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
python3 - <<'PY'
import sys
sys.path.insert(0, "benchmarks")
from _common import root_program, task_path
from kernelwright.hardware.targets import get_target
from kernelwright.providers.offline import parse_meta
from kernelwright.providers.offline.variants import program_variant
from kernelwright.tasks import load_task
task = load_task(task_path("level2_bf16/24"))
root = root_program(task, get_target("nvidia-h200")).code
meta = parse_meta(root)
open("/tmp/p24/stored.py", "w").write(root)
twin = program_variant(task.source, task.name, meta.design, {**meta.config, "RECOMPUTE": True}).code
open("/tmp/p24/recompute.py", "w").write(twin)
print(root.splitlines()[0]); print(twin.splitlines()[0])
PY
timeout 200 python3 benchmarks/kernel_times.py level2_bf16/24 /tmp/p24/stored.py /tmp/p24/recompute.py --baselines \
  --out $OUT > $OUT/kernel_times.log 2>&1; cat $OUT/kernel_times.md
