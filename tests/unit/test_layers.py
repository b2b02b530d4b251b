"""Dependencies point one way: cli -> bench -> graphs -> nodes -> (providers, memory, hardware, tasks).

nodes/ shares the run's types (Context, State, records) with graphs/ from below, so no module of nodes/
names graphs/, not even for a type checker; and importing every nodes module loads no graphs module.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOWER = ("providers", "memory", "hardware", "tasks")


def imported_modules(path: Path) -> set[str]:
    """Every module an `import` or `from ... import` in the file names (nested and TYPE_CHECKING ones too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def offending(folders: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in sorted(imported_modules(path)):
                if any(name == f or name.startswith(f + ".") for f in forbidden):
                    bad.append(f"{path.relative_to(ROOT)} imports {name}")
    return bad


def fresh_interpreter_json(script: str) -> object:
    """What `script` prints as JSON on its last line, run in a fresh interpreter that imports this checkout."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_nodes_never_import_graphs():
    assert offending(("nodes",), ("kernelwright.graphs",)) == []


def test_the_lower_layers_import_neither_nodes_nor_graphs():
    assert offending(LOWER, ("kernelwright.graphs", "kernelwright.nodes")) == []


def test_importing_every_node_module_loads_no_graphs_module():
    modules = sorted(
        f"kernelwright.nodes.{p.stem}" for p in (ROOT / "nodes").glob("*.py") if p.stem != "__init__"
    )
    script = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(n for n in sys.modules if n.startswith('kernelwright.graphs'))))\n"
    )
    assert fresh_interpreter_json(script) == []


def test_the_judges_entry_starts_its_fork_server_before_torch_is_imported():
    """hardware.judge.process starts the fork server, then imports the judge: both import torch at once.
    The package's names load on first use, so that entry (and `import kernelwright.hardware`) stays light;
    a name shared by a module and a function (static_check) is the function however the modules load."""
    script = (
        "import json, sys\n"
        "import kernelwright.hardware, kernelwright.hardware.judge.process\n"
        "light = 'torch' not in sys.modules\n"
        "import kernelwright.hardware.judge.pool\n"
        "from kernelwright.hardware import WorkerPool, static_check\n"
        "print(json.dumps([light, callable(static_check), WorkerPool.__module__]))\n"
    )
    assert fresh_interpreter_json(script) == [True, True, "kernelwright.hardware.judge.pool"]


def test_the_memory_loads_neither_torch_nor_langchain():
    """`kernelwright memory ...`, the memory's writer processes and the records import the task signature and
    the kernel header only: the tasks and providers packages load their names on first use, so neither torch
    (the task analysis) nor LangChain (the chat models) comes with them (`memory stats` took 5.2 s, now ~1 s)."""
    script = (
        "import json, sys\n"
        "import kernelwright.memory, kernelwright.memory.records\n"
        "heavy = sorted(m for m in ('torch', 'langchain_core', 'triton') if m in sys.modules)\n"
        "from kernelwright.tasks import load_task, TaskSignature\n"
        "from kernelwright.providers import KernelHeader, load_chat_model\n"
        "print(json.dumps([heavy, load_task.__module__, 'langchain_core' in sys.modules]))\n"
    )
    assert fresh_interpreter_json(script) == [[], "kernelwright.tasks.loader", True]


def test_reading_a_run_loads_neither_the_graph_nor_torch():
    """`kernelwright show` reads run.json and the checkpoints through graphs/run_files.py, not through the
    optimize graph, whose nodes import torch (it took 5.6 s, now ~0.5 s)."""
    script = (
        "import json, sys\n"
        "import kernelwright.graphs.run_files, kernelwright.cli.show\n"
        "heavy = sorted(m for m in ('torch', 'triton', 'kernelwright.graphs.optimize') if m in sys.modules)\n"
        "print(json.dumps(heavy))\n"
    )
    assert fresh_interpreter_json(script) == []
