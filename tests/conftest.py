"""What every test gets: its marker from its folder, and no way out to the network.

Folders and markers (pyproject.toml describes the markers):
- tests/unit/: runs no Triton kernel and starts no server (no folder marker);
- tests/kernels/: runs kernels, on CPU under TRITON_INTERPRET=1 (marker `kernels`);
- tests/integration/: starts real servers on loopback (marker `integration`).
`slow` is set per test, by hand. A test that belongs in another folder is moved there, not re-marked.

No test in this process can open a connection to anything but loopback (tests/network_guard.py), and
no process that runs tests (each pytest-xdist worker too) ends with a module of kernelwright loaded under
a second name (`nodes.records` beside `kernelwright.nodes.records`): one file, one module.

Whole runs made in a test process (run_optimize, the commands run through their entry point) take their
judges from nodes.resources, and each run closes them as it ends, as a command does before its process
exits. Here they stay up for the next run and the next test, and are closed once, when the session ends:
each judge started costs ~4.5 s of CPU (torch and Triton imported, by its fork server too), and the
default suite's runs started about twenty. A run's verdicts never depend on its judge being new: every
candidate runs in a process of its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from kernelwright import SUBPACKAGES
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


SECRET_ENV = ("KW_TEST_SECRET_KEY", "kw-secret-value")  # must never reach a candidate


@pytest.fixture(autouse=True, scope="session")
def judge_secret() -> Iterator[tuple[str, str]]:
    """A secret in this process's environment for the whole session, so every judge a test process starts
    (the shared pool's, a pool of a test's own), and each restart, starts from an environment holding one:
    tests/kernels/test_hostile.py checks that no candidate can read it. Yields its name and value."""
    name, value = SECRET_ENV
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(name, value)
        yield SECRET_ENV


@pytest.fixture(autouse=True, scope="session")
def keep_run_pools() -> Iterator[None]:
    """nodes.resources' pools outlive the runs and the tests that close them (see above)."""
    from kernelwright.nodes import resources

    close_pools = resources.close_pools
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resources, "close_pools", lambda: None)
        yield
    close_pools()


@pytest.fixture(autouse=True, scope="session")
def no_network() -> Iterator[None]:
    """Refuses non-loopback connections for the whole session."""
    with refuse_non_loopback():
        yield


def bare_modules(names: Iterable[str]) -> list[str]:
    """The modules among `names` that are kernelwright's folders loaded under their bare top-level name."""
    return sorted(n for n in names if n.partition(".")[0] in SUBPACKAGES)


@pytest.fixture(autouse=True, scope="session")
def one_import_name() -> Iterator[None]:
    """Fails the session (as an error in its last test's teardown) if any test loaded a bare `nodes`,
    `graphs`, ... module: each folder's __init__ refuses that, so this catches a way around it."""
    yield
    bare = bare_modules(list(sys.modules))
    if bare:
        pytest.fail(f"loaded under a second name (import kernelwright.<folder> instead): {bare}")
