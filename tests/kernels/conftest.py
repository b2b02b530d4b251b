"""Worker pools shared by the session: starting one (judge processes that import torch and Triton) costs
seconds on two cores, more than many of the tests that use it. The shared pool has one judge: the default
suite runs two test processes on two cores, so a second judge would not run beside the first, and each
judge started costs about 3.5 s of CPU (its imports and its fork server's).

Tests that evaluate programs take `pool`, the judge tests (test_sandbox.py, test_hostile.py,
test_confinement.py) among them: a candidate's verdict never depends on the judge being new, since every
candidate runs in a process of its own that dies with it. While the shared pool lives, a secret
(SECRET_ENV) stands in this process's environment, so each judge it starts, and each restart, is started
from an environment holding one: test_hostile.py checks that no candidate can read it. A judge test that
counts restarts compares with the count when its module began (restarts_at_start), since another
module may already have cost the shared judge a restart (test_sandbox.py's slow reference does, on
purpose: the judge is replaced, and the next module's first evaluation waits for the new one). Tests that
kill a pool's process, confine differently or start a pool in a given environment make a pool of their own.

Whole graph runs get their pool from nodes.resources (keyed by device and workers): the graph modules
close only their memories and chat models, so the next module reuses the pool, closed once at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kernelwright.hardware import WorkerPool
from kernelwright.nodes import resources

SECRET_ENV = ("KW_TEST_SECRET_KEY", "kw-secret-value")  # must never reach a judge or a candidate


@pytest.fixture(scope="session")
def pool() -> Iterator[WorkerPool]:
    name, value = SECRET_ENV
    os.environ[name] = value
    try:
        with WorkerPool(device="cpu", workers=1) as p:
            yield p
    finally:
        os.environ.pop(name, None)


@pytest.fixture(scope="session")
def judge_secret() -> tuple[str, str]:
    """The name and value of the secret in the environment the shared pool's judges start from."""
    return SECRET_ENV


@pytest.fixture(scope="module")
def restarts_at_start(pool: WorkerPool) -> int:
    """The shared pool's judge restarts when the module's first test that asks began: a module counting
    restarts has every test ask (pytestmark = pytest.mark.usefixtures("restarts_at_start"))."""
    return pool.restarts


@pytest.fixture(scope="session", autouse=True)
def _close_graph_pools() -> Iterator[None]:
    yield
    resources.close_all()
