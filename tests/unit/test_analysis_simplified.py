"""The writer's remembered simplify (frontend/ir.py `simplified`) answers as sympy.simplify does.

A flat sum of sizes (a concatenation's width over dozens of inputs) skips sympy.simplify, which tries
many rewritings before returning such a sum unchanged; everything else still goes through it."""

from __future__ import annotations

import random

import sympy

from kernelwright.providers.offline.frontend.ir import is_flat_sum, simplified, sym_eq

SIZES = sympy.symbols("s0:60", integer=True, positive=True)
PLAIN = sympy.symbols("t0:4")  # symbols without assumptions


def _sums(count: int) -> list[sympy.Expr]:
    rng = random.Random(7)
    out = []
    for i in range(count):
        pool = PLAIN if i % 6 == 0 else SIZES
        syms = rng.sample(pool, rng.randint(1, len(pool) if pool is PLAIN else 24))
        coeffs = [rng.choice([1, 1, 1, -1, 2, 3, -2, 32]) for _ in syms]
        out.append(
            sum((c * s for c, s in zip(coeffs, syms, strict=True)), sympy.Integer(rng.choice([0, 1, -3, 64])))
        )
    return out


def test_a_flat_sum_of_sizes_is_answered_as_sympy_simplify_answers() -> None:
    sums = _sums(40)
    assert all(is_flat_sum(e) for e in sums)
    for e in sums:
        assert simplified(e) == sympy.simplify(e), e


def test_what_is_not_a_flat_sum_still_goes_through_simplify() -> None:
    s0, s1, s2 = SIZES[:3]
    others = [s0 * s1 + s0 * s2, (s0 + s1) ** 2 - s0**2, sympy.floor(s0 / 2) * 2 - s0,
              sympy.Max(s0, s1) - s0, s2 / 2 + s0, (s0 + 1) * (s1 - 1) - s0 * s1]  # fmt: skip
    for e in others:
        assert not is_flat_sum(e), e
        assert simplified(e) == sympy.simplify(e), e
    assert simplified(s0 * s1 + s0 * s2) != s0 * s1 + s0 * s2  # simplify did rewrite it (factored)


def test_size_comparisons_over_a_concatenation() -> None:
    width = sum(SIZES[1:49], sympy.Integer(64))
    assert sym_eq(width, sum(reversed(SIZES[1:49]), sympy.Integer(64)))
    assert not sym_eq(width, width + SIZES[0])
    assert simplified(width - width) == 0
