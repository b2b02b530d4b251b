"""Put the current tasks/region_runtime.py into already-stitched files (their runtime section only): `python swap_runtime.py STITCHED_DIR`."""
import re, sys, glob
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
from kernelwright.tasks.region_stitch import _runtime_source
new = _runtime_source()
MARK = "# ---- region runtime (tasks/region_runtime.py) ----\n\n"
for f in glob.glob(sys.argv[1] + "/*_stitched.py"):
    s = open(f).read()
    i = s.index(MARK) + len(MARK)
    m = re.compile(r"\n\n(import \w+\n)*_WRAP = \(").search(s, i)
    s = s[:i] + new + s[m.start():]
    open(f, "w").write(s)
print("swapped", len(glob.glob(sys.argv[1] + "/*_stitched.py")))
