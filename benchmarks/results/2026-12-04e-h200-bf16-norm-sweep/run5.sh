# Fifth call: the bf16 RMS norms below torch.compile in the bench (run3.sh: level2_bf16/05 RMSnorm * SiLU(gate)
# 0.84x at 0.127 ms, its root started from a near task's case: num_warps=4, PRELOAD=0; level1_bf16/12 0.95x):
# the writer's design grid for both (design_sweep.py), to see whether any config reaches torch.compile's time.
# Predicted: a whole-row config with PRELOAD=1 and 8-16 warps within 5% of torch.compile on both.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host5.txt
timeout 330 python3 benchmarks/design_sweep.py --tasks level2_bf16/05,level1_bf16/12 --max-programs 14 \
  --time-budget-s 290 --out /tmp/sweep > $OUT/sweep5.log 2>&1
cp /tmp/sweep/design_sweep.md /tmp/sweep/design_sweep.json $OUT/ 2>/dev/null; tail -40 /tmp/sweep/design_sweep.md
