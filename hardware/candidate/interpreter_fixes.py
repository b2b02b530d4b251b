"""Make Triton's CPU interpreter (TRITON_INTERPRET=1) compute bf16 `tl.dot`s and casts as a GPU does.

Triton 3.6's interpreter stores bfloat16 tensors as uint16 bit patterns (numpy has no bfloat16) and its
`create_dot` hands them to `np.matmul` as they are: a bf16 dot multiplies the bit patterns as integers,
and its result is garbage (a 16 x 16 product of randn values came out ~1e10 off). A GPU's tensor cores
multiply the bf16 values exactly and accumulate in the accumulator's dtype. `apply()` wraps the
interpreter's `create_dot` so that bf16 operands are widened to their float32 values first (exact), then
multiplied with the usual float32 accumulation: what the hardware computes, up to summation order.

Its float32 -> bfloat16 cast truncated (round toward zero) where a GPU rounds to nearest even: every bf16
value it made was up to a whole bf16 ulp off, and a program that splits fp32 operands into bf16 parts lost
about a bit to it. `apply()` also makes that cast round to nearest even (NaN kept a quiet NaN), as `x.to(
tl.bfloat16)` and a store into a bf16 tensor do on a GPU and as torch's `.bfloat16()` does.

The candidate fork server applies it before any candidate is loaded (hardware/isolation/forkserver.py); it is a no-op
without TRITON_INTERPRET=1, and applying it twice changes nothing.
"""

from __future__ import annotations

import os
from typing import Any

_MARK = "_kernelwright_bf16_dot"


def apply() -> bool:
    """Patch the interpreter's dot for bf16 operands and its fp32 -> bf16 cast; whether the patch is (now)
    in place."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, _MARK, False):
        return True
    original = builder.create_dot

    def widen(x: Any) -> Any:
        if x.dtype.scalar != tl.bfloat16:
            return x
        data = interpreter._convert_float(x.data, tl.bfloat16, tl.float32, None).view(np.float32)
        return interpreter.TensorHandle(data.reshape(x.data.shape), tl.float32)

    def create_dot(
        self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any
    ) -> Any:
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    cast = builder.cast_impl

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar != tl.float32 or dst_type.scalar != tl.bfloat16:
            return cast(self, src, dst_type)
        x = np.array(src.data, dtype=np.float32)  # a contiguous copy of any shape, 0-d included
        bits = x.view(np.uint32)
        nearest_even = (bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16
        rounded = np.where(np.isnan(x), (bits >> 16) | 0x40, nearest_even).astype(np.uint16)  # NaN stays NaN
        return interpreter.TensorHandle(np.asarray(rounded).reshape(x.shape), dst_type.scalar)

    setattr(create_dot, _MARK, True)
    builder.create_dot = create_dot
    builder.cast_impl = cast_impl
    return True
