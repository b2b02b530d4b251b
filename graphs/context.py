"""The optimize graph's runtime `Context`, under the name the README documents.

Kept for code outside this repository that imports `kernelwright.graphs.context.Context`; the class
lives in nodes/run_context.py, below the nodes that read it.
"""

from kernelwright.nodes.run_context import Context

__all__ = ["Context"]
