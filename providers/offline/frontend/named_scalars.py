"""Named twins of a model's scalar attributes: an int or float that remembers the Python it was read by.

While a forward is traced by torch.fx in Python (the conv family's reader, the generic writer's look at
functional calls), the model's own int and float attributes are replaced by twins that carry their
expression (`self.k`), and arithmetic on them stays named (`self.k // 2` is `(self.k // 2)`), so a
hyper-parameter computed from a constructor argument is written as that computation, not as the number
it is at the traced size.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch.nn as nn


def named(value: Any, expr: str) -> Any:
    """`value` as the named twin of its type, or as it is (a bool, or anything not a plain number)."""
    if type(value) is int:
        return _NamedInt(value, expr)
    if type(value) is float:
        return _NamedFloat(value, expr)
    return value


def _arith(op: Callable[[Any, Any], Any], symbol: str, reflected: bool = False) -> Any:
    """An arithmetic operator of the named twins: arithmetic on a named scalar stays named
    (`padding=self.k // 2` is `(self.k // 2)` in the program, not the number it is at the traced size)."""

    def method(self: Any, other: Any) -> Any:
        if type(other) not in (int, float, _NamedInt, _NamedFloat):
            return NotImplemented
        mine, theirs = self.kw_plain, getattr(other, "kw_plain", other)
        value = op(theirs, mine) if reflected else op(mine, theirs)
        text = getattr(other, "kw_expr", None) or (
            repr(other) if math.isfinite(other) else f"float('{other}')"
        )
        lhs, rhs = (text, self.kw_expr) if reflected else (self.kw_expr, text)
        return named(value, f"({lhs} {symbol} {rhs})")

    return method


class _Named:
    """What the named twins share: the expression they were read by, and arithmetic that keeps it."""

    kw_expr: str

    @property
    def kw_plain(self) -> int | float:
        return int(self) if isinstance(self, int) else float(self)  # type: ignore[arg-type]

    def __neg__(self) -> Any:
        return named(-self.kw_plain, f"(-{self.kw_expr})")

    __add__, __radd__ = _arith(operator.add, "+"), _arith(operator.add, "+", True)
    __sub__, __rsub__ = _arith(operator.sub, "-"), _arith(operator.sub, "-", True)
    __mul__, __rmul__ = _arith(operator.mul, "*"), _arith(operator.mul, "*", True)
    __truediv__, __rtruediv__ = _arith(operator.truediv, "/"), _arith(operator.truediv, "/", True)
    __floordiv__, __rfloordiv__ = _arith(operator.floordiv, "//"), _arith(operator.floordiv, "//", True)
    __mod__, __rmod__ = _arith(operator.mod, "%"), _arith(operator.mod, "%", True)
    __pow__, __rpow__ = _arith(operator.pow, "**"), _arith(operator.pow, "**", True)


class _NamedFloat(_Named, float):
    def __new__(cls, value: float, expr: str) -> _NamedFloat:
        obj = float.__new__(cls, value)
        obj.kw_expr = expr
        return obj


class _NamedInt(_Named, int):
    def __new__(cls, value: int, expr: str) -> _NamedInt:
        obj = int.__new__(cls, value)
        obj.kw_expr = expr
        return obj


def name_scalars(model: nn.Module) -> dict[str, Any]:
    """Replace the model's own int/float attributes by named twins; returns the originals."""
    saved: dict[str, Any] = {}
    for name, value in list(vars(model).items()):
        if name.startswith("_") or type(value) not in (int, float):
            continue
        saved[name] = value
        twin = (
            _NamedFloat(value, f"self.{name}") if type(value) is float else _NamedInt(value, f"self.{name}")
        )
        object.__setattr__(model, name, twin)
    return saved


def restore_scalars(model: nn.Module, saved: dict[str, Any]) -> None:
    for name, value in saved.items():
        object.__setattr__(model, name, value)
