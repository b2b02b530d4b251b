# Not run (written in the twentieth session, its device time spent). level2/24's host work with the running
# statistics updated in the statistics kernel (one launch fewer) against the tree before it
# (revert_bn_merge.patch), interleaved twice.
# Predicted: host per call -20..-35 us (of 250-350), judged time down by as much where the host bounds it.
#   bash benchmarks/results/next/not_run_bn_merge_host.sh     (carry .whl; ~2 min)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=benchmarks/results/next
rm -rf /tmp/old && mkdir /tmp/old && cp -r . /tmp/old/ && (cd /tmp/old && patch -s -p1 < $D/revert_bn_merge.patch) || exit 1
for round in 1 2; do
  for tree in old new; do
    dir=$PWD; [ $tree = old ] && dir=/tmp/old
    (cd $dir && PYTHONPATH=/tmp/site:$dir timeout 60 python3 benchmarks/host_vs_gpu.py --tasks level2/24,level2_bf16/24 \
      --after-profiler --out $OUT/hvg_${tree}_$round.json 2>&1 | grep candidate | sed "s/^/$tree $round /")
  done
done
