"""Special functions (erf family, gamma family, Bessel I, logit, xlogy, ...), the small elementwise ops beside them,
torch.special, and finfo/iinfo: values against float64 references built with math/NumPy (closed forms, identities,
series), PyTorch's dtypes and errors, gradcheck/gradgradcheck in float64 for every differentiable op, and the same
calls in PyTorch when it is importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch as torch
import tinytorch.special as special
from tinytorch.autograd import gradcheck, gradgradcheck

HAS_TORCH = importlib.util.find_spec("torch") is not None
EULER = 0.57721566490153286061
ZETA3 = 1.2020569031595942854
INF, NAN = math.inf, math.nan


def t64(values, requires_grad=False):
    return torch.tensor(values, dtype=torch.float64, requires_grad=requires_grad)


def close(got, want, rtol=1e-13, atol=0.0):
    np.testing.assert_allclose(got.numpy() if isinstance(got, torch.Tensor) else got, want, rtol=rtol, atol=atol)


def same(got, want):
    """Values equal, nan where nan, the same infinities."""
    np.testing.assert_array_equal(got.numpy(), np.asarray(want, dtype=got.numpy().dtype))


# ------------------------------------------------------------------ gamma family

def test_lgamma_matches_math_lgamma_away_from_its_zeros():
    xs = [1e-300, 1e-8, 0.1, 0.5, 0.9, 1.5, 2.3, 3.7, 9.99, 10.0, 25.5, 171.7, 1e5, 1e200, -0.5, -1.5, -2.3,
          -10.25, -100.7, -1e-8]
    close(torch.lgamma(t64(xs)), [math.lgamma(x) for x in xs], rtol=5e-15)  # math.lgamma is itself off by 2e-15
    same(torch.lgamma(t64([0.0, -0.0, -1.0, -7.0, INF, -INF, NAN])), [INF, INF, INF, INF, INF, INF, NAN])


def test_lgamma_keeps_relative_accuracy_at_its_zeros_1_and_2():
    # Taylor series at 1 and 2 (zeta(k) / k coefficients); glibc's lgamma itself is off by 1e-12 relative here.
    z2, z3, z4 = math.pi ** 2 / 6, ZETA3, math.pi ** 4 / 90
    for base in (1.0, 2.0):
        x = base + np.array([1e-4, -1e-4, 3e-7, -1e-10])
        d = x - base  # exact: the offset x really has
        c = 1.0 if base == 2.0 else 0.0
        want = (c - EULER) * d + (z2 - c) / 2 * d ** 2 - (z3 - c) / 3 * d ** 3 + (z4 - c) / 4 * d ** 4
        close(torch.lgamma(t64(x)), want, rtol=1e-14)
    assert torch.lgamma(t64([1.0, 2.0])).tolist() == [0.0, 0.0]


def test_digamma_closed_forms_identities_and_edges():
    n = np.arange(1, 12)
    harmonic = np.array([math.fsum(1 / k for k in range(1, m)) for m in n])
    close(torch.digamma(t64(n.astype(float))), -EULER + harmonic, rtol=1e-15, atol=1e-16)
    half = np.array([math.fsum(2 / (2 * k - 1) for k in range(1, m + 1)) for m in range(0, 6)])
    close(torch.digamma(t64([m + 0.5 for m in range(6)])), -EULER - 2 * math.log(2) + half, rtol=5e-15)
    x = np.random.default_rng(0).uniform(0.05, 30, 200)
    close(torch.digamma(t64(x + 1)) - torch.digamma(t64(x)), 1 / x, rtol=1e-12)
    xr = np.random.default_rng(1).uniform(0.05, 0.95, 50) - np.arange(50) % 5  # negative non-integers too
    close(torch.digamma(t64(1 - xr)) - torch.digamma(t64(xr)), np.pi / np.tan(np.pi * xr), rtol=1e-10, atol=1e-10)
    # relative accuracy at the positive zero, which the recurrence alone loses
    root, root_lo = 1.4616321449683622, 9.549995429965697e-17
    x = root + np.array([1e-5, -1e-7, 1e-10, 3e-13])
    d = (x - root) - root_lo  # the distance to the zero (the first difference is exact)
    close(torch.digamma(t64(x)), 0.9676722454476212 * d - 0.8855263379671842 / 2 * d * d, rtol=1e-9)
    same(torch.digamma(t64([0.0, -0.0, -1.0, -3.0, INF, -INF, NAN])), [-INF, INF, NAN, NAN, INF, NAN, NAN])
    assert torch.digamma(torch.tensor([1, 2])).dtype is torch.float32


def test_polygamma_closed_forms_and_recurrence():
    close(torch.polygamma(1, t64([1.0, 0.5, 2.0])), [math.pi ** 2 / 6, math.pi ** 2 / 2, math.pi ** 2 / 6 - 1],
          rtol=1e-15)
    close(torch.polygamma(2, t64([1.0])), [-2 * ZETA3], rtol=1e-15)
    close(torch.polygamma(3, t64([1.0])), [math.pi ** 4 / 15], rtol=1e-15)
    close(torch.polygamma(0, t64([1.0])), [-EULER], rtol=1e-15)
    x = np.random.default_rng(2).uniform(0.1, 20, 100)
    for n in (1, 2, 4):
        step = (-1) ** n * math.factorial(n) / x ** (n + 1)
        close(torch.polygamma(n, t64(x + 1)) - torch.polygamma(n, t64(x)), step, rtol=1e-11, atol=1e-300)
    xr = np.array([-2.3, -0.7, 0.2, 0.45, -5.5])  # reflection: psi1(1 - x) + psi1(x) = pi^2 / sin^2(pi x)
    close(torch.polygamma(1, t64(1 - xr)) + torch.polygamma(1, t64(xr)), np.pi ** 2 / np.sin(np.pi * xr) ** 2,
          rtol=1e-12)
    same(torch.polygamma(2, t64([0.0, -1.0, INF, NAN])), [-INF, -INF, 0.0, NAN])
    assert torch.tensor([2.0], dtype=torch.float64).polygamma(1).item() == torch.polygamma(1, t64([2.0])).item()
    with pytest.raises(RuntimeError, match="does not support negative n"):
        torch.polygamma(-1, t64([1.0]))
    with pytest.raises(TypeError, match="argument 'n' .* must be int, not float"):
        torch.polygamma(1.5, t64([1.0]))


def test_mvlgamma_is_a_sum_of_lgammas():
    x = [2.5, 3.5, 10.25]
    for p in (1, 2, 5):
        want = [math.fsum(math.lgamma(v - i / 2) for i in range(p)) + p * (p - 1) / 4 * math.log(math.pi) for v in x]
        close(torch.mvlgamma(t64(x), p), want, rtol=1e-14)
        close(special.multigammaln(t64(x), p), want, rtol=1e-14)
    x32 = torch.tensor([[3.0, 4.0]])
    assert torch.mvlgamma(x32, 3).dtype is torch.float32 and torch.mvlgamma(x32, 3).shape == (1, 2)
    assert torch.mvlgamma(torch.tensor([2, 3]), 2).dtype is torch.float32
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        torch.mvlgamma(t64([2.0]), 0)


# ------------------------------------------------------------------ erf family and the normal distribution

def test_erf_erfc_match_math():
    xs = [-30.0, -5.5, -1.0, -0.3, -1e-10, 0.0, 0.2, 0.46875, 0.5, 1.7, 3.9, 4.1, 10.0, 26.0, 27.5]
    close(torch.erf(t64(xs)), [math.erf(x) for x in xs], rtol=1e-15)
    close(torch.erfc(t64(xs)), [math.erfc(x) for x in xs], rtol=2e-15, atol=1e-320)
    same(torch.erfc(t64([INF, -INF, NAN])), [0.0, 2.0, NAN])
    assert torch.erfc(torch.tensor([1, 0])).dtype is torch.float32


def test_erfinv_inverts_erf_including_the_tails():
    y = np.concatenate([np.linspace(-0.99, 0.99, 67), [1e-300, -1e-20, 0.0]])
    x = torch.erfinv(t64(y)).numpy()
    close(np.array([math.erf(v) for v in x]), y, rtol=1e-15, atol=1e-300)
    w = 10.0 ** -np.arange(2, 17)  # erfinv(1 - w): erfc(x) = w to full relative accuracy
    x = torch.erfinv(t64(1 - w)).numpy()
    close(np.array([math.erfc(v) for v in x]), 1 - (1 - w), rtol=1e-13)
    same(torch.erfinv(t64([1.0, -1.0, 1.5, -2.0, NAN])), [INF, -INF, NAN, NAN, NAN])
    assert torch.erfinv(torch.tensor([True])).item() == INF


def _ndtr_ref(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def test_ndtr_ndtri_log_ndtr_erfcx():
    xs = [-37.0, -20.0, -5.0, -1.0, 0.0, 0.5, 3.0, 8.0]
    # the left tail keeps its digits (to the conditioning x^2 eps of erfc(-x / sqrt 2) at -37: 1.5e-13)
    close(special.ndtr(t64(xs)), [_ndtr_ref(x) for x in xs], rtol=4e-13)
    p = np.array([1e-300, 1e-50, 1e-10, 0.01, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1 - 1e-10])
    x = special.ndtri(t64(p)).numpy()
    back = np.array([_ndtr_ref(v) if v < 0 else 1 - 0.5 * math.erfc(v / math.sqrt(2)) for v in x])
    close(back, p, rtol=2e-13)
    same(special.ndtri(t64([0.0, 1.0, -0.1, 1.1, NAN])), [-INF, INF, NAN, NAN, NAN])
    moderate = [-30.0, -3.0, -1.0, 0.0, 2.0, 6.0]
    close(special.log_ndtr(t64(moderate)), [math.log(_ndtr_ref(v)) if v < 0 else
                                            math.log1p(-0.5 * math.erfc(v / math.sqrt(2))) for v in moderate],
          rtol=1e-14)
    far = np.array([-40.0, -200.0, -1e5])  # ndtr underflows: log phi(x)/|x| (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8)
    series = 1 - far ** -2 + 3 * far ** -4 - 15 * far ** -6 + 105 * far ** -8
    close(special.log_ndtr(t64(far)), -far ** 2 / 2 - np.log(-far * math.sqrt(2 * math.pi)) + np.log(series),
          rtol=1e-15)
    xs = [-26.0, -3.0, -0.2, 0.0, 0.3, 2.0, 10.0, 25.0]
    close(special.erfcx(t64(xs)), [math.exp(v * v) * math.erfc(v) for v in xs], rtol=1e-13)
    big = np.array([1e3, 1e8, 1e70])  # 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4))
    close(special.erfcx(t64(big)), (1 - 0.5 / big ** 2 + 0.75 / big ** 4) / (big * math.sqrt(math.pi)), rtol=1e-15)
    same(special.erfcx(t64([INF, -INF, NAN])), [0.0, INF, NAN])
    same(special.log_ndtr(t64([INF, -INF, NAN])), [0.0, -INF, NAN])


# ------------------------------------------------------------------ Bessel I, sinc, entr, logit

def _bessel_series(order, x):
    term = (x / 2) ** order / math.factorial(order)
    terms = [term]
    for k in range(1, 120):
        term *= (x / 2) ** 2 / (k * (k + order))
        terms.append(term)
    return math.fsum(terms)


def test_modified_bessel_functions_against_their_series():
    xs = [-25.0, -8.0, -7.99, -1.0, 0.0, 0.3, 2.5, 8.0, 8.01, 15.0, 30.0]
    i0 = [_bessel_series(0, x) for x in xs]
    i1 = [_bessel_series(1, x) for x in xs]
    close(torch.i0(t64(xs)), i0, rtol=1e-14)
    close(special.i1(t64(xs)), i1, rtol=1e-14)
    close(special.i0e(t64(xs)), [v * math.exp(-abs(x)) for v, x in zip(i0, xs)], rtol=1e-14)
    close(special.i1e(t64(xs)), [v * math.exp(-abs(x)) for v, x in zip(i1, xs)], rtol=1e-14)
    same(special.i0e(t64([INF, -INF, NAN])), [0.0, 0.0, NAN])
    same(special.i1e(t64([INF, NAN])), [0.0, NAN])
    assert torch.i0(torch.tensor([1], dtype=torch.uint8)).dtype is torch.float32


def test_sinc_entr_logit_values():
    xs = [-3.5, -1.0, -1e-9, 0.0, 0.25, 1.0, 2.0, 7.3]
    close(torch.sinc(t64(xs)), [1.0 if x == 0 else math.sin(math.pi * x) / (math.pi * x) for x in xs],
          rtol=1e-14, atol=1e-16)
    assert torch.sinc(t64([1.0, -4.0, 1e17])).tolist() == [0.0, 0.0, 0.0]  # sin(pi x) exact at the integers
    z = torch.sinc(torch.tensor([0.5 + 0.5j]))
    close(z, [np.sinc(0.5 + 0.5j)], rtol=1e-6)
    same(special.entr(t64([-1.0, 0.0, 0.5, INF, NAN])), [-INF, 0.0, -0.5 * math.log(0.5), -INF, NAN])
    p = [1e-6, 0.25, 0.5, 0.9]
    close(torch.logit(t64(p)), [math.log(v / (1 - v)) for v in p], rtol=1e-14)
    close(torch.logit(t64([0.0, 0.05, 0.5, 1.0]), eps=0.1), [math.log(1 / 9), math.log(1 / 9), 0.0, math.log(9)],
          rtol=1e-14)
    same(torch.logit(t64([-0.5, 0.0, 1.0, 1.5])), [NAN, -INF, INF, NAN])
    same(torch.logit(t64([-0.5, 1.5]), eps=-1.0), [NAN, NAN])  # a negative eps clamps nothing
    assert torch.logit(torch.tensor([0.3], dtype=torch.float16)).dtype is torch.float16


# ------------------------------------------------------------------ binary ops

def test_xlogy_and_xlog1py():
    x = t64([0.0, 0.0, 0.0, 1.0, 2.0, -3.0])
    y = t64([0.0, NAN, -1.0, 0.0, 5.0, 0.5])
    with np.errstate(all="ignore"):
        want = [0.0, NAN, 0.0, -INF, 2 * math.log(5.0), -3 * math.log(0.5)]
    same(torch.xlogy(x, y), want)
    close(torch.xlogy(2, t64([3.0])), [2 * math.log(3)])
    close(torch.xlogy(t64([3.0]), 2), [3 * math.log(2)])
    assert torch.xlogy(torch.tensor([2]), torch.tensor([3])).dtype is torch.float32
    assert torch.xlogy(torch.tensor([2.0], dtype=torch.float16), 3.0).dtype is torch.float16
    assert torch.xlogy(torch.tensor(2.0, dtype=torch.float64), torch.tensor([3.0])).dtype is torch.float32
    assert torch.xlogy(t64([[1.0], [2.0]]), t64([1.0, 2.0, 3.0])).shape == (2, 3)
    same(special.xlog1py(t64([0.0, 0.0, 1.0, 2.0]), t64([-2.0, NAN, -1.0, 0.0])), [0.0, NAN, -INF, 0.0])
    close(special.xlog1py(t64([2.0]), t64([1e-20])), [2e-20])
    close(special.xlogy(torch.tensor([2]), 3), [2 * math.log(3)], rtol=1e-6)
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        torch.xlogy(2, 3)
    with pytest.raises(RuntimeError, match=r"size of tensor a \(2\) must match the size of tensor b \(3\)"):
        torch.xlogy(t64([1.0, 2.0]), t64([1.0, 2.0, 3.0]))
    with pytest.raises(NotImplementedError, match="\"xlogy_cpu\" not implemented for 'ComplexFloat'"):
        torch.xlogy(torch.tensor([1j]), torch.tensor([1j]))


def test_logaddexp_hypot_nextafter_copysign():
    a = t64([1.0, -800.0, 800.0, INF, -INF, INF, NAN])
    b = t64([2.0, -801.0, 0.0, INF, -INF, -INF, 1.0])
    with np.errstate(invalid="ignore"):
        same(torch.logaddexp(a, b), np.logaddexp(a.numpy(), b.numpy()))
        same(torch.logaddexp2(a, b), np.logaddexp2(a.numpy(), b.numpy()))
    assert torch.logaddexp(torch.tensor([1.0]), t64([1.0])).dtype is torch.float64
    close(torch.hypot(t64([3.0, 1e300, 0.0]), t64([4.0, 1e300, 0.0])), [5.0, math.sqrt(2) * 1e300, 0.0])
    n = torch.nextafter(t64([1.0, 1.0, 0.0]), t64([2.0, 0.0, -1.0]))
    assert n.tolist() == [np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0), -5e-324]
    assert torch.nextafter(torch.tensor([1.0]), torch.tensor([2.0])).item() == float(np.nextafter(np.float32(1), 2))
    same(torch.copysign(t64([1.0, -2.0, 3.0, 0.0]), t64([-0.0, 1.0, -INF, -1.0])), [-1.0, 2.0, -3.0, -0.0])
    same(torch.copysign(torch.tensor([1, 2]), -1), [-1.0, -2.0])
    assert torch.copysign(torch.tensor([1, 2]), -1).dtype is torch.float32
    for name in ("logaddexp", "hypot", "nextafter"):
        fn = getattr(torch, name)
        with pytest.raises(NotImplementedError, match=f"\"{name}_cpu\" not implemented for 'Long'"):
            fn(torch.tensor([1]), torch.tensor([2]))
        with pytest.raises(TypeError, match="argument 'other' \\(position 2\\) must be Tensor, not float"):
            fn(t64([1.0]), 1.0)
    with pytest.raises(TypeError, match="argument 'input' \\(position 1\\) must be Tensor, not float"):
        torch.copysign(1.0, t64([1.0]))
    with pytest.raises(NotImplementedError, match="\"copysign_cpu\" not implemented for 'ComplexFloat'"):
        torch.copysign(torch.tensor([1j]), 1.0)


def test_fmax_fmin_heaviside():
    a = t64([1.0, NAN, NAN, 3.0, -0.5])
    b = t64([2.0, 1.0, NAN, NAN, -0.5])
    same(torch.fmax(a, b), np.fmax(a.numpy(), b.numpy()))
    same(torch.fmin(a, b), np.fmin(a.numpy(), b.numpy()))
    r = torch.fmax(torch.tensor([1, 5]), torch.tensor([3, 2]))
    assert r.dtype is torch.int64 and r.tolist() == [3, 5]
    assert torch.fmin(torch.tensor([1, 5]), torch.tensor([3.0, 2.0])).dtype is torch.float32
    with pytest.raises(RuntimeError, match="fmax not implemented for complex tensors"):
        torch.fmax(torch.tensor([1j]), torch.tensor([1j]))
    same(torch.heaviside(t64([-1.0, 0.0, 2.0, NAN]), t64(0.5)), [0.0, 0.5, 1.0, 0.0])
    h = torch.heaviside(torch.tensor([-2, 0, 3]), torch.tensor([7]))
    assert h.dtype is torch.int64 and h.tolist() == [0, 7, 1]
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(t64([1.0]), torch.tensor([1]))
    with pytest.raises(RuntimeError, match="complex tensors"):
        torch.heaviside(torch.tensor([1j]), torch.tensor([1j]))
    with pytest.raises(TypeError, match="argument 'values' \\(position 2\\) must be Tensor, not float"):
        torch.heaviside(t64([1.0]), 0.5)
    x = t64([1.0, -1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
        torch.heaviside(x, t64([0.5, 0.5])).sum().backward()


def test_gcd_lcm_float_power():
    a, b = torch.tensor([-4, 0, 0, 12, 7]), torch.tensor([6, 0, -3, 18, 5])
    assert torch.gcd(a, b).tolist() == [2, 0, 3, 6, 1]
    assert torch.lcm(a, b).tolist() == [12, 0, 0, 36, 35]
    assert torch.gcd(torch.tensor([4], dtype=torch.int32), torch.tensor([6])).dtype is torch.int64
    i16 = torch.int16
    assert torch.gcd(torch.tensor([4, 6], dtype=i16), torch.tensor([[6], [9]], dtype=i16)).shape == (2, 2)
    with pytest.raises(NotImplementedError, match="\"gcd_cpu\" not implemented for 'Float'"):
        torch.gcd(torch.tensor([4]), torch.tensor([6.0]))
    with pytest.raises(NotImplementedError, match="'Bool'"):
        torch.lcm(torch.tensor([True]), torch.tensor([True]))
    with pytest.raises(TypeError, match="must be Tensor, not int"):
        torch.gcd(torch.tensor([4]), 2)
    r = torch.float_power(torch.tensor([2, 3]), 2)
    assert r.dtype is torch.float64 and r.tolist() == [4.0, 9.0]
    assert torch.float_power(2, torch.tensor([1.0, 3.0])).tolist() == [2.0, 8.0]
    assert torch.float_power(torch.tensor([2], dtype=torch.int32), 0.5).item() == math.sqrt(2)
    c = torch.float_power(torch.tensor([2]), torch.tensor([1j]))
    assert c.dtype is torch.complex128
    close(c, [2 ** 1j])
    with pytest.raises(TypeError, match="invalid combination of arguments"):
        torch.float_power(2, 3)


def test_float_power_of_float32_is_float64_to_full_precision():
    x = torch.tensor([1.1], dtype=torch.float32)
    assert torch.float_power(x, 3).item() == float(np.float32(1.1)) ** 3


# ------------------------------------------------------------------ predicates, angles, aliases

def test_predicates():
    same(torch.signbit(t64([-0.0, 0.0, -1.0, NAN, -NAN, -INF])), [True, False, True, False, True, True])
    assert torch.signbit(torch.tensor([-3, 0, 2])).tolist() == [True, False, False]
    assert torch.signbit(torch.tensor([1], dtype=torch.uint8)).tolist() == [False]
    assert torch.signbit(torch.tensor([True])).tolist() == [False]
    assert torch.signbit(torch.tensor([-1.0], dtype=torch.bfloat16)).tolist() == [True]
    with pytest.raises(NotImplementedError, match="signbit is not implemented for complex tensors"):
        torch.signbit(torch.tensor([1j]))
    v = t64([INF, -INF, NAN, 1.0])
    assert torch.isposinf(v).tolist() == [True, False, False, False]
    assert torch.isneginf(v).tolist() == [False, True, False, False]
    assert torch.isposinf(torch.tensor([1, 2])).tolist() == [False, False]
    with pytest.raises(RuntimeError, match="isposinf does not support complex inputs"):
        torch.isposinf(torch.tensor([1j]))
    assert torch.isreal(torch.tensor([1 + 0j, 1j])).tolist() == [True, False]
    assert torch.isreal(torch.tensor([1, 2])).tolist() == [True, True]
    assert torch.is_floating_point(t64([1.0])) and not torch.is_floating_point(torch.tensor([1]))
    assert torch.is_complex(torch.tensor([1j])) and not torch.is_complex(t64([1.0]))
    with pytest.raises(TypeError, match="is_floating_point\\(\\): argument 'input' \\(position 1\\) must be Tensor"):
        torch.is_floating_point(1)
    with pytest.raises(TypeError, match="must be Tensor, not int"):
        torch.isreal(1)


@pytest.mark.parametrize("src,dst,ok", [
    ("float32", "int32", False), ("int32", "bool", False), ("bool", "uint8", True), ("complex64", "float64", False),
    ("float64", "float16", True), ("int64", "uint8", True), ("float32", "complex64", True), ("bool", "bool", True),
    ("int8", "bfloat16", True), ("complex128", "complex64", True)])
def test_can_cast(src, dst, ok):
    assert torch.can_cast(getattr(torch, src), getattr(torch, dst)) is ok


def test_can_cast_takes_python_types_and_rejects_others():
    assert torch.can_cast(float, torch.int32) is False and torch.can_cast(int, torch.float16) is True
    with pytest.raises(TypeError, match="argument 'to' \\(position 2\\) must be torch.dtype, not str"):
        torch.can_cast(torch.float32, "x")


def test_angles_hyperbolic_and_fix():
    x = [-180.0, 0.0, 45.0, 360.0]
    close(torch.deg2rad(t64(x)), np.deg2rad(x))
    close(torch.rad2deg(t64(x)), np.rad2deg(x))
    assert torch.deg2rad(torch.tensor([180])).dtype is torch.float32
    h = torch.deg2rad(torch.tensor([180.0], dtype=torch.float16))
    assert h.dtype is torch.float16 and h.item() == float(np.float16(np.pi))
    with pytest.raises(RuntimeError, match="deg2rad is not supported for complex tensors"):
        torch.deg2rad(torch.tensor([1j]))
    v = t64([-2.5, -0.3, 0.0, 0.7, 3.0])
    close(torch.asinh(v), np.arcsinh(v.numpy()))
    close(torch.atanh(v * 0.3), np.arctanh(v.numpy() * 0.3))
    close(torch.acosh(v.abs() + 1), np.arccosh(v.numpy().__abs__() + 1))
    for alias, name in (("arcsinh", "asinh"), ("arccosh", "acosh"), ("arctanh", "atanh")):
        u = v.abs() * 0.3 + 1.0 if name == "acosh" else v * 0.3
        close(getattr(torch, alias)(u), getattr(torch, name)(u).numpy(), rtol=0)
    close(torch.asinh(torch.tensor([0.5 + 0.5j])), [np.arcsinh(0.5 + 0.5j)], rtol=1e-6)
    assert torch.asinh(torch.tensor([1, 2])).dtype is torch.float32
    assert torch.fix(t64([-2.7, 2.7])).tolist() == [-2.0, 2.0]
    assert torch.fix(torch.tensor([3, -4])).tolist() == [3, -4]


def test_out_argument():
    out = torch.empty(3, dtype=torch.float64)
    assert torch.erfinv(t64([0.0, 0.5, -0.5]), out=out) is out
    close(out, [0.0, 0.4769362762044699, -0.4769362762044699])
    out = torch.empty(2)
    assert torch.polygamma(1, torch.tensor([1.0, 2.0]), out=out) is out
    assert torch.xlogy(torch.tensor([1.0, 2.0]), 3, out=out) is out
    close(out, [math.log(3), 2 * math.log(3)], rtol=1e-6)


@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), ()])
def test_empty_and_zero_dim_inputs(shape):
    x = torch.ones(shape, dtype=torch.float64) * 0.5
    for fn in (torch.erf, torch.erfc, torch.erfinv, torch.lgamma, torch.digamma, torch.i0, torch.sinc, special.i1,
               special.i0e, special.i1e, special.ndtri, special.log_ndtr, special.erfcx, special.entr,
               lambda v: torch.polygamma(2, v), lambda v: torch.mvlgamma(v + 1, 2), torch.logit,
               lambda v: torch.xlogy(v, v), lambda v: torch.logaddexp(v, v), lambda v: torch.hypot(v, v),
               torch.signbit, torch.isposinf):
        r = fn(x)
        assert r.shape == shape
        if x.numel():
            assert not torch.isnan(r.to(torch.float64)).any()


def test_meta_tensors_keep_shape_and_dtype():
    m = torch.empty(2, 3, device="meta")
    for fn in (torch.erfinv, torch.lgamma, torch.sinc, lambda v: torch.polygamma(2, v), lambda v: torch.xlogy(v, v),
               lambda v: torch.mvlgamma(v, 2), torch.logit, torch.asinh):
        r = fn(m)
        assert r.device.type == "meta" and r.shape == (2, 3) and r.dtype is torch.float32
    assert torch.signbit(m).dtype is torch.bool


def test_dtypes_follow_pytorch():
    for fn in (torch.erf, torch.erfc, torch.erfinv, torch.lgamma, torch.digamma, torch.i0, torch.sinc,
               special.i1e, special.ndtri, special.entr, lambda v: torch.polygamma(1, v), torch.logit):
        assert fn(torch.tensor([0, 1])).dtype is torch.float32  # integers: the default float
        for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            assert fn(torch.tensor([0.25, 0.5], dtype=dt)).dtype is dt
    lg = torch.lgamma(torch.tensor([0.5, 3.0], dtype=torch.bfloat16))
    close(lg.to(torch.float64), [math.lgamma(0.5), math.lgamma(3.0)], rtol=1e-2)
    for name in ("erfinv", "lgamma", "i0", "digamma"):
        with pytest.raises(NotImplementedError, match=f"\"{name}_cpu\" not implemented for 'ComplexFloat'"):
            getattr(torch, name)(torch.tensor([1j]))


def test_float32_values_are_float64_values_rounded():
    x = np.random.default_rng(3).uniform(0.1, 5, 50).astype(np.float32)
    for fn in (torch.lgamma, torch.digamma, torch.erfc, torch.i0, special.i1e):
        got = fn(torch.tensor(x)).numpy()
        want = fn(torch.tensor(x.astype(np.float64))).numpy().astype(np.float32)
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ Tensor methods, in place

def test_methods_and_inplace_variants():
    x = t64([0.2, 0.6])
    for name in ("erfc", "erfinv", "lgamma", "digamma", "i0", "sinc", "asinh", "atanh", "arcsinh", "arctanh",
                 "deg2rad", "rad2deg", "fix"):
        want = getattr(torch, name)(x)
        close(getattr(x, name)(), want.numpy())
        y = x.clone()
        assert getattr(y, name + "_")() is y
        close(y, want.numpy())
    y = x.clone()
    close(y.polygamma_(2), torch.polygamma(2, x).numpy())
    close(x.mvlgamma(1), torch.lgamma(x).numpy())
    y = x + 1
    y.mvlgamma_(2)
    close(y, torch.mvlgamma(x + 1, 2).numpy())
    close(x.clone().logit_(0.3), torch.logit(x, 0.3).numpy())
    close(x.clone().xlogy_(t64([2.0, 3.0])), torch.xlogy(x, t64([2.0, 3.0])).numpy())
    close(x.clone().hypot_(x), torch.hypot(x, x).numpy())
    close(x.clone().copysign_(-1.0), -x.numpy())
    close(x.clone().nextafter_(t64([0.0, 0.0])), np.nextafter(x.numpy(), 0))
    close(x.clone().float_power_(2), (x * x).numpy())
    assert x.logaddexp(x).shape == (2,) and x.logaddexp2(x).shape == (2,) and x.fmax(x).shape == (2,)
    assert x.signbit().dtype is torch.bool and x.isposinf().dtype is torch.bool and x.isreal().all()
    g = torch.tensor([4, 6])
    assert g.clone().gcd_(torch.tensor([6, 4])).tolist() == [2, 2]
    assert g.clone().lcm_(torch.tensor([6, 4])).tolist() == [12, 12]
    assert x.clone().heaviside_(t64([1.0, 1.0])).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="the base given to float_power_ has dtype Float but the operation's "
                                           "result requires dtype Double"):
        torch.tensor([1.0]).float_power_(2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.tensor([1, 2]).sinc_()
    leaf = t64([0.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.erfinv_()


def test_inplace_records_the_gradient():
    x = t64([0.3, 0.6], requires_grad=True)
    y = x * 1.0
    y.lgamma_()
    y.sum().backward()
    close(x.grad, torch.digamma(x.detach()).numpy())


# ------------------------------------------------------------------ gradients

def _pos(n=4, lo=0.3, hi=3.0, seed=0):
    return t64(np.random.default_rng(seed).uniform(lo, hi, n), requires_grad=True)


UNARY_GRADS = {
    "erf": (torch.erf, (-2.0, 2.0)), "erfc": (torch.erfc, (-2.0, 2.0)), "erfinv": (torch.erfinv, (-0.9, 0.9)),
    "lgamma": (torch.lgamma, (0.3, 4.0)), "lgamma_negative": (torch.lgamma, (-0.9, -0.1)),
    "digamma": (torch.digamma, (0.3, 4.0)), "polygamma1": (lambda v: torch.polygamma(1, v), (0.3, 4.0)),
    "polygamma3": (lambda v: torch.polygamma(3, v), (0.5, 4.0)),
    "mvlgamma": (lambda v: torch.mvlgamma(v, 3), (1.2, 4.0)),
    "i0": (torch.i0, (-10.0, 10.0)), "i0e": (special.i0e, (-10.0, 10.0)), "i1": (special.i1, (-10.0, 10.0)),
    "i1e": (special.i1e, (-10.0, 10.0)), "logit": (torch.logit, (0.1, 0.9)),
    "logit_eps": (lambda v: torch.logit(v, 0.05), (0.1, 0.9)), "sinc": (torch.sinc, (-2.3, 2.3)),
    "ndtr": (special.ndtr, (-3.0, 3.0)), "ndtri": (special.ndtri, (0.05, 0.95)),
    "log_ndtr": (special.log_ndtr, (-5.0, 3.0)), "erfcx": (special.erfcx, (-2.0, 3.0)),
    "entr": (special.entr, (0.1, 2.0)), "asinh": (torch.asinh, (-2.0, 2.0)), "acosh": (torch.acosh, (1.2, 3.0)),
    "atanh": (torch.atanh, (-0.8, 0.8)), "deg2rad": (torch.deg2rad, (-5.0, 5.0)),
    "rad2deg": (torch.rad2deg, (-5.0, 5.0)), "expit": (special.expit, (-3.0, 3.0)),
}


@pytest.mark.parametrize("name", sorted(UNARY_GRADS))
def test_unary_gradcheck_and_gradgradcheck(name):
    fn, (lo, hi) = UNARY_GRADS[name]
    x = _pos(4, lo, hi, seed=len(name))
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


BINARY_GRADS = {
    "xlogy": (torch.xlogy, (-2.0, 2.0), (0.3, 3.0)), "xlog1py": (special.xlog1py, (-2.0, 2.0), (-0.7, 3.0)),
    "logaddexp": (torch.logaddexp, (-3.0, 3.0), (-3.0, 3.0)),
    "logaddexp2": (torch.logaddexp2, (-3.0, 3.0), (-3.0, 3.0)), "hypot": (torch.hypot, (0.3, 2.0), (-2.0, -0.3)),
    "copysign": (torch.copysign, (0.3, 2.0), (-1.0, 1.0)), "fmax": (torch.fmax, (-1.0, 1.0), (-1.0, 1.0)),
    "fmin": (torch.fmin, (-1.0, 1.0), (-1.0, 1.0)), "float_power": (torch.float_power, (0.5, 2.0), (-1.5, 1.5)),
}


@pytest.mark.parametrize("name", sorted(BINARY_GRADS))
def test_binary_gradcheck_with_broadcasting(name):
    fn, ra, rb = BINARY_GRADS[name]
    a = t64(np.random.default_rng(1).uniform(*ra, (2, 3)), requires_grad=True)
    b = t64(np.random.default_rng(2).uniform(*rb, (3,)), requires_grad=True)
    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b))


def test_gradients_with_a_number_operand_and_special_points():
    x = _pos(3, 0.3, 2.0)
    assert gradcheck(lambda v: torch.xlogy(v, 2.5), (x,))
    assert gradcheck(lambda v: torch.xlogy(1.5, v), (x,))
    assert gradcheck(lambda v: torch.copysign(v, -1.0), (x,))
    assert gradcheck(lambda v: torch.float_power(v, 2.5), (x,))
    assert gradcheck(lambda v: torch.float_power(1.5, v), (x,))
    assert gradgradcheck(lambda v: torch.xlogy(v, 2.5), (x,))
    a, b = t64([0.0, 0.0, 1.0], requires_grad=True), t64([0.0, -1.0, 0.0], requires_grad=True)
    torch.xlogy(a, b).sum().backward()
    same(a.grad, [0.0, 0.0, -INF])  # 0 where x == 0 and y <= 0, not 0 * -inf
    same(b.grad, [NAN, -0.0, INF])
    a, b = t64([1.0, 2.0, NAN, 3.0], requires_grad=True), t64([1.0, NAN, 1.0, 5.0], requires_grad=True)
    torch.fmax(a, b).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 0.0, 0.0] and b.grad.tolist() == [0.0, 0.0, 1.0, 1.0]
    c = t64([0.0, -1.0, 2.0], requires_grad=True)
    torch.copysign(c, -1.0).sum().backward()
    assert c.grad.tolist() == [0.0, 1.0, -1.0]
    z = t64([-0.5, 0.3, 1.5], requires_grad=True)
    torch.logit(z).sum().backward()
    same(z.grad, [NAN, 1 / (0.3 * 0.7), NAN])
    z.grad = None
    torch.logit(z, eps=0.4).sum().backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]
    s = t64([0.0, 1.0], requires_grad=True)
    torch.sinc(s).sum().backward()
    close(s.grad, [0.0, -1.0], atol=1e-15)
    i = t64([0.0], requires_grad=True)
    special.i1(i).backward()
    assert i.grad.item() == 0.5
    u, v = t64([1.0], requires_grad=True), t64([2.0], requires_grad=True)
    torch.nextafter(u, v).sum().backward()
    assert u.grad.tolist() == [1.0] and v.grad.tolist() == [0.0]
    assert torch.erfinv(x * 0.3).grad_fn.name() == "ErfinvBackward0"
    assert torch.xlogy(x, x).grad_fn.name() == "XlogyBackward0"
    assert torch.xlogy(2, x).grad_fn.name() == "XlogyBackward1"
    assert torch.polygamma(2, x).grad_fn.name() == "PolygammaBackward0"


def test_float32_gradient_keeps_the_dtype():
    x = torch.tensor([0.5, 1.5], requires_grad=True)
    torch.lgamma(x).sum().backward()
    assert x.grad.dtype is torch.float32
    close(x.grad, torch.digamma(x.detach()).numpy(), rtol=1e-6)


# ------------------------------------------------------------------ torch.special

def test_special_namespace_aliases():
    x = t64([0.3, 0.7])
    pairs = [(special.gammaln, torch.lgamma), (special.psi, torch.digamma), (special.erf, torch.erf),
             (special.erfc, torch.erfc), (special.erfinv, torch.erfinv), (special.i0, torch.i0),
             (special.sinc, torch.sinc), (special.logit, torch.logit), (special.expit, torch.sigmoid),
             (special.expm1, torch.expm1), (special.exp2, torch.exp2), (special.log1p, torch.log1p)]
    for s, f in pairs:
        close(s(x), f(x).numpy())
    close(special.polygamma(2, x), torch.polygamma(2, x).numpy())
    close(special.round(t64([1.25, 2.5]), decimals=1), [1.2, 2.5])
    close(special.softmax(x, 0), torch.softmax(x, 0).numpy())
    close(special.log_softmax(x, 0, dtype=torch.float32), torch.log_softmax(x, 0).numpy(), rtol=1e-6)
    close(special.logsumexp(x, 0), [math.log(math.exp(0.3) + math.exp(0.7))])
    with pytest.raises(TypeError):
        special.softmax(x)
    with pytest.raises(TypeError):
        special.round(x, 1)
    assert set(special.__all__) <= set(dir(special))


# ------------------------------------------------------------------ finfo / iinfo

@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_finfo_matches_numpy(name):
    f, n = torch.finfo(getattr(torch, name)), np.finfo(getattr(np, name))
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.dtype) == \
        (n.bits, float(n.eps), float(n.max), float(n.min), float(n.smallest_normal), float(n.smallest_normal), name)
    assert f.resolution == 10.0 ** -n.precision
    assert all(type(v) is float for v in (f.eps, f.max, f.min, f.tiny, f.resolution))


def test_finfo_bfloat16_complex_default_and_errors():
    b = torch.finfo(torch.bfloat16)
    assert (b.bits, b.eps, b.max, b.tiny, b.resolution, b.dtype) == \
        (16, 2.0 ** -7, 3.3895313892515355e+38, 2.0 ** -126, 0.01, "bfloat16")
    assert torch.finfo(torch.complex128) == torch.finfo(torch.float64)
    assert torch.finfo(torch.complex64).dtype == "float32"
    assert torch.finfo() == torch.finfo(torch.float32)
    torch.set_default_dtype(torch.float64)
    try:
        assert torch.finfo().dtype == "float64"
    finally:
        torch.set_default_dtype(torch.float32)
    assert torch.finfo(float).dtype == "float64"
    assert torch.finfo(torch.float32) != torch.finfo(torch.float16)
    assert repr(torch.finfo(torch.float32)) == (
        "finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, smallest_normal=1.17549e-38, "
        "tiny=1.17549e-38, dtype=float32)")
    for bad in (torch.int32, torch.bool):
        with pytest.raises(TypeError, match="torch.finfo\\(\\) requires a floating point input type"):
            torch.finfo(bad)
    with pytest.raises(TypeError, match="must be torch.dtype, not str"):
        torch.finfo("float32")
    with pytest.raises(TypeError, match="unhashable"):
        hash(torch.finfo(torch.float32))


def test_iinfo():
    for name in ("uint8", "int8", "int16", "int32", "int64"):
        i, n = torch.iinfo(getattr(torch, name)), np.iinfo(getattr(np, name))
        assert (i.bits, i.min, i.max, i.dtype) == (n.bits, int(n.min), int(n.max), name)
        assert type(i.max) is int
    assert repr(torch.iinfo(torch.int32)) == "iinfo(min=-2.14748e+09, max=2.14748e+09, dtype=int32)"
    assert repr(torch.iinfo(torch.uint8)) == "iinfo(min=0, max=255, dtype=uint8)"
    assert torch.iinfo(type=torch.int8) == torch.iinfo(torch.int8)
    with pytest.raises(TypeError, match="torch.bool is not supported by torch.iinfo"):
        torch.iinfo(torch.bool)
    with pytest.raises(TypeError, match="torch.iinfo\\(\\) requires an integer input type"):
        torch.iinfo(torch.float32)
    with pytest.raises(TypeError):
        torch.iinfo()


# ------------------------------------------------------------------ PyTorch

def _pair(values, dtype="float64", requires_grad=False):
    import torch as pt
    a = np.asarray(values, dtype=dtype)
    return (torch.tensor(a, requires_grad=requires_grad), pt.tensor(a, requires_grad=requires_grad))


TORCH_UNARY = [  # (name, how to call it in either library, inputs, rtol)
    ("erf", lambda L, x: L.erf(x), np.linspace(-5, 5, 41), 1e-15),
    ("erfc", lambda L, x: L.erfc(x), np.linspace(-5, 26, 63), 1e-13),
    ("erfinv", lambda L, x: L.erfinv(x), np.linspace(-0.999, 0.999, 41), 1e-12),
    ("lgamma", lambda L, x: L.lgamma(x), np.concatenate([np.linspace(-9.7, 30, 51), [1e-5, 1e10]]), 1e-13),
    ("digamma", lambda L, x: L.digamma(x), np.linspace(-9.7, 30, 51), 1e-12),
    ("polygamma1", lambda L, x: L.polygamma(1, x), np.linspace(0.1, 30, 31), 1e-8),  # ATen's trigamma: ~1e-9
    ("polygamma2", lambda L, x: L.polygamma(2, x), np.linspace(-9.7, 30, 51), 1e-12),
    ("polygamma5", lambda L, x: L.polygamma(5, x), np.linspace(0.1, 30, 31), 1e-12),
    ("mvlgamma", lambda L, x: L.mvlgamma(x, 4), np.linspace(1.6, 30, 31), 1e-13),
    ("i0", lambda L, x: L.i0(x), np.linspace(-30, 30, 41), 1e-14),
    ("i0e", lambda L, x: L.special.i0e(x), np.linspace(-30, 30, 41), 1e-14),
    ("i1", lambda L, x: L.special.i1(x), np.linspace(-30, 30, 41), 1e-14),
    ("i1e", lambda L, x: L.special.i1e(x), np.linspace(-30, 30, 41), 1e-14),
    ("ndtr", lambda L, x: L.special.ndtr(x), np.linspace(-5, 8, 27), 1e-12),
    ("ndtri", lambda L, x: L.special.ndtri(x), np.linspace(0.001, 0.999, 41), 1e-12),
    ("log_ndtr", lambda L, x: L.special.log_ndtr(x), np.linspace(-50, 8, 41), 1e-13),
    ("erfcx", lambda L, x: L.special.erfcx(x), np.linspace(-20, 80, 41), 1e-13),
    ("entr", lambda L, x: L.special.entr(x), np.linspace(-1, 5, 25), 1e-15),
    ("sinc", lambda L, x: L.sinc(x), np.linspace(-5.3, 5.3, 43), 1e-12),
    ("logit", lambda L, x: L.logit(x), np.linspace(0.01, 0.99, 21), 1e-14),
    ("logit_eps", lambda L, x: L.logit(x, 0.2), np.linspace(0.01, 0.99, 21), 1e-14),
    ("asinh", lambda L, x: L.asinh(x), np.linspace(-5, 5, 21), 1e-15),
    ("acosh", lambda L, x: L.acosh(x), np.linspace(1, 5, 21), 1e-15),
    ("atanh", lambda L, x: L.atanh(x), np.linspace(-0.95, 0.95, 21), 1e-15),
    ("deg2rad", lambda L, x: L.deg2rad(x), np.linspace(-360, 360, 9), 1e-15),
    ("rad2deg", lambda L, x: L.rad2deg(x), np.linspace(-7, 7, 9), 1e-15),
    ("fix", lambda L, x: L.fix(x), np.linspace(-3.5, 3.5, 15), 0),
]


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
@pytest.mark.parametrize("case", TORCH_UNARY, ids=lambda c: c[0])
def test_unary_ops_match_pytorch(case):
    import torch as pt
    _, call, values, rtol = case
    ours, theirs = _pair(values)
    got, want = call(torch, ours), call(pt, theirs)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=1e-14)
    for dtype in ("float32", "int64"):
        if dtype == "int64" and case[0] in ("erfinv", "ndtri", "logit", "logit_eps", "atanh"):
            continue
        ours, theirs = _pair(values, dtype)
        got, want = call(torch, ours), call(pt, theirs)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=max(rtol, 2e-5), atol=1e-5)


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
@pytest.mark.parametrize("case", [c for c in TORCH_UNARY if c[0] not in ("fix",)], ids=lambda c: c[0])
def test_unary_gradients_match_pytorch(case):
    import torch as pt
    _, call, values, _ = case
    values = values[(values > -9) & (values < 9)] if case[0] not in ("i0", "i0e", "i1", "i1e") else values
    ours, theirs = _pair(values, requires_grad=True)
    call(torch, ours).sum().backward()
    call(pt, theirs).sum().backward()
    rtol = 1e-7 if case[0] in ("digamma", "polygamma1", "lgamma") else 1e-12
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=rtol, atol=1e-12)


TORCH_BINARY = [
    ("xlogy", lambda L, a, b: L.xlogy(a, b), (-2, 2), (0.0, 3)),
    ("xlogy_number", lambda L, a, b: L.xlogy(a, 2.5), (-2, 2), (0.1, 3)),
    ("xlog1py", lambda L, a, b: L.special.xlog1py(a, b), (-2, 2), (-0.9, 3)),
    ("logaddexp", lambda L, a, b: L.logaddexp(a, b), (-3, 3), (-3, 3)),
    ("logaddexp2", lambda L, a, b: L.logaddexp2(a, b), (-3, 3), (-3, 3)),
    ("hypot", lambda L, a, b: L.hypot(a, b), (-3, 3), (-3, 3)),
    ("copysign", lambda L, a, b: L.copysign(a, b), (-3, 3), (-3, 3)),
    ("fmax", lambda L, a, b: L.fmax(a, b), (-3, 3), (-3, 3)),
    ("fmin", lambda L, a, b: L.fmin(a, b), (-3, 3), (-3, 3)),
    ("float_power", lambda L, a, b: L.float_power(a, b), (0.2, 3), (-2, 2)),
    ("nextafter", lambda L, a, b: L.nextafter(a, b), (-3, 3), (-3, 3)),
]


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
@pytest.mark.parametrize("case", TORCH_BINARY, ids=lambda c: c[0])
def test_binary_ops_and_gradients_match_pytorch(case):
    import torch as pt
    _, call, ra, rb = case
    rng = np.random.default_rng(7)
    av, bv = rng.uniform(*ra, (3, 4)), rng.uniform(*rb, (4,))
    av[0, :2] = 0.0
    a, pa = _pair(av, requires_grad=True)
    b, pb = _pair(bv, requires_grad=True)
    got, want = call(torch, a, b), call(pt, pa, pb)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-14, atol=1e-300)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), pa.grad.numpy(), rtol=1e-12)
    if pb.grad is not None:
        np.testing.assert_allclose(b.grad.numpy(), pb.grad.numpy(), rtol=1e-12)
    for da, db in (("float32", "float64"), ("int64", "float32"), ("float16", "float16")):
        if case[0] in ("logaddexp", "logaddexp2", "hypot", "nextafter") and "int64" in (da, db):
            continue
        (x, px), (y, py) = _pair(av, da), _pair(bv, db)
        got, want = call(torch, x, y), call(pt, px, py)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (da, db)
        np.testing.assert_allclose(got.to(torch.float64).numpy(), want.double().numpy(), rtol=2e-3, atol=1e-3)


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_the_names_are_pytorchs():
    import torch as pt
    from tinytorch._ops import special as ops
    assert all(callable(getattr(pt, name)) for name in ops.__all__)
    assert all(callable(getattr(pt.special, name)) for name in special.__all__)
    for name in ("erfinv_", "lgamma_", "polygamma_", "mvlgamma_", "logit_", "xlogy_", "hypot_", "copysign_",
                 "heaviside_", "gcd_", "lcm_", "nextafter_", "float_power_", "fix_", "arctanh_", "deg2rad_"):
        assert hasattr(pt.Tensor, name) and hasattr(torch.Tensor, name), name


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_small_ops_and_info_match_pytorch():
    import torch as pt
    a, b = np.array([-4, 0, 0, 12, 7, -9]), np.array([6, 0, -3, 18, 5, 6])
    for name in ("gcd", "lcm"):
        assert getattr(torch, name)(torch.tensor(a), torch.tensor(b)).tolist() == \
            getattr(pt, name)(pt.tensor(a), pt.tensor(b)).tolist()
    v = np.array([-1.0, -0.0, 0.0, 2.0, np.inf, -np.inf, np.nan])
    for name in ("signbit", "isposinf", "isneginf", "isreal"):
        assert getattr(torch, name)(torch.tensor(v)).tolist() == getattr(pt, name)(pt.tensor(v)).tolist()
    h = torch.heaviside(torch.tensor(v), t64([0.5])).numpy()
    np.testing.assert_array_equal(h, pt.heaviside(pt.tensor(v), pt.tensor([0.5], dtype=pt.float64)).numpy())
    names = ["float32", "int32", "bool", "uint8", "complex64", "float64", "float16", "int64", "bfloat16", "int8"]
    for s in names:
        for d in names:
            assert torch.can_cast(getattr(torch, s), getattr(torch, d)) == pt.can_cast(getattr(pt, s), getattr(pt, d))
    for name in ("float16", "bfloat16", "float32", "float64", "complex64"):
        assert repr(torch.finfo(getattr(torch, name))) == repr(pt.finfo(getattr(pt, name)))
        mine, theirs = torch.finfo(getattr(torch, name)), pt.finfo(getattr(pt, name))
        for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
            assert getattr(mine, attr) == getattr(theirs, attr), (name, attr)
    for name in ("uint8", "int8", "int16", "int32", "int64"):
        assert repr(torch.iinfo(getattr(torch, name))) == repr(pt.iinfo(getattr(pt, name)))
    r = torch.float_power(torch.tensor([2], dtype=torch.int32), torch.tensor([0.5]))
    w = pt.float_power(pt.tensor([2], dtype=pt.int32), pt.tensor([0.5]))
    assert str(r.dtype).split(".")[-1] == str(w.dtype).split(".")[-1] and r.item() == w.item()
