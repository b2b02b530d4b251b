"""The offline writer's memory of sympy answers: a larger sympy cache and a remembered simplify.

Both only save time; these tests check that they are in effect and give sympy's own answers.
"""

from __future__ import annotations

import os
from pathlib import Path

import sympy

from kernelwright.providers.offline.frontend.ir import _simplified, simplified
from tests.fakes.warm_python import run_python

ROOT = Path(__file__).resolve().parents[2]
_PROBE = "import kernelwright.providers.offline; from sympy.core.cache import SYMPY_CACHE_SIZE; print(SYMPY_CACHE_SIZE)"


def _cache_size_in_child(**extra: str) -> str:
    """The probe in a process of its own that has imported neither sympy nor the writer: a fork of the warm
    parent (tests.fakes.warm_python: torch and Triton imported, TRITON_INTERPRET=1 in its environment; torch
    imports no sympy), not a cold Python that spends 2-3 s of CPU importing torch first."""
    env = {k: v for k, v in os.environ.items() if k != "SYMPY_CACHE_SIZE"} | {"TRITON_INTERPRET": "1"} | extra
    done = run_python(["-c", _PROBE], env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_importing_the_writer_first_enlarges_sympys_cache() -> None:
    assert int(_cache_size_in_child()) > 1000


def test_a_cache_size_the_user_set_is_kept() -> None:
    assert _cache_size_in_child(SYMPY_CACHE_SIZE="321") == "321"


def test_simplified_gives_sympys_answer_and_remembers_it() -> None:
    s0, s1 = sympy.symbols("s0 s1", positive=True, integer=True)
    expr = (s0 * s1 + s0) / s0 - s1 - 1 + 7 * s0 % 7
    before = _simplified.cache_info().hits
    assert simplified(expr) == sympy.simplify(expr)
    assert simplified(expr) == sympy.simplify(expr)
    assert _simplified.cache_info().hits > before
