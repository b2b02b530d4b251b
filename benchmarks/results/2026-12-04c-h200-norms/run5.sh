# (benchmarks/host_profile_forward.py was removed after this call: `host_vs_gpu.py --profile` gives the same view.)
# Fifth call: where the host time per forward goes (benchmarks/host_profile_forward.py, cProfile) for four
# roots whose judged time has followed the host: published/09 (judged 0.347 ms in run4's bench, p20-p80
# 0.311-0.386, against 0.225 ms of GPU work), 08, level2/24, level2_bf16/20. Predicted: Triton's launcher
# (CompiledKernel's runner) and torch.empty take most of it; the emitted glue (strides, shapes) 20-30%.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
R=benchmarks/results/2026-12-04c-h200-norms
mkdir -p $OUT /tmp/roots; tar xzf $R/roots5.tgz -C /tmp/roots; date -u > $OUT/host5.txt
for c in "published/09 published_09_root" "published/08 published_08_root" "level2/24 level2_24_root" "level2_bf16/20 level2_bf16_20_root"; do
  set -- $c
  timeout 100 python3 benchmarks/host_profile_forward.py $1 /tmp/roots/$2.py --calls 1000 --out $OUT/prof_$2.txt > /dev/null 2> $OUT/err_$2.txt || tail -5 $OUT/err_$2.txt
done
head -45 $OUT/prof_published_09_root.txt; for f in $OUT/prof_*.txt; do head -1 $f; done
tar czf $OUT/profiles.tgz -C $OUT $(cd $OUT; ls prof_*.txt err_*.txt) && rm $OUT/err_*.txt $OUT/prof_*.txt
