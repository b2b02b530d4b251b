"""The @triton.jit math helpers pointwise ops call (_kw_tanh, _kw_gelu, ...), each pasted into a program
only when its ops call it (emit.HELPERS)."""

# mypy: check-untyped-defs
import triton
import triton.language as tl

# the program texts of this module, each between its marker lines (runtime.program_text)
PROGRAM_TEXTS = (
    "_kw_tanh",
    "_kw_log1p",
    "_kw_expm1",
    "_kw_softplus",
    "_kw_pow",
    "_kw_round",
    "_kw_trunc",
    "_kw_mul",
    "_kw_gelu",
    "_kw_welford_combine",
)

# fmt: off
# program text: _kw_tanh

@triton.jit
def _kw_tanh(x):
    # tanh from one exp; a short series near zero keeps the relative error small there
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    t = (1.0 - e) / (1.0 + e)
    x2 = x * x
    small = x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * -0.05396825396825397)))
    return tl.where(ax < 0.0625, small, tl.where(x < 0, -t, t))
# end of program text: _kw_tanh
# program text: _kw_log1p

@triton.jit
def _kw_log1p(x):
    # log(1 + x) * x / ((1 + x) - 1) cancels the rounding of 1 + x (Goldberg)
    u = 1.0 + x
    d = u - 1.0
    return tl.where(d == 0.0, x, tl.log(u) * (x / tl.where(d == 0.0, 1.0, d)))
# end of program text: _kw_log1p
# program text: _kw_expm1

@triton.jit
def _kw_expm1(x):
    # (exp(x) - 1) * x / log(exp(x)) cancels the rounding of exp(x) (Kahan)
    u = tl.exp(x)
    d = u - 1.0
    lu = tl.log(u)
    r = tl.where(lu == 0.0, x, d * (x / tl.where(lu == 0.0, 1.0, lu)))
    return tl.where(x > 20.0, d, tl.where(x < -30.0, -1.0, r))
# end of program text: _kw_expm1
# program text: _kw_softplus

@triton.jit
def _kw_softplus(x):
    # log(1 + exp(x)) without overflow
    return tl.maximum(x, 0.0) + _kw_log1p(tl.exp(-tl.abs(x)))
# end of program text: _kw_softplus
# program text: _kw_pow

@triton.jit
def _kw_pow(x, y):
    r = tl.exp2(y * tl.log2(tl.abs(x)))
    yi = tl.floor(y)
    # a negative base: an integer exponent keeps the sign of odd powers, any other gives NaN (selects,
    # not `&`, so a scalar exponent meets a block base; the interpreter cannot `&` the two)
    odd = (yi - 2.0 * tl.floor(yi * 0.5)) != 0.0
    neg = tl.where(yi == y, tl.where(odd, -r, r), float("nan"))
    r = tl.where(x < 0, neg, r)
    r = tl.where(x == 0, tl.where(y > 0, 0.0, float("inf")), r)
    return tl.where(y == 0, 1.0, r)
# end of program text: _kw_pow
# program text: _kw_round

@triton.jit
def _kw_round(x):
    # round half to even, as torch.round
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(tie & odd, r - 1.0, r)
# end of program text: _kw_round
# program text: _kw_trunc

@triton.jit
def _kw_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
# end of program text: _kw_trunc
# program text: _kw_mul

@triton.jit
def _kw_mul(a, b):
    return a * b
# end of program text: _kw_mul
# program text: _kw_gelu

@triton.jit
def _kw_gelu(x):
    # x * Phi(x) with Phi(-a) = 2^p(a), a = |x|: p is a degree-8 weighted minimax fit of log2 Phi(-a) on
    # [0, 6] (benchmarks/probes/gelu_fit.py). About as accurate in fp32 as 0.5 * x * (1 + erf(x / sqrt 2)) and
    # half its instructions: one polynomial and one exp2, where libdevice's erf selects between two.
    a = tl.minimum(tl.abs(x), 6.0)
    p = -2.8349072636046913e-06 * a + 3.9377628127112985e-05
    p = p * a - 0.00018617995374370366
    p = p * a - 0.00013693701475858688
    p = p * a + 0.007063420955091715
    p = p * a - 0.052496179938316345
    p = p * a - 0.4592081904411316
    p = p * a - 1.1511051654815674
    p = p * a - 1.0
    e = tl.exp2(p)
    return x * tl.where(x >= 0, 1.0 - e, e)
# end of program text: _kw_gelu
# program text: _kw_welford_combine

@triton.jit
def _kw_welford_combine(pivot_a, mean_a, m2_a, n_a, pivot_b, mean_b, m2_b, n_b):
    # Chan et al.: merge two (pivot, mean about the pivot, sum of squared deviations, count) summaries;
    # the merged one keeps a's pivot unless a is empty.
    n = n_a + n_b
    frac = tl.where(n == 0.0, 0.0, n_b / tl.where(n == 0.0, 1.0, n))
    delta = (pivot_b - pivot_a) + (mean_b - mean_a)
    a_empty = n_a == 0.0
    pivot = tl.where(a_empty, pivot_b, pivot_a)
    mean = tl.where(a_empty, mean_b, mean_a + delta * frac)
    return pivot, mean, m2_a + m2_b + delta * delta * n_a * frac, n
# end of program text: _kw_welford_combine
