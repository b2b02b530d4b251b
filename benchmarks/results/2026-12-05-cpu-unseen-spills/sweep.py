"""Root programs of level1/level2/published compiled for an H200 at the traced size and at bench's two unseen sizes:
which kernels spill (or fail) only at unseen sizes."""
import json, sys, time
sys.path.insert(0, '/work/main/tests'); sys.path.insert(0, '/work/main')
from fakes.writer import writer_prompt
from kernelwright.providers.offline.writer import write_program
from kernelwright.hardware.compile.feedback import compile_for_target
from kernelwright.bench.unseen import unseen_sizes
from kernelwright.tasks import bundled_suite_dir
out = open(sys.argv[1], 'a')
suites = sys.argv[2:] or ['level1', 'level2']
for suite in suites:
    for f in sorted(bundled_suite_dir(suite).glob('*.py')):
        src = f.read_text()
        t0 = time.time()
        try:
            prog = write_program(writer_prompt(src)).code
        except Exception as e:
            out.write(json.dumps({'task': f'{suite}/{f.stem}', 'error': f'write: {e}'[:200]}) + '\n'); out.flush(); continue
        if not prog:
            continue
        rows = []
        sizes = [(None, src)]
        try:
            us, note = unseen_sizes(src, f.stem, 2, 'cuda', None)
            sizes += [(u.sizes, u.source) for u in us]
        except Exception as e:
            rows.append({'unseen_error': str(e)[:200]})
        for sz, s in sizes:
            try:
                r = compile_for_target(prog, s, shapes='full', timeout_s=300)
                rows.append({'sizes': sz, 'ok': r.ok, 'err': (r.error_kind or ''),
                             'kernels': [(k.name, k.registers, k.spill_store_bytes, k.constexprs.get('BLOCK_K')) for k in r.kernels]})
            except Exception as e:
                rows.append({'sizes': sz, 'exc': str(e)[:200]})
        out.write(json.dumps({'task': f'{suite}/{f.stem}', 'header': prog.splitlines()[0][14:120], 'rows': rows, 's': round(time.time()-t0,1)}) + '\n'); out.flush()
