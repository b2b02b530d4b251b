"""The interpreter's bf16 dots, as the judge's fork server runs them (hardware/interpreter_fixes.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import torch, triton, triton.language as tl
    from kernelwright.hardware import interpreter_fixes

    @triton.jit
    def k(a_ptr, b_ptr, c_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :]).to(tl.bfloat16)
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :]).to(tl.bfloat16)
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 16, generator=g), torch.randn(16, 16, generator=g)
    # the interpreter's cast truncates where a GPU rounds: compare with truncated bf16 operands
    def trunc(x):
        return (x.view(torch.int32) & -65536).view(torch.float32).double()
    for step in ("as shipped", "fixed"):
        if step == "fixed":
            assert interpreter_fixes.apply() and interpreter_fixes.apply()  # twice: still one wrapper
        c = torch.empty(16, 16)
        k[(1,)](a, b, c)
        print(step, (c.double() - trunc(a) @ trunc(b)).abs().max().item())
    """
)


def test_bf16_dots_are_exact_products_with_the_fix_and_garbage_without():
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    errors = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in out.stdout.splitlines()}
    assert errors["fixed"] < 1e-5
    assert errors["as shipped"] > 1.0  # the bug the fix is for: bit patterns multiplied as integers


def test_the_fix_is_a_no_op_outside_the_interpreter(monkeypatch):
    from kernelwright.hardware import interpreter_fixes

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert interpreter_fixes.apply() is False
