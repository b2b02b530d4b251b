"""Put the current tasks/region_runtime.py into already-stitched files (their runtime section only):
`python swap_runtime.py STITCHED_DIR`."""

import glob
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from kernelwright.tasks.region_stitch import _runtime_source  # noqa: E402

NEW = _runtime_source()
MARK = "# ---- region runtime (tasks/region_runtime.py) ----\n\n"
files = glob.glob(sys.argv[1] + "/*_stitched.py")
for f in files:
    s = Path(f).read_text()
    i = s.index(MARK) + len(MARK)
    m = re.compile(r"\n\n(import \w+\n)*_WRAP = \(").search(s, i)
    assert m is not None, f
    Path(f).write_text(s[:i] + NEW + s[m.start() :])
print("swapped", len(files))
