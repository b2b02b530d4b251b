"""kernelwright's graphs and their public entry points.

`graphs.optimize` holds the optimize graph (`builder`, `graph`, `run_optimize`); its runtime `Context`
and its `State` live below the nodes (nodes/run_context.py, nodes/state.py; `graphs.context` and
`graphs.state` re-export them under their old names). Import those modules directly: this package
imports nothing eagerly, so `kernelwright --help` stays fast.
"""

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `graphs`.
if __name__ != "kernelwright.graphs":
    raise ImportError(f"import kernelwright.graphs, not {__name__}: the package has one import name")
