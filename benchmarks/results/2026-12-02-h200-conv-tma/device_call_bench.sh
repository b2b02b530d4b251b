set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT
nvidia-smi -L > $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt 2>/dev/null
timeout 100 python3 benchmarks/conv_half_probe.py --out $OUT/probe.json --tasks 09,10,20 --configs ';PERSIST=0;X_TMA=0,PERSIST=0' > $OUT/probe.log 2>&1
echo "probe exit $?" >> $OUT/probe.log
BENCH_S=380 BENCH_DIR=/tmp/kw-bf16 BENCH_ARGS="tasks/level2_bf16 --budget 4 --seed 0" OUT=$OUT/b bash benchmarks/bench_device.sh > /dev/null 2>&1
rm -f $OUT/b/bench.tgz; cp /tmp/kw-bf16/tasks.jsonl $OUT/b/ 2>/dev/null
cp $OUT/b/suite.md $OUT/ 2>/dev/null
tar -czf $OUT/bf16.tgz -C $OUT b && rm -rf $OUT/b
grep -o '"task": "[^"]*"\|"config": {[^}]*}\|"ms": [0-9.]*\|"compile_ms": [0-9.]*' $OUT/probe.log | paste -sd' ' | sed 's/"task"/\n"task"/g; s/"config"/\n  "config"/g'
tail -30 $OUT/suite.md
