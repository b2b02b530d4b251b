set -u
mkdir -p $OUT
nvidia-smi -L > $OUT/host.txt; python3 -c 'import torch,triton;print(torch.__version__,triton.__version__)' >> $OUT/host.txt
timeout 330 python3 benchmarks/conv_half_probe.py --out $OUT/probe.json --tasks 09,10,27,24,20 \
  --configs ';BLOCK_M=256;num_stages=4;num_stages=2;num_warps=4;BLOCK_K=32;BLOCK_K=128;GROUP_M=1;LAYOUT=nchw;BLOCK_N=64,num_warps=4' > $OUT/probe.log 2>&1
echo "probe exit $?" >> $OUT/probe.log
tail -5 $OUT/probe.log
BENCH_S=170 BENCH_DIR=/tmp/kw-mm BENCH_ARGS="tasks/level1/14_matmul_square.py tasks/level1/15_matmul_rect.py tasks/level1/17_matmul_transposed_a.py tasks/level2/01_linear_bias_relu.py tasks/level2/11_linear_layernorm_relu.py tasks/level2/12_linear_swiglu.py --budget 1 --seed 0" OUT=$OUT/mm bash benchmarks/bench_device.sh > /dev/null 2>&1
rm -f $OUT/mm/bench.tgz
tar -czf $OUT/mm.tgz -C $OUT mm && rm -rf $OUT/mm
grep -h "geomean\|^| level" $OUT/../mm/suite.md 2>/dev/null | head -3
