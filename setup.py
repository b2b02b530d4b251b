"""Packaging's one computed part: the package list, found rather than kept by hand.

pyproject.toml's [tool.setuptools.package-dir] maps each top-level folder to kernelwright.<folder>; this
file adds every package found below those folders (a new subpackage needs no edit here), including the
bundled suites' folders of task files (tasks/level1, ...), which have no __init__.py and are installed as
they are. Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).resolve().parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]["package-dir"]


def packages() -> list[str]:
    found = ["kernelwright"]
    for package, folder in PACKAGE_DIR.items():
        below = find_namespace_packages(str(ROOT / folder), exclude=["*__pycache__*"])
        found += [package] + [f"{package}.{name}" for name in below]
    return sorted(found)


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import packages() alone
    setup(packages=packages())
