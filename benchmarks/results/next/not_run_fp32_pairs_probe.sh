# Not run (sixteenth session, device time spent): do fp32 depthwise taps gain from the word trick too, as two
# floats to a 64-bit word? `python benchmarks/depthwise_words_probe.py --sass --dtype float32` (CPU): 5-21% fewer
# sm_90 instructions per output than element taps (48.4 -> 44.9 at 32 x 128, 67.4 -> 53.3 at 32 x 64), loads
# halved, but the pair interleave goes through shared memory (a barrier per tile). Predicted: 0-15% faster at
# 16 x 64 x 512^2 (published/32's planes; the writer's fp32 plane 0.934 ms in the bench) and at 32 x 128 x 112^2.
# Worth wiring into the writer (the WORDS path with int64 words for fp32) only if >= 10%.
#   bash benchmarks/results/next/not_run_fp32_pairs_probe.sh    (no wheels needed: torch and triton only)
set -u
mkdir -p $OUT; nvidia-smi -L > $OUT/host.txt; date -u >> $OUT/host.txt
timeout 200 python3 benchmarks/depthwise_words_probe.py --dtype float32 --shape 16,64,512,512 --out $OUT > $OUT/fp32_512.log 2>&1
mv $OUT/depthwise_words_float32.json $OUT/fp32_512.json 2>/dev/null
timeout 200 python3 benchmarks/depthwise_words_probe.py --dtype float32 --out $OUT > $OUT/fp32_112.log 2>&1
tail -12 $OUT/fp32_512.log $OUT/fp32_112.log
