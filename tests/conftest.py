"""What every test gets: its marker from its folder.

Folders and markers (pyproject.toml describes the markers):
- tests/unit/: runs no Triton kernel and starts no server (no folder marker);
- tests/kernels/: runs kernels, on CPU under TRITON_INTERPRET=1 (marker `kernels`);
- tests/integration/: starts real servers on loopback (marker `integration`).
`slow` is set per test, by hand. A test that belongs in another folder is moved there, not re-marked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FOLDER_MARKERS = {"kernels": "kernels", "integration": "integration"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = Path(str(item.path)).resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        marker = FOLDER_MARKERS.get(folder)
        if marker is not None:
            item.add_marker(marker)
