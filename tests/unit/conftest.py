"""tests/unit/ runs no kernel: a test here that starts a judge process (what a worker pool runs candidates
in) fails at once, saying where it belongs. Building a pool, or being refused one, is fine."""

from __future__ import annotations

from typing import Any

import pytest

from kernelwright.hardware.judge import pool as sandbox


@pytest.fixture(autouse=True)
def no_judge_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a unit test runs no kernels: a test that starts a judge goes in tests/kernels/")

    monkeypatch.setattr(sandbox._Worker, "start", refuse)
