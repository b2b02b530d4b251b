"""The intersection of two equal value ranges is the range itself while `plain_size_equalities` is active
(frontend/size_equalities.py): what torch's `Max`/`Min` (`Or`/`And`) of the bounds give, unequal ranges
still go to torch's method, and the class's method is torch's again afterwards."""

from __future__ import annotations

import sympy
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from kernelwright.providers.offline.frontend.size_equalities import plain_size_equalities

_RANGES = [
    ValueRanges(2, int_oo),
    ValueRanges(0, int_oo),
    ValueRanges(3, 10),
    ValueRanges(-5, 7),
    ValueRanges(sympy.Rational(1, 2), 4.5),
    ValueRanges(sympy.false, sympy.true),
    ValueRanges(sympy.true, sympy.true),
    ValueRanges.unknown(),
    ValueRanges.unknown_int(),
]


def _pairs() -> list[tuple[ValueRanges, ValueRanges]]:
    out = []
    for a in _RANGES:
        for b in _RANGES:
            if a.is_bool == b.is_bool and a.is_int == b.is_int and a.is_float == b.is_float:
                out.append((a, b))
    return out


def test_intersections_equal_torchs() -> None:
    pairs = _pairs()
    expected = [a & b for a, b in pairs] + [ValueRanges(a.lower, a.upper) & a for a in _RANGES]
    with plain_size_equalities():
        got = [a & b for a, b in pairs] + [ValueRanges(a.lower, a.upper) & a for a in _RANGES]
    assert got == expected
    assert any(a == b for a, b in pairs) and any(a != b for a, b in pairs)


def test_torchs_method_again_afterwards() -> None:
    original = ValueRanges.__dict__["__and__"]
    with plain_size_equalities():
        assert ValueRanges.__dict__["__and__"] is not original
    assert ValueRanges.__dict__["__and__"] is original
