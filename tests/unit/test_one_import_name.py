"""kernelwright has one import name: its folders load as kernelwright.<folder> and under no other name.

- from the repository root (on sys.path for pytest and `langgraph dev`) `import nodes` and the rest fail
  with a one-line error, so `nodes.records.Attempt` cannot exist beside `kernelwright.nodes.records.Attempt`;
- no link holds the package together, and the folders are named once (kernelwright.SUBPACKAGES, which
  pyproject's package-dir and the tree match);
- a wheel built from the tree (a new subpackage found without any edit) installs and imports;
- a run's checkpoints and a memory folder written by an earlier version (d671c06, when kernelwright/ held
  links) still load, as the same record types.
The check that no test process ends with such a module loaded is in tests/conftest.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

import kernelwright
from kernelwright import SUBPACKAGES
from tests.conftest import bare_modules

ROOT = Path(__file__).resolve().parents[2]
OLD_RUN_AND_MEMORY = Path(__file__).resolve().parent / "data" / "run_and_memory_d671c06.tar.gz"


def run_python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env or None, capture_output=True, text=True, timeout=120
    )


def test_no_folder_loads_under_its_bare_name_from_the_repository_root() -> None:
    code = (
        "import sys\n"
        "assert sys.path[0] == '', sys.path[0]\n"
        f"for name in {SUBPACKAGES!r}:\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ImportError as e:\n"
        "        print(e)\n"
        "    else:\n"
        "        print('LOADED', name)\n"
        "import kernelwright.nodes.records, kernelwright.cli.main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        f"{SUBPACKAGES!r}))\n"
    )
    done = run_python(code, ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[:-1] == [
        f"import kernelwright.{name}, not {name}: the package has one import name" for name in SUBPACKAGES
    ]
    assert lines[-1] == "[]"


def test_bare_modules_names_only_the_folders_under_a_second_name() -> None:
    names = [
        "kernelwright",
        "kernelwright.nodes.records",
        "nodes",
        "nodes.records",
        "tasks.loader",
        "taskset",
    ]
    assert bare_modules(names) == ["nodes", "nodes.records", "tasks.loader"]


def test_this_process_loaded_no_folder_under_a_second_name() -> None:
    import kernelwright.graphs.optimize  # noqa: F401 - loads nodes, hardware, tasks, memory, providers
    import kernelwright.nodes.records as records

    assert records.Attempt.__module__ == "kernelwright.nodes.records"
    assert bare_modules(list(sys.modules)) == []


def test_no_links_and_the_folders_named_once() -> None:
    links = [str(p.relative_to(ROOT)) for p in (ROOT / "kernelwright").iterdir() if p.is_symlink()]
    for name in SUBPACKAGES:
        links += [str(p.relative_to(ROOT)) for p in (ROOT / name).rglob("*") if p.is_symlink()]
    assert not links
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-dir"
    ]
    assert package_dir == {f"kernelwright.{name}": name for name in SUBPACKAGES}
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"kernelwright", "tests"}
    assert folders == set(SUBPACKAGES)
    assert Path(kernelwright.IMPORT_ROOT) == ROOT


def test_old_checkpoints_and_memory_still_load(tmp_path: Path) -> None:
    """Written by `kernelwright optimize tasks/level1/01_relu.py --model offline --budget 1 --device cpu`
    at d671c06 (kernelwright/ then held a link to each folder); kept as a 64 KB tarball."""
    from kernelwright.graphs.optimize import builder
    from kernelwright.graphs.run_files import open_checkpointer
    from kernelwright.memory import open_memory
    from kernelwright.nodes.records import Attempt, OptimizeResult, RunInfo
    from kernelwright.tasks.task import Task

    with tarfile.open(OLD_RUN_AND_MEMORY) as archive:
        archive.extractall(tmp_path, filter="data")
    thread = json.loads((tmp_path / "run" / "run.json").read_text())["thread_id"]
    checkpointer = open_checkpointer(tmp_path / "run")
    try:
        state = builder.compile(checkpointer=checkpointer).get_state({"configurable": {"thread_id": thread}})
    finally:
        checkpointer.conn.close()
    values = state.values
    assert state.next == ()
    assert isinstance(values["run"], RunInfo) and isinstance(values["task"], Task)
    assert isinstance(values["result"], OptimizeResult)
    assert values["attempts"] and all(isinstance(a, Attempt) for a in values["attempts"])
    assert values["task"].name == "01_relu"

    memory = open_memory(str(tmp_path / "memory"))
    try:
        stats = memory.stats()
    finally:
        memory.close()
    assert stats.cases == 1 and stats.exposures == 1


@pytest.mark.slow  # builds and installs a wheel, ~6 s; CI installs the package itself
def test_a_wheel_installs_and_finds_a_new_subpackage(tmp_path: Path) -> None:
    from tests.unit.test_packaging import _copy_of_the_project

    project = _copy_of_the_project(tmp_path / "project")
    (project / "hardware" / "brand_new").mkdir()
    (project / "hardware" / "brand_new" / "__init__.py").write_text('"""A subpackage no list names."""\n')
    out = tmp_path / "dist"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    code = (
        "import sys, kernelwright, kernelwright.graphs.optimize as o, kernelwright.hardware.brand_new as b\n"
        "print(kernelwright.IMPORT_ROOT, o.__file__, b.__file__)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in kernelwright.SUBPACKAGES))\n"
    )
    done = run_python(code, tmp_path, PYTHONPATH=str(site), PATH="/usr/bin:/bin")
    assert done.returncode == 0, done.stderr[-3000:]
    where, listed = done.stdout.splitlines()
    assert where.split() == [
        str(site),
        str(site / "kernelwright" / "graphs" / "optimize.py"),
        str(site / "kernelwright" / "hardware" / "brand_new" / "__init__.py"),
    ]
    assert listed == "[]"
