"""The interpreter's bf16 dots and casts, as the judge's fork server runs them (hardware/candidate/interpreter_fixes.py)."""

from __future__ import annotations

import textwrap

from tests.fakes.writer import run_interpreted

PROGRAM = textwrap.dedent(
    """
    import torch, triton, triton.language as tl
    from kernelwright.hardware.candidate import interpreter_fixes

    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, x_ptr, h_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :]).to(tl.bfloat16)
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :]).to(tl.bfloat16)
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))
        x = tl.load(x_ptr + r)
        tl.store(h_ptr + r, x)  # fp32 into a bf16 tensor: a cast
        tl.store(h_ptr + 16, tl.load(x_ptr + 3))  # and a scalar one (the tie)

    g = torch.Generator().manual_seed(0)
    a, b, x = (torch.randn(*s, generator=g) for s in ((16, 16), (16, 16), (16,)))
    # NaN, inf, a value that rounds past bf16's largest, and a tie (rounds to even)
    x[:4] = torch.tensor([float("nan"), float("inf"), -3.4e38, 1.0 + 3 * 2.0**-8])
    exact = a.bfloat16().double() @ b.bfloat16().double()
    for step in ("as shipped", "fixed"):
        if step == "fixed":
            assert interpreter_fixes.apply() and interpreter_fixes.apply()  # twice: still one wrapper
        c, h = torch.empty(16, 16), torch.empty(17, dtype=torch.bfloat16)
        k[(1,)](a, b, c, x, h)
        ref = x.bfloat16()  # NaN's bits may differ (torch 0xFFFF, a GPU 0x7FFF): it need only stay NaN
        ref = torch.cat([ref, ref[3:4]])
        same = bool(h[0].isnan()) and h[1:].view(torch.int16).equal(ref[1:].view(torch.int16))
        print(step, (c.double() - exact).abs().max().item(), int(same))
    """
)


def test_bf16_dots_and_casts_match_a_gpu_with_the_fix_and_not_without():
    seen = {}
    for line in run_interpreted(PROGRAM, timeout=120):
        step, dot, same = line.rsplit(" ", 2)
        seen[step] = (float(dot), same == "1")
    # fixed: the dot is the exact product of the bf16 operands (to fp32 accumulation), and the cast
    # rounds to nearest even, bit for bit as torch's .bfloat16() (NaN, inf, overflow and a tie included)
    assert seen["fixed"][0] < 1e-5 and seen["fixed"][1]
    # as shipped: bit patterns multiplied as integers, and the cast truncated
    assert seen["as shipped"][0] > 1.0 and not seen["as shipped"][1]


def test_the_fix_is_a_no_op_outside_the_interpreter(monkeypatch):
    from kernelwright.hardware.candidate import interpreter_fixes

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert interpreter_fixes.apply() is False
