"""Worker pools shared by the session: starting one (judge processes that import torch and Triton) costs
seconds on two cores, more than many of the tests that use it. The shared pool has one judge: the default
suite runs two test processes on two cores, so a second judge would not run beside the first, and each
judge started costs about 3.5 s of CPU (its imports and its fork server's).

Tests that evaluate programs take `pool`. Modules that need a pool of their own define their own `pool`
fixture, which overrides this one: test_hostile.py (one judge, started with a secret in the environment)
and test_sandbox.py (counts its pool's restarts).

Whole graph runs get their pool from nodes.resources (keyed by device and workers): the graph modules
close only their memories and chat models, so the next module reuses the pool, closed once at the end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelwright.hardware import WorkerPool
from kernelwright.nodes import resources


@pytest.fixture(scope="session")
def pool() -> Iterator[WorkerPool]:
    with WorkerPool(device="cpu", workers=1) as p:
        yield p


@pytest.fixture(scope="session", autouse=True)
def _close_graph_pools() -> Iterator[None]:
    yield
    resources.close_all()
