# 2026-12-03, third call: level2_bf16/24 read 0.207 ms (old) and 0.358 (new) in run2.sh, where the fp32 tasks
# gained 14-24%. Again, new tree first this time, then old, then new.
#   bash benchmarks/results/2026-12-03-h200-one-depth/run3.sh     (carry .whl; ~2 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p $OUT; date -u > $OUT/host3.txt
mkdir -p /tmp/old && cp -r . /tmp/old/ && (cd /tmp/old && patch -s -p1 < benchmarks/results/2026-12-03-h200-one-depth/revert_one_depth.patch) || exit 1
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1,num_warps=4,BLOCK_M=4096,BLOCK_W=128,INTERIOR=0,WORDS=1'
for tree in $PWD /tmp/old $PWD; do
  tag=old; [ "$tree" = "$PWD" ] && tag=new
  (cd $tree/benchmarks && export PYTHONPATH=/tmp/site:$tree &&
   timeout 50 python3 design_sweep.py --no-compile --time-budget-s 30 --out /tmp/s3 --tasks level2_bf16/24 --variants "$P" >> $OUT/sweep3.log 2>&1
   echo "tree $tag" >> $OUT/sweep3.md; grep "^| [0-9]" /tmp/s3/design_sweep.md >> $OUT/sweep3.md)
done
cat $OUT/sweep3.md
