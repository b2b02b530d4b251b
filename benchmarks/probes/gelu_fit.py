"""Derives the coefficients of the offline writer's GELU (`_kw_gelu` in providers/offline/emit/emit.py) and
measures its error against float64 next to the usual fp32 formula 0.5 * x * (1 + erf(x / sqrt 2)).

GELU(x) = x * Phi(x). With a = |x|, Phi(-a) = 2^q(a) where q = log2(erfc(a / sqrt 2) / 2) is smooth on
[0, inf); Phi(x) = 1 - 2^q(a) for x >= 0 and 2^q(a) for x < 0. A polynomial p ~ q with p(0) = -1 (Phi(0) =
1/2 exactly) is fitted on [0, A] to minimise the largest error in 2^p, i.e. |p - q| weighted by
ln 2 * 2^q(a) (Lawson's iteratively reweighted least squares). Beyond A the kernel clamps a to A:
Phi(-6) ~ 1e-9. The error printed is that of the whole fp32 evaluation (numpy float32, no fused
multiply-add, so a little pessimistic against the GPU's).

Usage: python benchmarks/probes/gelu_fit.py [--degree 8] [--clamp 6]. CPU only, a few seconds; needs numpy.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np


def fit(degree: int, clamp: float, points: int = 3000, iterations: int = 300) -> np.ndarray:
    """Monomial coefficients c[0..degree] (c[0] = -1) of the fit, in float32."""
    a = np.linspace(0.0, clamp, points)
    tail = np.array([0.5 * math.erfc(v / math.sqrt(2.0)) for v in a])
    q = np.log2(tail)
    weight = tail * math.log(2.0)
    basis = np.vander(a / clamp, degree + 1, increasing=True) * weight[:, None]
    target = weight * q
    u = np.full(points, 1.0 / points)
    coef = np.zeros(degree + 1)
    for _ in range(iterations):
        s = np.sqrt(u)
        rhs = (target + basis[:, 0]) * s  # c[0] = -1 is fixed
        coef = np.concatenate([[-1.0], np.linalg.lstsq(basis[:, 1:] * s[:, None], rhs, rcond=None)[0]])
        u = u * np.abs(basis @ coef - target)
        u /= u.sum()
    return (coef / clamp ** np.arange(degree + 1)).astype(np.float32)


def gelu_poly(x: np.ndarray, coef: np.ndarray, clamp: float) -> np.ndarray:
    """The kernel's evaluation order, in float32."""
    x = x.astype(np.float32)
    a = np.minimum(np.abs(x), np.float32(clamp))
    p = np.full_like(a, coef[-1])
    for c in coef[-2::-1]:
        p = (p * a + c).astype(np.float32)
    e = np.exp2(p).astype(np.float32)
    return x * np.where(x >= 0, np.float32(1.0) - e, e)


def gelu_erf_fp32(x: np.ndarray) -> np.ndarray:
    """0.5 * x * (1 + erf(x / sqrt 2)) in float32, erf correctly rounded (a best case for libdevice)."""
    x = x.astype(np.float32)
    scaled = (x * np.float32(0.7071067811865476)).astype(np.float32)
    erf = np.array([math.erf(float(v)) for v in scaled], dtype=np.float32)
    return np.float32(0.5) * x * (np.float32(1.0) + erf)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--clamp", type=float, default=6.0)
    args = ap.parse_args(argv)
    coef = fit(args.degree, args.clamp)
    print("coefficients, highest degree first:")
    for c in coef[::-1]:
        print(f"    {float(c)!r}")
    x = np.linspace(-12.0, 12.0, 200001)
    exact = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])
    for label, y in (("polynomial", gelu_poly(x, coef, args.clamp)), ("erf formula", gelu_erf_fp32(x))):
        err = np.abs(y.astype(np.float64) - exact)
        inner = np.abs(x) <= 4.0
        print(f"{label:12s} max abs error {err.max():.2e} (|x| <= 4: {err[inner].max():.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
