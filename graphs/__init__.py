"""kernelwright's graphs and their public entry points.

`graphs.optimize` holds the optimize graph (`builder`, `graph`, `run_optimize`); `graphs.context` its
runtime `Context`; `graphs.state` its `State` and records. Import those modules directly: this package
imports nothing eagerly, so `kernelwright --help` stays fast.
"""
