# Rules on and off with a writer that fails: the offline writer with an H100's habits
# (--model offline:ignore-target-limits) writing for an L4 (99 KiB of shared memory per block), CPU only:
# the interpreter checks each candidate, then each is compiled for sm_89 (real ptxas, shared memory
# and registers against the L4's limits). Two task sets: the fp16 variants of the eight bundled GEMM
# tasks (as in the fourth session's rules figure) at budget 4, and `tasks generate --count 30 --seed 0`
# at budget 3. The two modes of a set ran side by side, one core each.
kernelwright tasks variant --dtype float16 --out /tmp/rv tasks/level2/0[123]_*.py tasks/level2/1[12]_*.py \
  tasks/level1/1[457]_*.py
kernelwright tasks generate --out /tmp/gen0 --count 30 --seed 0
for m in on off; do
  kernelwright bench /tmp/rv --budget 4 --seed 0 --device cpu --target nvidia-l4 --memory fresh --rules $m \
    --model offline:ignore-target-limits --out /tmp/rules/gemm4-$m &
done; wait
for m in on off; do
  kernelwright bench /tmp/gen0 --budget 3 --seed 0 --device cpu --target nvidia-l4 --memory fresh --rules $m \
    --model offline:ignore-target-limits --out /tmp/rules/gen-$m &
done; wait
python benchmarks/failures_by_kind.py /tmp/rules/gemm4-on /tmp/rules/gemm4-off /tmp/rules/gen-on /tmp/rules/gen-off
