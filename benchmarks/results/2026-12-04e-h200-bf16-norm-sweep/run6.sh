# Sixth call (the session's last device minutes): level2_bf16 alone at budget 4 after the PRELOAD default for
# half-precision rows (commit after 9cd083b). Predicted: 05 (RMSnorm * SiLU(gate)) from 0.127 ms (0.84x
# torch.compile) to ~0.104 (1.0x) if its root is the writer's default, unchanged if the memory of 04 (the suite's
# earlier norm) starts it from that task's config; the other tasks within their spread; level2_bf16 1.27-1.29x.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p $OUT; (date -u; nvidia-smi --query-gpu=name,driver_version --format=csv) > $OUT/host6.txt
export PYTHONPATH=/tmp/site:$PWD
BENCH_S=230 BENCH_DIR=/tmp/kw-l2b BENCH_TGZ=none BENCH_ARGS="tasks/level2_bf16 --budget 4 --seed 0" \
  OUT=/tmp/o1 bash benchmarks/bench_device.sh > $OUT/bench6.log 2>&1
cp /tmp/o1/suite.md $OUT/suite6.md; cp /tmp/o1/suite.json $OUT/suite6.json; tail -4 $OUT/bench6.log
