#!/usr/bin/env bash
# One device call of the fortieth session (the decoder stage added in the forty-fourth, split in the forty-seventh): the stages named in STAGES run in order until END_S seconds.
#   gemms     benchmarks/probes/underfilled_gemms.py (CASES: only those), at most GEMMS_S seconds
#   sweep     model_profile.py on MODELS, one at a time (40 s each at most, MODEL_S): eager against stitched
#             (CPROFILE=N: the stitched side's Python under cProfile over N calls too)
#   arena     model_profile.py on ARENA_MODELS, each ARENA_REPS (2) times with the replay's arena on and off in turn
#             (KERNELWRIGHT_REPLAY_ARENA=1 / 0: separate processes, alternated), arena_on.jsonl / arena_off.jsonl
#   sweep_old the same on OLD_MODELS as stitched before the session's writer changes (.l3c/l3.tgz's stitched_old/)
#   variants  benchmarks/probes/unseen_variants.py on VTASKS (issue 48's wide-row fallbacks; VLAST: the last N cases),
#             at most VARIANTS_S seconds
#   bias      benchmarks/judge_host_bias.py on each of BIAS_MODELS' stitched program (the judge's time, 2 rounds)
#   sub       model_profile.py on SUB_MODEL with --sub "$SUB" (a text change on its stitched file)
#   bench     kernelwright bench TASKS --budget BUDGET (2) --memory fresh, --unseen 2 by default, until the call's end
#   decoder   benchmarks/decoder_backend.py --budget DEC_BUDGET (1): optimize-model on the bf16 decoder block, then
#             eager, torch.compile, the kernelwright backend (timed choice) and the backend swapped untimed
#   split     benchmarks/probes/host_split.py on SPLIT_CASES with KERNELWRIGHT_KEEP_COPIES=1, then on SPLIT0_CASES with 0
#   time      the judge with its timing (L2 flush, eager and torch.compile baselines) on TMODELS, one at a time
# The models are .l3c/l3.tgz's (kb/ and stitched/; the results README names the commit they were stitched at).
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
END=${END_S:-560}
[ -f .l3c/l3.tgz ] && mkdir -p .l3 && tar -xzf .l3c/l3.tgz -C .l3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.txt
git log -1 --format=%h > $OUT/commit.txt 2>/dev/null
left() { echo $(( END - ($(date +%s) - T0) )); }
for stage in ${STAGES}; do
  echo "== $stage at $(( $(date +%s) - T0 )) s"
  case $stage in
  gemms)
    PYTHONPATH=.:$PYTHONPATH timeout $(( ${GEMMS_S:-280} < $(left) - 20 ? ${GEMMS_S:-280} : $(left) - 20 )) \
      python3 benchmarks/probes/underfilled_gemms.py --out /tmp/gemms ${CASES:+--cases $CASES} > $OUT/gemms.log 2>&1
    echo "exit $?"; cp /tmp/gemms/underfilled_gemms.json $OUT/ 2>/dev/null; grep -v -i warn $OUT/gemms.log | tail -12 ;;
  sweep|sweep_old)  # sweep_old: OLD_MODELS as stitched before this session's writer changes (stitched_old/)
    dir=stitched; models=${MODELS:-}
    [ $stage = sweep_old ] && { dir=stitched_old; models=${OLD_MODELS}; }
    for m in $models; do
      [ $(left) -lt 50 ] && { echo "stopped before $m: the call's time"; break; }
      timeout ${MODEL_S:-40} python3 benchmarks/probes/model_profile.py .l3/kb .l3/$dir $m --out $OUT/$stage.jsonl ${CPROFILE:+--cprofile $CPROFILE} \
        >> $OUT/$stage.log 2>&1 || echo "$m: exit $?" >> $OUT/$stage.log
    done
    grep -v -i warn $OUT/$stage.log | grep -v "^ *_warn" | grep -v TransformerEncoder | cut -c1-200 ;;
  arena)
    for m in ${ARENA_MODELS}; do
      for rep in $(seq ${ARENA_REPS:-2}); do
        for on in 1 0; do
          [ $(left) -lt 40 ] && { echo "stopped before $m: the call's time"; break 3; }
          KERNELWRIGHT_REPLAY_ARENA=$on timeout ${MODEL_S:-40} python3 benchmarks/probes/model_profile.py .l3/kb .l3/stitched $m \
            --out $OUT/arena_$([ $on = 1 ] && echo on || echo off).jsonl >> $OUT/arena.log 2>&1 || echo "$m arena=$on: exit $?" >> $OUT/arena.log
        done
      done
    done
    grep -v -i warn $OUT/arena.log | grep -v "^ *_warn" | grep -v TransformerEncoder | cut -c1-200 ;;
  sub)
    timeout ${MODEL_S:-40} python3 benchmarks/probes/model_profile.py .l3/kb .l3/stitched ${SUB_MODEL} --sub "${SUB}" \
      --out $OUT/sub.jsonl > $OUT/sub.log 2>&1 || echo "exit $?" >> $OUT/sub.log
    grep -v -i warn $OUT/sub.log | grep -v "^ *_warn" | cut -c1-200 ;;
  variants)
    PYTHONPATH=.:$PYTHONPATH timeout $(( ${VARIANTS_S:-150} < $(left) - 10 ? ${VARIANTS_S:-150} : $(left) - 10 )) python3 benchmarks/probes/unseen_variants.py --out /tmp/uv --tasks ${VTASKS} ${VLAST:+--last $VLAST} \
      > $OUT/variants.log 2>&1; echo "exit $?"; cp /tmp/uv/unseen_variants.json $OUT/ 2>/dev/null
    python3 -c "import json,sys; [print(c['task'], c['sizes'], 'eager', c['eager_ms'], {k: v.get('ms', v.get('error')) for k, v in c['variants'].items()}) for c in json.load(open(sys.argv[1]))['cases']]" $OUT/unseen_variants.json ;;
  bias)
    for m in ${BIAS_MODELS}; do
      [ $(left) -lt 120 ] && { echo "stopped before $m: the call's time"; break; }
      PYTHONPATH=.:$PYTHONPATH timeout $(( $(left) - 20 )) python3 benchmarks/judge_host_bias.py --task .l3/kb/$m.py \
        --program .l3/stitched/${m}_stitched.py --teardown both --rounds 1 --timeout 90 --out $OUT/bias_$m.json >> $OUT/bias.log 2>&1
      echo "$m exit $?"; grep '^{' $OUT/bias.log | tail -2 | cut -c1-300
    done ;;
  bench)
    timeout -s TERM -k 20 $(( $(left) - 15 )) python3 -m kernelwright bench ${TASKS} --budget ${BUDGET:-2} --memory fresh \
      --out /tmp/bench > $OUT/bench.log 2>&1; echo "bench exit $?"
    cp /tmp/bench/suite.json /tmp/bench/suite.md $OUT/ 2>/dev/null; grep -v -i warn $OUT/bench.log | tail -8 ;;
  decoder)
    timeout -s TERM -k 20 $(( $(left) - 15 )) python3 benchmarks/decoder_backend.py --out /tmp/dec --budget ${DEC_BUDGET:-1} \
      --device cuda > $OUT/decoder.log 2>&1; echo "decoder exit $?"
    cp /tmp/dec/decoder_backend.json $OUT/ 2>/dev/null; grep -v -i warn $OUT/decoder.log | tail -6 | cut -c1-400 ;;
  split)
    for keep in 1 0; do
      cases=$SPLIT_CASES; [ $keep = 0 ] && cases=${SPLIT0_CASES:-}
      [ -z "$cases" ] && continue
      (export PYTHONPATH=$PWD:$PYTHONPATH; cd benchmarks/probes && KERNELWRIGHT_KEEP_COPIES=$keep timeout $(( $(left) - 30 )) python3 host_split.py --calls 30 \
        --out /tmp/split$keep $cases > $OUT/split$keep.log 2>&1); echo "split keep=$keep exit $?"
      cp /tmp/split$keep/host_split.json $OUT/host_split_keep$keep.json 2>/dev/null
    done ;;
  time)
    python3 benchmarks/level3_first_programs.py judge ${TMODELS} --kb .l3/kb --stitched .l3/stitched --out $OUT/timed -j 1 \
      --limit-s ${LIMIT:-110} --stage-timeout $(( ${LIMIT:-110} - 20 )) --deadline-s $(( $(left) - 15 )) > $OUT/timed.log 2>&1
    cut -c1-200 $OUT/timed/table.md 2>/dev/null ;;
  esac
done
# at most eight files come back: folders and logs as one archive
tar -czf $OUT/logs.tgz -C $OUT $(cd $OUT && ls -d */ *.log 2>/dev/null) && rm -rf $OUT/*/ $OUT/*.log
