# Session 12, call 3: transfer on the generated convolution tasks, part 1: the 7 conv tasks of
# `tasks generate --count 30 --seed 0` with --memory off; then a memory filled by the bundled level-2
# 2-D/1-D convolution tasks (fp32, budget 4, seed 0, --memory fresh) for part 2 (with memory).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT/t; nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt; date -u >> $OUT/host.txt
export PYTHONUNBUFFERED=1
OUT=$OUT/t MODES=without PICK="01 07 09 14 21 24 28" BENCH_S=240 bash benchmarks/transfer_device.sh
date -u >> $OUT/host.txt
L=tasks/level2
timeout -s TERM -k 20 250 python3 -m kernelwright.graphs.cli bench $L/09_*.py $L/10_*.py $L/20_*.py $L/24_*.py $L/27_*.py \
  --budget 4 --seed 0 --memory fresh --out /tmp/kw-fill > $OUT/t/fill.log 2>&1; echo "fill exit $?" >> $OUT/t/fill.log
tail -4 $OUT/t/fill.log
cp /tmp/kw-fill/suite.md /tmp/kw-fill/suite.json $OUT/t/ 2>/dev/null
tar -czf $OUT/memory.tgz -C /tmp/kw-fill memory
tar -czf $OUT/transfer-without.tgz -C $OUT t && rm -rf $OUT/t
date -u >> $OUT/host.txt; ls -la $OUT
