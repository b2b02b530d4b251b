"""`kernelwright bench`: optimize every task of one or more folders and report on the suite.

coordinator.py hands tasks to workers (worker.py, one process per GPU; dask.py spreads them over a Dask
cluster), folder.py is the bench folder on disk and its resume log, report.py turns finished tasks into
rows and aggregates, render.py writes suite.json/.md/.html, display.py shows progress, unseen.py judges
each best kernel again at sizes its search never saw. (The maintained measurement scripts are in
benchmarks/ at the repository's top, with their results in benchmarks/RESULTS.md.)
"""

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `bench`.
if __name__ != "kernelwright.bench":
    raise ImportError(f"import kernelwright.bench, not {__name__}: the package has one import name")
