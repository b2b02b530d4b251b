# Not run (the twenty-fourth session had no device time left; carry .whl, ~2 min): the writer's bmm root after the commits that followed the
# benches (Triton >= 3.6 gate, empty products to the Triton kernels, shared layouts cached): the helper at odd
# layouts (layouts2.py) and one judge evaluation. Predicted: all correct, ~1.03-1.05x eager as before.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERNELWRIGHT_CACHE_DIR=/tmp/kw-cache
R=benchmarks/results/2026-12-04e-h200-gluon-bmm
mkdir -p $OUT; date -u > $OUT/host7.txt
tar xzf $R/programs7.tgz -C /tmp
timeout 40 python3 $R/layouts2.py /tmp/programs7/t16_root.py 2>&1 | tail -10 | tee $OUT/layouts7.txt
timeout 60 python3 -m kernelwright.graphs.cli eval --json tasks/level1_bf16/16_bmm.py /tmp/programs7/t16_root.py > $OUT/eval7.json 2> /dev/null
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('16 root', r.get('correct'), 'run %s eager %s vs_eager %s ci %s' % \
(r.get('runtime_ms'), r.get('eager_ms'), r.get('speedup_vs_eager'), r.get('speedup_vs_eager_ci')))" $OUT/eval7.json | tee $OUT/judge7.txt
