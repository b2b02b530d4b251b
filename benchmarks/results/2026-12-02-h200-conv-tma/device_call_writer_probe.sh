set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT
nvidia-smi -L > $OUT/host.txt
git log -1 --format=%h >> $OUT/host.txt 2>/dev/null
timeout 330 python3 benchmarks/conv_half_probe.py --out $OUT/probe.json --tasks 09,10,20,27 --configs ';X_TMA=1;X_TMA=1,PERSIST=2;X_TMA=1,PERSIST=2,num_stages=4;X_TMA=1,PERSIST=1' > $OUT/probe.log 2>&1
echo "exit $?" >> $OUT/probe.log
grep -o '"task": "[^"]*"\|"config": {[^}]*}\|"ms": [0-9.]*\|"ms_input_cl": [0-9.]*\|"err": [0-9.e-]*\|"compile_ms": [0-9.]*' $OUT/probe.log | paste -sd' ' | sed 's/"task"/\n"task"/g; s/"config"/\n  "config"/g'
