"""The `kernelwright` command: cli/main.py parses the arguments and hands each subcommand to its module here
(cli/optimize.py, cli/bench.py, cli/model.py, cli/eval.py, cli/show.py, cli/memory.py, cli/tasks.py).

A new command is a module with `add_parser(subparsers)` and a `run(args)`, listed in cli/main.py.
Nothing is imported eagerly, so `kernelwright --help` stays fast.
"""

# One import name (kernelwright/__init__.py): from the repository root this folder must not load as `cli`.
if __name__ != "kernelwright.cli":
    raise ImportError(f"import kernelwright.cli, not {__name__}: the package has one import name")
