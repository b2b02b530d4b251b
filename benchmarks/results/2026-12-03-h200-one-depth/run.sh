# 2026-12-03: planes with one output depth without the per-row division (ONE_DEPTH, commit 6e3c283), before
# (a copy of the tree with revert_one_depth.patch applied) and after, in one call: the writer's first program of each task, then
# published/32 with every tile masked (the path an odd width's edge tiles take).
# Predicted from sm_90 SASS counts: published/32 0.80 -> 0.62-0.70 ms; level2/24 and level2_bf16/24 0-5% faster.
#   bash benchmarks/results/2026-12-03-h200-one-depth/run.sh     (carry .whl; ~4 min)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt; git log -1 --format=%h >> $OUT/host.txt
mkdir -p /tmp/old && cp -r . /tmp/old/ && (cd /tmp/old && patch -s -p1 < benchmarks/results/2026-12-03-h200-one-depth/revert_one_depth.patch) || exit 1
grep -c ONE_DEPTH /tmp/old/providers/offline/conv_kernels.py >> $OUT/host.txt
P='direct_depthwise:LAYOUT=nchw,BLOCK_N=1,num_stages=1,num_warps=4,BLOCK_M=2048,BLOCK_W=64'
for tree in /tmp/old $PWD; do
  tag=$(basename $tree); [ "$tree" = "$PWD" ] && tag=new
  (cd $tree/benchmarks && export PYTHONPATH=/tmp/site:$tree &&
   timeout 150 python3 design_sweep.py --no-compile --time-budget-s 120 --max-programs 1 --out /tmp/s_$tag \
     --tasks published/32,level2/24,level2_bf16/24 >> $OUT/sweep_$tag.log 2>&1
   cat /tmp/s_$tag/design_sweep.md >> $OUT/sweep.md
   timeout 60 python3 design_sweep.py --no-compile --time-budget-s 45 --out /tmp/m_$tag --tasks published/32 \
     --variants "$P,INTERIOR=0,WORDS=1;$P,INTERIOR=0,WORDS=0" >> $OUT/sweep_$tag.log 2>&1
   cat /tmp/m_$tag/design_sweep.md >> $OUT/sweep.md)
done
cat $OUT/sweep.md
