"""The optimize graph's `State` and records, under their old import path.

Kept for code outside this repository that imports `kernelwright.graphs.state`; the state lives in
nodes/state.py, below the nodes that read and write it.
"""

from kernelwright.nodes.state import *  # noqa: F403
from kernelwright.nodes.state import __all__ as __all__
