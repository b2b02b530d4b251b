"""A task's traces leave no ShapeEnv behind (frontend/analysis.py `release_shape_envs`): torch's class-level
method caches are emptied once the analysis is done. It only frees memory: the writer's programs are the
same whether or not the caches were emptied between tasks."""

from __future__ import annotations

import gc

import pytest
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from kernelwright.providers.offline import write_program
from kernelwright.providers.offline.frontend import analysis
from kernelwright.providers.protocol import render_section
from tests.unit.test_analysis_cat_width import _source

_TASKS = [_source([4, 2, 2, 2, 2, 2, 2], 5), _source([3, 2], 7), _source([4, 2, 2, 2, 2, 2, 2, 2], 5)]


def _programs() -> list[str]:
    analysis._CACHE.clear()
    out = []
    for i, source in enumerate(_TASKS):
        request = render_section("request", "Write a faster kernel.", kind="large_step")
        answer = write_program(request + "\n\n" + render_section("task", source, name=f"shape_envs_{i}"))
        assert answer.code, answer.explanation
        out.append(answer.code)
    return out


def _live_shape_envs() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, ShapeEnv))


def test_programs_same_with_and_without_emptying(monkeypatch: pytest.MonkeyPatch) -> None:
    emptied = _programs()
    monkeypatch.setattr(analysis, "release_shape_envs", lambda: None)
    kept = _programs()
    assert emptied == kept


def test_no_shape_env_outlives_the_analysis() -> None:
    before = _live_shape_envs()
    _programs()
    assert _live_shape_envs() <= before
