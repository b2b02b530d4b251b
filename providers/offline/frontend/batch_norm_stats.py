"""A training-mode BatchNorm's fake result, traced without torch's decomposition where it teaches nothing.

In a symbolic trace, fake tensors compute `aten._native_batch_norm_legit` (a BatchNorm in training mode
with running statistics) through torch's Python decomposition: about 25 fake ops over the input and its
statistics (var_mean, the normalisation, the running averages and their in-place copies, the affine
scale and shift), each asking the ShapeEnv about broadcasts and strides. That was about a third of a
DenseNet region's trace, 60-100 ms per layer, and for the usual input it asks nothing the ShapeEnv cannot
answer without a guard: every answer follows from the sizes' ranges and from the checks torch made
before (the parameters' sizes equal the channel count).

`plain_batch_norms` gives such a call its three results directly: the output (the input's shape, dtype
and contiguous strides, as the decomposition's elementwise ops give for a contiguous input), and the
saved mean and inverse deviation (one per channel, in the computation dtype). It does so only where the
decomposition's own queries are statically decided, so the ShapeEnv learns nothing from it either way:

- every size but the channel count is an integer of at least 2 or a symbol whose range starts at 2 or
  more, and the channel count is such an integer, symbol or a sum of such symbols (a concatenation's
  width): no size can be the 1 a broadcast asks about;
- the input's strides are, expression for expression, those of a contiguous tensor of its shape (no
  `Max(1, ...)` from a convolution's output, whose contiguity queries guard);
- each parameter and running statistic is one-dimensional, of the input's dtype and device, and its
  size is the channel count's expression or one the ShapeEnv already knows equal to it (its static
  evaluation, the decomposition's first question, answers true);
- the input's dtype is its own computation dtype (float32, float64), so no copy to another is made.

Anything else goes through torch's decomposition. The running statistics' in-place update is not made:
a fake tensor holds no values, the trace records the BatchNorm above this level, and its parameters'
metadata do not change. tests/unit/test_analysis_batch_norm.py compares the graph, every node's shape
and strides and the ShapeEnv (guards, replacements, ranges, symbols) with torch's path.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import sympy
import torch


def _expr(x: Any) -> Any:
    return x.node.expr if isinstance(x, torch.SymInt) else sympy.Integer(x)


def _shape_env(t: torch.Tensor) -> Any:
    for s in t.shape:
        if isinstance(s, torch.SymInt):
            return s.node.shape_env
    return None


def _at_least_two(expr: Any, env: Any) -> bool:
    """`expr` is an integer >= 2 or a symbol whose range starts at 2 or more."""
    if isinstance(expr, sympy.Integer):
        return int(expr) >= 2
    if isinstance(expr, sympy.Symbol) and env is not None:
        vr = env.var_to_range.get(expr)
        return vr is not None and vr.lower >= 2
    return False


def _channels_ok(expr: Any, env: Any) -> bool:
    if isinstance(expr, sympy.Add):
        return all(_at_least_two(a, env) for a in expr.args)
    return _at_least_two(expr, env)


def _known_equal(size: Any, channels: Any, env: Any) -> bool:
    """`size == channels` needs no guard: the same expression, or one the ShapeEnv decides statically."""
    a, c = _expr(size), channels
    if a == c:
        return True
    if env is None:
        return False
    return bool(env._maybe_evaluate_static(sympy.Eq(a, c)) == sympy.true)


def plain_result(
    input: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, training: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The decomposition's three results made directly, or None where the conditions in the module's
    docstring do not hold (torch's path then)."""
    from torch._prims_common import get_computation_dtype

    if training is not True or not isinstance(input, torch.Tensor) or input.layout != torch.strided:
        return None
    if input.dim() < 2 or get_computation_dtype(input.dtype) != input.dtype:
        return None
    env = _shape_env(input)
    sizes = [_expr(s) for s in input.shape]
    if not _channels_ok(sizes[1], env):
        return None
    if not all(_at_least_two(s, env) for k, s in enumerate(sizes) if k != 1):
        return None
    for p, optional in ((running_mean, False), (running_var, False), (weight, True), (bias, True)):
        if p is None and optional:
            continue  # no affine scale or shift: the decomposition skips it too
        if not isinstance(p, torch.Tensor) or p.dim() != 1 or p.layout != torch.strided:
            return None
        if p.dtype != input.dtype or p.device != input.device:
            return None
        if not _known_equal(p.shape[0], sizes[1], env):
            return None
    out = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    if any(_expr(s) != _expr(t) for s, t in zip(input.stride(), out.stride(), strict=True)):
        return None
    channels = input.shape[1]
    save_mean = torch.empty((channels,), dtype=input.dtype, device=input.device)
    save_rstd = torch.empty((channels,), dtype=input.dtype, device=input.device)
    return out, save_mean, save_rstd


@contextlib.contextmanager
def plain_batch_norms() -> Iterator[None]:
    """While active, fake tensors' training-mode `aten._native_batch_norm_legit` of a plain input is
    made directly (see the module's docstring). Callers hold MODEL_LOCK (the decomposition table is
    process-wide)."""
    from torch._decomp import decomposition_table

    op = torch.ops.aten._native_batch_norm_legit.default
    original = decomposition_table[op]

    def batch_norm(
        input: Any,
        weight: Any,
        bias: Any,
        running_mean: Any,
        running_var: Any,
        training: bool,
        momentum: float,
        eps: float,
    ) -> Any:
        made = plain_result(input, weight, bias, running_mean, running_var, training)
        if made is not None:
            return made
        return original(input, weight, bias, running_mean, running_var, training, momentum, eps)

    decomposition_table[op] = batch_norm
    try:
        yield
    finally:
        decomposition_table[op] = original
