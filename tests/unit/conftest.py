"""tests/unit/ runs no kernel: a test here that starts a worker pool (the judges that run candidates)
fails at once, saying where it belongs."""

from __future__ import annotations

from typing import Any

import pytest

from kernelwright.hardware import WorkerPool


@pytest.fixture(autouse=True)
def no_worker_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: WorkerPool, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(
            "a unit test runs no kernels: a test that starts a WorkerPool goes in tests/kernels/"
        )

    monkeypatch.setattr(WorkerPool, "__init__", refuse)
