"""The worker pool shared by the session: starting one (judge processes that import torch and Triton) costs
seconds on two cores, more than many of the tests that use it. The shared pool has one judge: the default
suite runs two test processes on two cores, so a second judge would not run beside the first, and each
judge started costs about 4.5 s of CPU (its imports and its fork server's).

Tests that evaluate programs take `pool`, the judge tests (test_sandbox.py, test_hostile.py,
test_confinement.py) among them: a candidate's verdict never depends on the judge being new, since every
candidate runs in a process of its own that dies with it. `pool` is the pool whole runs evaluate on
(nodes.resources' for the CPU and one worker, which tests/conftest.py keeps up until the session ends), so
a test process starts one judge for both. A secret stands in the environment of every test process for the
whole session (tests/conftest.py, judge_secret), so each judge, and each restart, is started from an
environment holding one: test_hostile.py checks that no candidate can read it. A judge test that counts
restarts compares with the count when its module began (restarts_at_start), since another module may
already have cost the shared judge a restart (test_sandbox.py's slow reference does, on purpose: the judge
is replaced, and the next module's first evaluation waits for the new one). Tests that kill a pool's
process, confine differently or start a pool in a given environment make a pool of their own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelwright.hardware import WorkerPool
from kernelwright.nodes import resources


@pytest.fixture(scope="session")
def pool() -> WorkerPool:
    return resources.worker_pool("cpu", 1)


@pytest.fixture(scope="module")
def restarts_at_start(pool: WorkerPool) -> int:
    """The shared pool's judge restarts when the module's first test that asks began: a module counting
    restarts has every test ask (pytestmark = pytest.mark.usefixtures("restarts_at_start"))."""
    return pool.restarts


@pytest.fixture(scope="session", autouse=True)
def _close_run_memories() -> Iterator[None]:
    yield
    resources.close_all()  # memories and chat models; the pools are closed by tests/conftest.py
