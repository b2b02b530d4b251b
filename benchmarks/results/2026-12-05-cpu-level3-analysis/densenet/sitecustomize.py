"""For timing a `git archive` copy of the repository: put this folder and the copy's root on PYTHONPATH
(`PYTHONPATH=THIS_FOLDER:COPY`). The venv's editable install maps kernelwright.<folder> to the working tree
ahead of the copy's own finder, so without this a copy's kernelwright/__init__.py loads the working tree's
providers/; this drops the editable finder, and kernelwright then loads every folder from the copy."""

import sys

sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
