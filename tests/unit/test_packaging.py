"""The wheel setuptools builds from pyproject.toml: every bundled task file is in it, and the build says
nothing about packages it would ignore (`make run` once printed some 210 lines of such warnings)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from kernelwright import SUBPACKAGES
from kernelwright.tasks import BUNDLED_SUITES

REPO = Path(__file__).resolve().parents[2]
PACKAGE_FOLDERS = SUBPACKAGES


def _copy_of_the_project(dest: Path) -> Path:
    """The files a build reads, without caches, virtual environments or run folders."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    for name in PACKAGE_FOLDERS:
        shutil.copytree(REPO / name, dest / name, ignore=skip)
    shutil.copytree(REPO / "kernelwright", dest / "kernelwright", ignore=skip)
    return dest


def test_wheel_holds_every_bundled_task_and_the_build_warns_of_no_ignored_package(tmp_path: Path) -> None:
    project = _copy_of_the_project(tmp_path / "project")
    out = tmp_path / "dist"
    build = (
        "import sys; from setuptools import build_meta; "
        "print(build_meta.build_wheel(sys.argv[1]), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", build, str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "would be ignored" not in log and "absent from the `packages`" not in log, log[-3000:]
    (wheel,) = out.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for suite in BUNDLED_SUITES:
        tasks = sorted(p.name for p in (REPO / "tasks" / suite).glob("*.py"))
        assert tasks, suite
        missing = [t for t in tasks if f"kernelwright/tasks/{suite}/{t}" not in names]
        assert not missing, f"{suite}: {missing}"
    assert "kernelwright/tasks/loader.py" in names and "kernelwright/cli/main.py" in names
