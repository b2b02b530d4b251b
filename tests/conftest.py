"""What every test gets: its marker from its folder, and no way out to the network.

Folders and markers (pyproject.toml describes the markers):
- tests/unit/: runs no Triton kernel and starts no server (no folder marker);
- tests/kernels/: runs kernels, on CPU under TRITON_INTERPRET=1 (marker `kernels`);
- tests/integration/: starts real servers on loopback (marker `integration`).
`slow` is set per test, by hand. A test that belongs in another folder is moved there, not re-marked.

No test in this process can open a connection to anything but loopback (tests/network_guard.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.network_guard import refuse_non_loopback

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


@pytest.fixture(autouse=True, scope="session")
def no_network() -> Iterator[None]:
    """Refuses non-loopback connections for the whole session."""
    with refuse_non_loopback():
        yield
