"""benchmarks/_common.py for the probes, which import it as `_common` from their own folder, as they ran.

The real module is loaded from benchmarks/ and takes this one's place in sys.modules, so a probe and a
maintained script share one `_common`.
"""

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_common", Path(__file__).resolve().parents[1] / "_common.py")
assert _spec is not None and _spec.loader is not None
sys.modules["_common"] = _module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
