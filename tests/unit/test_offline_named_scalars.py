"""Named twins of a model's scalars: arithmetic on them keeps the Python it was computed by."""

from __future__ import annotations

import math

import torch.nn as nn

from kernelwright.providers.offline.frontend.named_scalars import name_scalars, named, restore_scalars


def test_arithmetic_on_a_named_scalar_stays_named_and_keeps_its_value() -> None:
    k = named(5, "self.k")
    cases = {
        "(self.k // 2)": k // 2,
        "((self.k - 1) // 2)": (k - 1) // 2,
        "(2 * self.k)": 2 * k,
        "(self.k / 2)": k / 2,
        "(-self.k)": -k,
        "(self.k * float('inf'))": k * math.inf,
    }
    for text, value in cases.items():
        assert value.kw_expr == text
        assert eval(text, {"self": type("M", (), {"k": 5})}) == value  # the text computes the value
    assert type(k > 2) is bool and not hasattr(k + named(1.5, "self.s") > 0, "kw_expr")
    assert (k + named(1.5, "self.s")).kw_expr == "(self.k + self.s)"


def test_a_model_gets_its_own_scalars_back() -> None:
    model = nn.Module()
    model.k, model.scale, model.flag = 3, 0.5, True
    saved = name_scalars(model)
    assert model.k.kw_expr == "self.k" and model.scale.kw_expr == "self.scale"
    assert not hasattr(model.flag, "kw_expr")  # a bool is not a size
    restore_scalars(model, saved)
    assert type(model.k) is int and type(model.scale) is float and model.k == 3
