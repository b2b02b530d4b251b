"""The written program's Gluon path at odd sizes and layouts (GPU), both schedules (ping-pong at 4 stages,
cooperative at 3): a written program's `_kw_ws_gemm` on row- and column-major operands, batched and not, edges in
M, N and K, several tiles a program, fp16 and bf16, against an fp32 product; and whether it declined (False: the
program's Triton kernels would run) where its views do not fit."""

import importlib.util
import sys

import torch

spec = importlib.util.spec_from_file_location("prog", sys.argv[1])
prog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prog)
torch.manual_seed(0)


def strides(t):
    return list(t.stride())


cases = [  # nb, m, k, n, a transposed, b transposed, dtype, expected to run (ping-pong, cooperative)
    (1, 200, 96, 136, False, False, torch.bfloat16, (True, True)),
    (1, 384, 320, 256, True, False, torch.bfloat16, (True, True)),
    (1, 256, 192, 384, False, True, torch.float16, (True, True)),
    (1, 136, 72, 264, True, True, torch.bfloat16, (True, True)),
    (4, 256, 128, 200, False, False, torch.bfloat16, (True, True)),
    (3, 128, 192, 256, True, True, torch.float16, (True, True)),
    (2, 256, 128, 384, False, True, torch.bfloat16, (True, False)),  # stacked B.T, N % 256 != 0
    (1, 2120, 520, 4136, False, False, torch.bfloat16, (True, True)),  # 289-561 tiles: several a program
    (8, 1024, 256, 1024, True, False, torch.float16, (True, True)),
    (2, 100, 128, 128, False, False, torch.bfloat16, (False, False)),  # batched, M not a multiple of 128
    (1, 130, 70, 264, True, False, torch.bfloat16, (False, False)),  # A_T rows 260 B apart
]
bad = 0
for (nb, m, k, n, at, bt, dt, expects), coop in [(c, coop) for c in cases for coop in (0, 1)]:
    expect = expects[coop]
    a = (
        torch.randn(nb, k, m, device="cuda", dtype=dt).mT
        if at
        else torch.randn(nb, m, k, device="cuda", dtype=dt)
    )
    b = (
        torch.randn(nb, n, k, device="cuda", dtype=dt).mT
        if bt
        else torch.randn(nb, k, n, device="cuda", dtype=dt)
    )
    out = torch.empty(nb, m, n, device="cuda", dtype=dt)
    sa, sb = strides(a), strides(b)
    if nb == 1:
        a2, b2, out2 = a[0], b[0], out[0]
        sa, sb = sa[1:], sb[1:]
    else:
        a2, b2, out2 = a, b, out
    ran = prog._kw_ws_gemm(a2, sa, b2, sb, out2, m, n, k, nb, 8, 3 + (not coop), coop)
    torch.cuda.synchronize()
    ref = torch.matmul(a.float(), b.float())
    err = ((out.float() - ref).abs().max() / ref.pow(2).mean().sqrt()).item() if ran else float("nan")
    ok = ran == expect and (not ran or err < 0.05)
    bad += not ok
    print(
        f"coop={coop} nb={nb} m={m} k={k} n={n} A_T={at} B_T={bt} {str(dt)[6:]}: ran={ran} err/rms={err:.2e} {'ok' if ok else 'FAIL'}"
    )
print("layouts:", "all ok" if not bad else f"{bad} failed")
