set -u
mkdir -p $OUT
nvidia-smi -L > $OUT/host.txt
timeout 150 python3 benchmarks/conv_half_probe.py --out $OUT/probe.json --tasks 24,20 --configs ';RECOMPUTE=True' > $OUT/probe.log 2>&1
echo "exit $?" >> $OUT/probe.log
