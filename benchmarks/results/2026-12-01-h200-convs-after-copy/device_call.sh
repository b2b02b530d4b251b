set -u
mkdir -p $OUT
nvidia-smi -L > $OUT/host.txt
BENCH_S=200 BENCH_DIR=/tmp/kw-pconv BENCH_ARGS="$(ls tasks/published/3[2-6]_conv*.py | tr '\n' ' ') --budget 3 --seed 0" OUT=$OUT/p bash benchmarks/bench_device.sh > /dev/null 2>&1
rm -f $OUT/p/bench.tgz; cp /tmp/kw-pconv/tasks.jsonl $OUT/p/ 2>/dev/null
BENCH_S=150 BENCH_DIR=/tmp/kw-l1bf16 BENCH_ARGS="tasks/level1_bf16 --budget 4 --seed 0" OUT=$OUT/l1 bash benchmarks/bench_device.sh > /dev/null 2>&1
rm -f $OUT/l1/bench.tgz; cp /tmp/kw-l1bf16/tasks.jsonl $OUT/l1/ 2>/dev/null
timeout 100 python3 benchmarks/conv_half_probe.py --out $OUT/probe_fp32.json --suite level2 --tasks 09,10 --configs '' > $OUT/probe_fp32.log 2>&1
timeout 60 python3 benchmarks/conv_half_probe.py --out $OUT/probe_pub.json --suite published --tasks 34 --configs '' > $OUT/probe_pub.log 2>&1
tar -czf $OUT/runs.tgz -C $OUT p l1 && rm -rf $OUT/p $OUT/l1
