# 2026-12-03, second call: run.sh's --max-programs sweep timed level2/24's norm, not its convolution (a conv
# task takes --variants); here each task's first plane program, old tree and new, in one call.
# Predicted: published/32 0.80 -> 0.62-0.70 ms; level2/24 and level2_bf16/24 0-5% faster.
#   bash benchmarks/results/2026-12-03-h200-one-depth/run2.sh     (carry .whl; ~3 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p $OUT; nvidia-smi -L > $OUT/host2.txt; date -u >> $OUT/host2.txt
mkdir -p /tmp/old && cp -r . /tmp/old/ && (cd /tmp/old && patch -s -p1 < benchmarks/results/2026-12-03-h200-one-depth/revert_one_depth.patch) || exit 1
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1,num_warps=4'
for tree in /tmp/old $PWD; do
  tag=old; [ "$tree" = "$PWD" ] && tag=new
  (cd $tree/benchmarks && export PYTHONPATH=/tmp/site:$tree &&
   for t in published/32:2048:64:1 level2/24:4096:128:0 level2_bf16/24:4096:128:0; do
     IFS=: read task bm bw inner <<< "$t"
     timeout 60 python3 design_sweep.py --no-compile --time-budget-s 40 --out /tmp/s_$tag --tasks $task \
       --variants "$P,BLOCK_M=$bm,BLOCK_W=$bw,INTERIOR=$inner,WORDS=1" >> $OUT/sweep2_$tag.log 2>&1
     echo "tree $tag" >> $OUT/sweep2.md; grep "^| [0-9]" /tmp/s_$tag/design_sweep.md >> $OUT/sweep2.md
   done)
done
cat $OUT/sweep2.md
