"""The optimize graph's nodes, one module each, plus what they share.

planner (start a run, rebuild the tree, decide and fan out), context (the prompt, via the active
context manager in context_builder), coder (chat model -> one ModelNew program), compiler (static check,
worker verification, GPU compile check), profiler (timing where it means something), reflector (case,
rule, exposure), finalize (best kernel, result.json, report.html via report). Below them, shared with
graphs/: state (the graph's checkpointed State), run_context (the runtime Context), records (the typed
records inside the state), search (the tree-search strategy, no LangGraph). Also prompts (every prompt
text), resources (the shared pools/memories/models) and evaluations (the run's append-only evaluation
log). nodes/ never imports graphs/ (tests/unit/test_layers.py). Nothing is imported eagerly.
"""

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `nodes`.
if __name__ != "kernelwright.nodes":
    raise ImportError(f"import kernelwright.nodes, not {__name__}: the package has one import name")
