set -u
mkdir -p $OUT
nvidia-smi -L > $OUT/host.txt; python3 -c 'import torch,triton;print(torch.__version__,triton.__version__)' >> $OUT/host.txt
timeout 230 python3 benchmarks/conv_half_probe.py --out $OUT/probe.json --tasks 09,10,27,20 \
  --configs ';PERSIST=1;PERSIST=2;num_stages=4;PERSIST=1,num_stages=4;BLOCK_M=256,num_warps=8;BLOCK_M=256,num_warps=8,PERSIST=1;BLOCK_K=32,num_stages=4;num_warps=8' > $OUT/probe.log 2>&1
echo "probe exit $?" >> $OUT/probe.log
BENCH_S=300 BENCH_DIR=/tmp/kw-bf16 BENCH_ARGS="tasks/level2_bf16 --budget 4 --seed 0" OUT=$OUT/b bash benchmarks/bench_device.sh > /dev/null 2>&1
rm -f $OUT/b/bench.tgz; cp /tmp/kw-bf16/tasks.jsonl $OUT/b/ 2>/dev/null
tar -czf $OUT/bf16.tgz -C $OUT b && rm -rf $OUT/b
