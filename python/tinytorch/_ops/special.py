"""Special functions (erf, gamma family, Bessel I, logit, xlogy, ...) with their derivatives, as torch.* and Tensor
methods, and the small elementwise ops PyTorch keeps beside them (hypot, copysign, gcd, nextafter, ...).

NumPy has none of the special functions and SciPy is not a dependency: each float64 kernel is a series, an
asymptotic expansion or a rational approximation (W. J. Cody's for erfc; Cephes' Chebyshev series for the Bessel
functions and its Euler-Maclaurin sum for the Hurwitz zeta, as ATen uses them), accurate to about 1e-15 relative
away from the functions' zeros. Other float dtypes are computed in float64 and rounded; CUDA arrays go to
cupyx.scipy.special. Every backward is written with tensor ops, so it is differentiable again (create_graph).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .._dtype import bool_, complex128, dtype as _dtype, float64, get_default_dtype, int64, result_type
from .._meta import MetaArray
from .._tensor import Tensor
from ._common import _short, attach, float_data, needs_grad, operands, record, alias, saved_output
from .nn import _ERF_C, _ERF_D, _ERF_P, _ERF_Q, _xp, erf as _erf, erf_array
from .pointwise import _fit, _inplace_of, _lhs, _result, _unary, broadcast_error, pow as _pow, trunc, where

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT1_2 = math.sqrt(0.5)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_EULER_GAMMA = 0.57721566490153286061


# ------------------------------------------------------------------ how a kernel runs

def _not_implemented(name: str, dt) -> NotImplementedError:
    """PyTorch's error for a dtype an op's kernel lacks (dt: a tinytorch or NumPy dtype)."""
    return NotImplementedError(f"\"{name}_cpu\" not implemented for '{_short(dt)}'")


def _run_real(name: str, fn64, cuda, x, *args):
    """fn64(*args, x) for a real float array of any dtype (computed in float64 and rounded back). CUDA arrays go to
    cupyx.scipy.special's function named `cuda`; meta arrays only keep their shape and dtype."""
    if type(x) is MetaArray:
        return x.copy()
    if x.dtype.kind == "c":
        raise _not_implemented(name, x.dtype)
    if type(x) is not np.ndarray:
        from cupyx.scipy import special as cupy_special
        return getattr(cupy_special, cuda)(*args, x)
    with np.errstate(all="ignore"):  # overflow to inf and nan at poles are results here, not accidents
        r = fn64(*args, np.atleast_1d(x).astype(np.float64, copy=False)).reshape(x.shape)
        return r.astype(x.dtype, copy=False)


def _real_kernel(name: str, fn64, cuda=None):
    """A kernel for pointwise._unary made of a float64 NumPy function (see _run_real)."""
    return lambda x: _run_real(name, fn64, cuda or name, x)


def _into(result: Tensor, out: Optional[Tensor]) -> Tensor:
    """PyTorch's out= argument: the result copied into `out` (and `out` returned)."""
    return result if out is None else out.copy_(result)


def _public(op, name: str, doc: str):
    """op as a torch.* function: PyTorch's parameter name (input) and its out= argument."""
    def fn(input: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        return _into(op(input), out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _require_tensor(fn: str, arg: str, position: int, value) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not {type(value).__name__}")


def _horner(coeffs, z):
    """coeffs[0] + coeffs[1] z + coeffs[2] z^2 + ..."""
    r = np.full_like(z, coeffs[-1])
    for c in coeffs[-2::-1]:
        r = r * z + c
    return r


def _sinpi(x):
    """sin(pi x), exact at the integers and accurate for large |x| (x is reduced before the multiplication)."""
    r = x - 2.0 * np.round(x * 0.5)  # in [-1, 1], without rounding error
    a = np.abs(r)
    return np.copysign(np.sin(np.pi * np.where(a > 0.5, 1.0 - a, a)), r)


# ------------------------------------------------------------------ erfc, erfcx, erfinv, ndtri (float64)

def _erfcx_tail(y):
    """exp(y^2) erfc(y) for y > 0.46875: Cody's rational functions (the ones nn.erf_array uses)."""
    num, den = _ERF_C[8] * y, y
    for i in range(7):
        num = (num + _ERF_C[i]) * y
        den = (den + _ERF_D[i]) * y
    mid = (num + _ERF_C[7]) / (den + _ERF_D[7])
    z = 1 / (y * y)
    num, den = _ERF_P[5] * z, z
    for i in range(4):
        num = (num + _ERF_P[i]) * z
        den = (den + _ERF_Q[i]) * z
    big = (1 / math.sqrt(math.pi) - z * (num + _ERF_P[4]) / (den + _ERF_Q[4])) / y
    return np.where(y <= 4.0, mid, big)


def _exp_sq(y, sign: float):
    """exp(sign * y^2) with y^2 split in two, so that its rounding costs no accuracy (y <= 28)."""
    t = np.trunc(y * 16) / 16
    return np.exp(sign * t * t) * np.exp(sign * (y - t) * (y + t))


def _erfc64(x):
    out = np.empty_like(x)
    tail = np.abs(x) > 0.46875
    near = ~tail  # also nan
    out[near] = 1.0 - erf_array(x[near])
    xt = x[tail]
    y = np.minimum(np.abs(xt), 28.0)  # erfc(28) underflows to 0
    e = _exp_sq(y, -1.0) * _erfcx_tail(y)
    out[tail] = np.where(xt > 0, e, 2.0 - e)
    return out


def _erfcx64(x):
    out = np.empty_like(x)
    near = ~(np.abs(x) > 0.46875)
    xs = x[near]
    out[near] = np.exp(xs * xs) * (1.0 - erf_array(xs))
    pos = x > 0.46875
    out[pos] = _erfcx_tail(x[pos])
    neg = x < -0.46875
    y = -x[neg]
    out[neg] = 2.0 * _exp_sq(np.minimum(y, 27.0), 1.0) - _erfcx_tail(y)  # exp(27^2) is already inf
    return out


# Initial approximations of ATen's calc_erfinv (G. L. Pavlis), refined here by Halley's method.
_ERFINV_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_ERFINV_B = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
_ERFINV_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_ERFINV_D = (3.543889200, 1.637067800)


def _halley(x, u):
    # For f = erf - y or erfc - w, f'' = -2x f': Halley's step is x - u / (1 + x u) with u = f / f'.
    return x - u / (1.0 + x * u)


def _erfinv_central(y):
    """x with erf(x) = y, for |y| <= 0.6."""
    z = y * y
    x = y * _horner(_ERFINV_A, z) / (_horner(_ERFINV_B, z) * z + 1.0)
    for _ in range(2):
        x = _halley(x, (erf_array(x) - y) / (_TWO_OVER_SQRT_PI * np.exp(-x * x)))
    return x


def _erfcinv_tail(w):
    """x > 0.59 with erfc(x) = w, for 0 < w <= 0.4. Solving erfc(x) = w rather than erf(x) = 1 - w keeps the
    relative accuracy of a tiny w."""
    z = np.sqrt(-np.log(w / 2))
    x = _horner(_ERFINV_C, z) / (_horner(_ERFINV_D, z) * z + 1.0)
    for _ in range(4):  # the start is 1e-3 off for w ~ 1e-300: 1e-4, 5e-7, 2e-14, then converged
        y = np.minimum(x, 28.0)
        e = _exp_sq(y, -1.0)
        # u = (erfc(x) - w) / erfc'(x), with erfc(x) = e * erfcx(x)
        u = np.where(e > 0, (w / np.where(e > 0, e, 1.0) - _erfcx_tail(y)) / _TWO_OVER_SQRT_PI, 0.0)
        x = _halley(x, u)
    return x


def _erfinv64(y):
    a = np.abs(y)
    out = np.where(a == 1.0, np.copysign(np.inf, y), np.nan)
    central = a <= 0.6
    out[central] = _erfinv_central(y[central])
    tail = (a > 0.6) & (a < 1.0)
    out[tail] = np.copysign(_erfcinv_tail(1.0 - a[tail]), y[tail])  # 1 - |y| is exact here
    return out


def _ndtri64(p):
    out = np.where(p == 0.0, -np.inf, np.where(p == 1.0, np.inf, np.nan))
    central = (p >= 0.2) & (p <= 0.8)
    out[central] = math.sqrt(2.0) * _erfinv_central(2.0 * p[central] - 1.0)
    low = (p > 0.0) & (p < 0.2)
    out[low] = -math.sqrt(2.0) * _erfcinv_tail(2.0 * p[low])
    high = (p > 0.8) & (p < 1.0)
    out[high] = math.sqrt(2.0) * _erfcinv_tail(2.0 * (1.0 - p[high]))  # 1 - p is exact here
    return out


def _log_ndtr64(x):
    # ATen's calc_log_ndtr: through erfcx below -1, where ndtr itself would underflow.
    t = x * _SQRT1_2
    low = x < -1.0
    tl = -t[low]
    out = np.log1p(-0.5 * _erfc64(t))
    out[low] = np.log(0.5 * _erfcx64(tl)) - tl * tl
    return out


# ------------------------------------------------------------------ gamma family (float64)

# ATen's zeta (Cephes): (2j)! / B_2j, the Euler-Maclaurin coefficients.
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def _zeta64(s: float, q):
    """Hurwitz zeta(s, q) = sum_k (q + k)^-s for s > 1: direct terms until q + k > 9, then Euler-Maclaurin.
    Poles (q a non-positive integer) give inf, as in ATen; q < 0 needs an integer s."""
    out = np.where((q <= 0) & (q == np.floor(q)), np.inf, np.where(q == np.inf, 0.0, np.nan))
    ok = np.isfinite(q) & (out != np.inf)
    if s != math.floor(s):
        ok &= q > 0
    q = q[ok]
    n = np.maximum(9.0, np.floor(9.0 - q) + 1.0)  # direct terms: at least 9, and until q + n > 9
    total = q ** -s
    for k in range(1, int(n.max(initial=0)) + 1):
        total += np.where(k <= n, (q + k) ** -s, 0.0)
    w = q + n
    b = w ** -s
    total += b * w / (s - 1.0) - 0.5 * b
    fac, k = 1.0, 0.0
    for a in _ZETA_A:
        fac *= s + k
        b = b / w
        total += fac * b / a
        fac *= s + k + 1.0
        b = b / w
        k += 2.0
    out[ok] = total
    return out


# lgamma(2 + z) = (1 - gamma) z + sum_{k >= 2} (-1)^k (zeta(k) - 1) z^k / k, for |z| <= 1/2 (to 1e-17 by k = 30).
_LGAMMA2 = (0.0, 1.0 - _EULER_GAMMA) + tuple(
    (-1.0) ** k * float(_zeta64(float(k), np.array([2.0]))[0]) / k for k in range(2, 31))
# Stirling's series: B_2k / (2k (2k - 1)) for the powers 1/x, 1/x^3, ...
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)


def _lgamma_positive(x):
    """lgamma for finite x > 0: Stirling's series from 10 on; below, the recurrence to [1.5, 2.5), where the
    series around 2 keeps the zeros at 1 and 2 exact."""
    out = np.empty_like(x)
    big = x >= 10.0
    xb = x[big]
    r = 1.0 / xb
    out[big] = (xb - 0.5) * np.log(xb) - xb + _HALF_LOG_2PI + r * _horner(_STIRLING, r * r)
    xs = x[~big]
    n = np.floor(xs - 1.5)  # shifts: -2 ... 8
    z = xs - (n + 2.0)  # exact (Sterbenz), unlike (xs - n) - 2
    up = np.ones_like(xs)
    for k in range(1, 9):
        up *= np.where(n >= k, xs - k, 1.0)
    down = np.where(n <= -1, xs, 1.0) * np.where(n <= -2, xs + 1.0, 1.0)
    out[~big] = _horner(_LGAMMA2, z) + np.log(up) - np.log(down)
    return out


def _lgamma64(x):
    out = np.where(np.isnan(x), np.nan, np.inf)  # inf: the poles (0, negative integers) and +-inf
    pos = (x > 0) & (x < np.inf)
    out[pos] = _lgamma_positive(x[pos])
    neg = (x < 0) & (x != np.floor(x))
    xn = x[neg]
    out[neg] = np.log(np.pi / np.abs(_sinpi(xn))) - _lgamma_positive(1.0 - xn)  # reflection
    return out


# Cephes' asymptotic digamma coefficients, as ATen's calc_digamma.
_DIGAMMA_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
              -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
              8.33333333333333333333E-2)
_PSI_10 = 2.25175258906672110764


# Near its positive zero x0 = _PSI_ROOT + _PSI_ROOT_LO, digamma(x) = d sum_k (-1)^(k+1) zeta(k + 1, x0) d^(k-1) with
# d = x - x0 (Taylor's series, to 1e-17 for |d| <= 0.25): relative accuracy there, which the recurrence loses.
_PSI_ROOT, _PSI_ROOT_LO = 1.4616321449683622, 9.549995429965697e-17
_PSI_TAYLOR = tuple((-1.0) ** (k + 1) * float(_zeta64(k + 1.0, np.array([_PSI_ROOT]))[0]) for k in range(1, 26))


def _digamma_positive(x):
    near = np.abs(x - _PSI_ROOT) <= 0.25
    if near.any():
        out = np.empty_like(x)
        d = (x[near] - _PSI_ROOT) - _PSI_ROOT_LO
        out[near] = d * _horner(_PSI_TAYLOR, d)
        out[~near] = _digamma_recurrence(x[~near])
        return out
    return _digamma_recurrence(x)


def _digamma_recurrence(x):
    """ATen's calc_digamma for x > 0: the recurrence up to x >= 10, then the asymptotic series."""
    result = np.zeros_like(x)
    for _ in range(10):  # push x to >= 10
        small = x < 10.0
        result -= np.where(small, 1.0 / x, 0.0)
        x = np.where(small, x + 1.0, x)
    z = 1.0 / (x * x)
    tail = np.where(x < 1e17, z * _horner(_DIGAMMA_A[::-1], z), 0.0)
    return np.where(x == 10.0, result + _PSI_10, result + np.log(x) - 0.5 / x - tail)


def _digamma64(x):
    out = np.where(x == 0, np.copysign(np.inf, -x), np.nan)  # nan at the negative integers, -inf and nan
    pos = x > 0
    out[pos] = _digamma_positive(x[pos])
    neg = (x < 0) & (x != np.trunc(x))
    xn = x[neg]
    out[neg] = _digamma_positive(1.0 - xn) - np.pi / np.tan(np.pi * np.modf(xn)[0])  # reflection
    return out


def _polygamma64(n: int, x):
    if n == 0:
        return _digamma64(x)
    return (-1.0) ** (n + 1) * math.factorial(n) * _zeta64(n + 1.0, x)


# ------------------------------------------------------------------ modified Bessel functions (float64)

# Cephes' Chebyshev coefficients (as in ATen's Math.h): exp(-x) I0(x) on [0, 8], exp(-x) sqrt(x) I0(x) on (8, inf),
# and the same for I1 (divided by x on [0, 8]).
_I0E_A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
          1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
          -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
          9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
          -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
          1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
          -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
          1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
          -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
          1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0E_B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
          3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
          1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
          -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
          7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
          -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
          3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
          2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
          8.04490411014108831608E-1)
_I1E_A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
          -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
          3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
          -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
          9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
          -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
          4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
          -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
          2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
          -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1E_B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
          -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
          -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
          4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
          -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
          3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
          -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
          -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
          7.78576235018280120474E-1)


def _chbevl(x, coeffs):
    """Clenshaw's sum of a Chebyshev series (Cephes' chbevl)."""
    b0, b1, b2 = np.full_like(x, coeffs[0]), np.zeros_like(x), np.zeros_like(x)
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _bessel64(x, a_coeffs, b_coeffs, scaled: bool, odd: bool):
    """I0 or I1 (odd), exp(-|x|)-scaled or not, in ATen's order of operations (so that I0(inf) is nan as there)."""
    a = np.abs(x)
    small = _chbevl(a / 2 - 2, a_coeffs) * (a if odd else 1.0)
    large = _chbevl(32 / a - 2, b_coeffs)
    if not scaled:
        e = np.exp(a)
        small, large = e * small, e * large
    r = np.where(a <= 8.0, small, large / np.sqrt(a))
    return np.where(x < 0, -r, r) if odd else r


def _i0_64(x):
    return _bessel64(x, _I0E_A, _I0E_B, False, False)


def _i0e_64(x):
    return _bessel64(x, _I0E_A, _I0E_B, True, False)


def _i1_64(x):
    return _bessel64(x, _I1E_A, _I1E_B, False, True)


def _i1e_64(x):
    return _bessel64(x, _I1E_A, _I1E_B, True, True)


# ------------------------------------------------------------------ the rest (float64)

def _sinc64(x):
    return np.where(x == 0, 1.0, _sinpi(x) / (np.pi * x))


def _sinc_kernel(x):
    if type(x) is MetaArray:
        return x.copy()
    if x.dtype.kind == "c" or type(x) is not np.ndarray:  # complex: sin(pi z) / (pi z) as NumPy/CuPy write it
        return _xp(x).sinc(x)
    return _run_real("sinc", _sinc64, "sinc", x)


def _entr64(x):
    return np.where(x > 0, -x * np.log(x), np.where(x == 0, 0.0, np.where(np.isnan(x), np.nan, -np.inf)))


def _degrees(name: str, factor: float):
    def kernel(x):
        if x.dtype.kind == "c":
            raise RuntimeError(f"{name} is not supported for complex tensors.")
        return x * factor
    return kernel


# ------------------------------------------------------------------ unary ops (Tensor methods; torch.* below)

_erfc = _unary("erfc", _real_kernel("erfc", _erfc64), lambda g, x, y: g * (-(x * x)).exp() * -_TWO_OVER_SQRT_PI)
_erfinv = _unary("erfinv", _real_kernel("erfinv", _erfinv64),
                 lambda g, x, y: g * (y * y).exp() * (math.sqrt(math.pi) / 2), uses="y")
_digamma = _unary("digamma", _real_kernel("digamma", _digamma64), lambda g, x, y: g * polygamma(1, x))
_lgamma = _unary("lgamma", _real_kernel("lgamma", _lgamma64, "gammaln"), lambda g, x, y: g * _digamma(x))


def _nonzero(x: Tensor) -> Tensor:
    """x with its zeros replaced by 1: the divisor of a formula whose value at 0 is taken from elsewhere, so that
    no inf or nan enters the graph that double backward differentiates."""
    return where(x == 0, 1.0, x)


def _sinc_grad(g: Tensor, x: Tensor) -> Tensor:
    px = _nonzero(x) * math.pi
    return g * where(x == 0, 0.0, (px.cos() * px - px.sin()) / (px * _nonzero(x)))


_i1 = _unary("special_i1", _real_kernel("i1", _i1_64),
             lambda g, x, y: g * where(x == 0, 0.5, _i0(x) - y / _nonzero(x)), uses="xy")
_i0 = _unary("i0", _real_kernel("i0", _i0_64), lambda g, x, y: g * _i1(x))
_i1e = _unary("special_i1e", _real_kernel("i1e", _i1e_64),
              lambda g, x, y: g * where(x == 0, 0.5, _i0e(x) - y * (x.sign() + _nonzero(x).reciprocal())), uses="xy")
_i0e = _unary("special_i0e", _real_kernel("i0e", _i0e_64), lambda g, x, y: g * (_i1e(x) - x.sign() * y), uses="xy")
_sinc = _unary("sinc", _sinc_kernel, lambda g, x, y: _sinc_grad(g, x))
_erfcx = _unary("special_erfcx", _real_kernel("erfcx", _erfcx64),
                lambda g, x, y: g * (x * y * 2.0 - _TWO_OVER_SQRT_PI), uses="xy")
_ndtri = _unary("special_ndtri", _real_kernel("ndtri", _ndtri64),
                lambda g, x, y: g * (y * y * 0.5).exp() * _SQRT_2PI, uses="y")
_log_ndtr = _unary("special_log_ndtr", _real_kernel("log_ndtr", _log_ndtr64),
                   lambda g, x, y: g * (-(y + x * x * 0.5)).exp() / _SQRT_2PI, uses="xy")
_entr = _unary("special_entr", _real_kernel("entr", _entr64), lambda g, x, y: g * -(x.log() + 1.0))
_asinh = _unary("asinh", np.arcsinh, lambda g, x, y: g * (x * x + 1.0).rsqrt())
_acosh = _unary("acosh", np.arccosh, lambda g, x, y: g * (x * x - 1.0).rsqrt())
_atanh = _unary("atanh", np.arctanh, lambda g, x, y: g / (1.0 - x * x))
_deg2rad = _unary("deg2rad", _degrees("deg2rad", math.pi / 180.0), lambda g, x, y: g * (math.pi / 180.0))
_rad2deg = _unary("rad2deg", _degrees("rad2deg", 180.0 / math.pi), lambda g, x, y: g * (180.0 / math.pi))


def _ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF, 0.5 erfc(-x / sqrt(2)): erfc keeps the left tail's relative accuracy."""
    return _erfc(input * -_SQRT1_2) * 0.5


erf = _public(_erf, "erf", "The error function, 2/sqrt(pi) times the integral of exp(-t^2) from 0 to x.")
erfc = _public(_erfc, "erfc", "1 - erf(x), without the cancellation for large x.")
erfinv = _public(_erfinv, "erfinv", "The inverse of erf on (-1, 1) (+-inf at +-1).")
lgamma = _public(_lgamma, "lgamma", "log |Gamma(x)| (inf at the poles 0, -1, -2, ...).")
digamma = _public(_digamma, "digamma", "The logarithmic derivative of Gamma (torch.special.psi).")
i0 = _public(_i0, "i0", "The modified Bessel function of the first kind of order 0.")
i0e = _public(_i0e, "i0e", "exp(-|x|) i0(x): i0 without its overflow.")
i1 = _public(_i1, "i1", "The modified Bessel function of the first kind of order 1.")
i1e = _public(_i1e, "i1e", "exp(-|x|) i1(x): i1 without its overflow.")
sinc = _public(_sinc, "sinc", "The normalized sinc, sin(pi x) / (pi x), 1 at 0.")
erfcx = _public(_erfcx, "erfcx", "The scaled complementary error function exp(x^2) erfc(x).")
ndtr = _public(_ndtr, "ndtr", "The standard normal CDF.")
ndtri = _public(_ndtri, "ndtri", "The inverse of the standard normal CDF (the normal quantile function).")
log_ndtr = _public(_log_ndtr, "log_ndtr", "log of the standard normal CDF, finite far into the left tail.")
entr = _public(_entr, "entr", "The entropy term -x log(x) (0 at 0, -inf for x < 0).")
asinh = arcsinh = _public(_asinh, "asinh", "The inverse hyperbolic sine.")
acosh = arccosh = _public(_acosh, "acosh", "The inverse hyperbolic cosine (nan below 1).")
atanh = arctanh = _public(_atanh, "atanh", "The inverse hyperbolic tangent (+-inf at +-1).")
deg2rad = _public(_deg2rad, "deg2rad", "Degrees to radians.")
rad2deg = _public(_rad2deg, "rad2deg", "Radians to degrees.")
fix = _public(trunc, "fix", "Round toward zero (torch.trunc).")


def polygamma(n: int, input: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x) for n >= 1."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    r = _result(_run_real("polygamma", _polygamma64, "polygamma", float_data(input), n))
    if needs_grad(input):
        record("PolygammaBackward0", lambda g: g * polygamma(n + 1, input), r, (input,), (input,))
    return _into(r, out)


def mvlgamma(input: Tensor, p: int, *, out: Optional[Tensor] = None) -> Tensor:
    """The multivariate log-gamma of dimension p: sum_i lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = float_data(input)
    halves = _xp(x).arange(p, dtype=np.float64) * 0.5
    lg = _run_real("mvlgamma", _lgamma64, "gammaln", x.astype(np.float64)[..., None] - halves)
    r = _result((lg.sum(axis=-1) + p * (p - 1) / 4 * math.log(math.pi)).astype(x.dtype, copy=False))
    if needs_grad(input):
        def mvlgamma_backward(g):
            from .._creation import tensor
            shifts = tensor([i * 0.5 for i in range(p)], dtype=input.dtype, device=input.device)
            return g * _digamma(input.unsqueeze(-1) - shifts).sum(-1)
        record("MvlgammaBackward0", mvlgamma_backward, r, (input,), (input,))
    return _into(r, out)


def logit(input: Tensor, eps: Optional[float] = None, *, out: Optional[Tensor] = None) -> Tensor:
    """log(z / (1 - z)), with z = x clamped to [eps, 1 - eps] when eps is given (a negative eps clamps nothing)."""
    x = float_data(input)
    xp = _xp(x)
    wide = x.astype(np.float32) if x.dtype.itemsize == 2 else x
    clamp = eps is not None and eps >= 0
    # eps first, then 1 - eps: with eps > 0.5 the bounds cross, and PyTorch's kernel tests them in this order
    z = xp.where(wide < eps, eps, xp.where(wide > 1.0 - eps, 1.0 - eps, wide)).astype(wide.dtype) if clamp else wide
    with np.errstate(all="ignore"):
        r = _result(xp.log(z / (1 - z)).astype(x.dtype, copy=False))
    if needs_grad(input):
        lo, hi = (eps, 1.0 - eps) if clamp else (0.0, 1.0)

        def logit_backward(g):
            inside = (input >= lo) & (input <= hi)  # outside: 0 when clamped, else nan (no logit there)
            return where(inside, g / (input * (1 - input)), 0.0 if clamp else math.nan)
        record("LogitBackward0", logit_backward, r, (input,), (input,))
    return _into(r, out)


# ------------------------------------------------------------------ binary ops

def _binary(name: str, a, b, kernel, to_float: bool = True):
    """kernel(xp, x, y) on the operands as arrays of their promoted dtype (integers become the default float when
    `to_float`; 2-byte floats compute in float32). Returns (a as a tensor, the result)."""
    a = _lhs(a, b)
    dt = result_type(a, b)
    if dt.is_complex:
        raise _not_implemented(name, dt)
    if to_float and not dt.is_floating_point:
        dt = get_default_dtype()
    x, y = operands(a, b)
    xp = _xp(x)
    work = np.dtype(np.float32) if dt.is_floating_point and dt.itemsize == 2 else dt.np
    try:
        with np.errstate(all="ignore"):
            r = kernel(xp, xp.asarray(x, dtype=work), xp.asarray(y, dtype=work))
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    return a, _result(r.astype(dt.np, copy=False))


def _fitter(t: Tensor):
    shape, dt = t._data.shape, t._data.dtype
    return lambda g: _fit(g, shape, dt)


def _record_binary(name: str, out: Tensor, a: Tensor, b, grad_a, grad_b, saved: tuple) -> None:
    """Record a node of a and b (b may be a number: then a is the only input). grad_a(g) and grad_b(g) run only for
    an operand that requires grad; their results are summed back over broadcasting."""
    fa = _fitter(a)
    if not isinstance(b, Tensor):
        record(name, lambda g: fa(grad_a(g)), out, (a,), saved)
        return
    fb, ra, rb = _fitter(b), a._requires_grad, b._requires_grad
    record(name, lambda g: (fa(grad_a(g)) if ra else None, fb(grad_b(g)) if rb else None), out, (a, b), saved)


def _xlog(name: str, node: str, log, pole: float):
    """xlogy (log, pole 0) or xlog1py (log1p, pole -1): x log(y), 0 where x == 0 unless y is nan."""
    def kernel(xp, x, y):
        return xp.where((x == 0) & ~xp.isnan(y), 0, x * log(y))

    def op(input, other, *, out: Optional[Tensor] = None) -> Tensor:
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"({type(input).__name__}, {type(other).__name__})")
        a, r = _binary(name, input, other, kernel)
        if needs_grad(a, other):
            def grad_a(g):  # 0 where x == 0 and y is at or past the pole, not 0 * -inf
                return op(g, other).masked_fill((a == 0) & (other <= pole), 0.0)

            def grad_b(g):
                return g * a / (other - pole)
            if isinstance(input, Tensor):
                _record_binary(node + ("0" if isinstance(other, Tensor) else "2"), r, a, other, grad_a, grad_b,
                               (a, other) if isinstance(other, Tensor) else (a,))
            else:  # a number: other is the only input
                fb = _fitter(other)
                record(node + "1", lambda g: fb(grad_b(g)), r, (other,), (other,))
        return _into(r, out)
    op.__name__ = op.__qualname__ = name
    return op


xlogy = _xlog("xlogy", "XlogyBackward", np.log, 0.0)
xlog1py = _xlog("xlog1py", "SpecialXlog1PyBackward", np.log1p, -1.0)
xlogy.__doc__ = "x log(y), 0 where x == 0 (unless y is nan): entropy terms stay finite at 0."
xlog1py.__doc__ = "x log1p(y), 0 where x == 0 (unless y is nan)."


def _two_tensors(name: str, input, other, floating: bool, other_name: str = "other") -> None:
    """PyTorch's argument errors for ops that take two tensors (floating: integer operands are not implemented)."""
    _require_tensor(name, "input", 1, input)
    _require_tensor(name, other_name, 2, other)
    dt = result_type(input, other)
    if floating and not (dt.is_floating_point or dt.is_complex):
        raise _not_implemented(name, dt)


def _logaddexp_kernel(xp, x, y):
    m = xp.maximum(x, y)
    r = m + xp.log1p(xp.exp(-xp.abs(x - y)))
    return xp.where(xp.isinf(m) & (x == y), x, r)  # inf and inf (or -inf and -inf): not inf - inf = nan


def _logaddexp2_kernel(xp, x, y):
    m = xp.maximum(x, y)
    r = m + xp.log1p(xp.exp2(-xp.abs(x - y))) / math.log(2.0)
    return xp.where(xp.isinf(m) & (x == y), x, r)


def logaddexp(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """log(exp(x) + exp(y)) without overflow."""
    _two_tensors("logaddexp", input, other, True)
    a, r = _binary("logaddexp", input, other, _logaddexp_kernel)
    if needs_grad(a, other):
        _record_binary("LogaddexpBackward0", r, a, other, lambda g: g / ((other - a).exp() + 1),
                       lambda g: g / ((a - other).exp() + 1), (a, other))
    return _into(r, out)


def logaddexp2(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """log2(2^x + 2^y) without overflow."""
    _two_tensors("logaddexp2", input, other, True)
    a, r = _binary("logaddexp2", input, other, _logaddexp2_kernel)
    if needs_grad(a, other):
        _record_binary("Logaddexp2Backward0", r, a, other, lambda g: g / ((other - a).exp2() + 1),
                       lambda g: g / ((a - other).exp2() + 1), (a, other))
    return _into(r, out)


def hypot(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """sqrt(x^2 + y^2) without overflow."""
    _two_tensors("hypot", input, other, True)
    a, r = _binary("hypot", input, other, lambda xp, x, y: xp.hypot(x, y))
    if needs_grad(a, other):
        r_alias = alias(r)

        def result():
            return saved_output(r_alias, lambda: hypot(a, other))
        _record_binary("HypotBackward0", r, a, other, lambda g: g * a / result(), lambda g: g * other / result(),
                       (a, other, r_alias))
    return _into(r, out)


def copysign(input: Tensor, other, *, out: Optional[Tensor] = None) -> Tensor:
    """|x| with the sign of y (a tensor or a number); the gradient reaches x only."""
    _require_tensor("copysign", "input", 1, input)
    a, r = _binary("copysign", input, other, lambda xp, x, y: xp.copysign(x, y))
    if needs_grad(a, other):
        r_alias = alias(r)

        def grad_a(g):
            res = saved_output(r_alias, lambda: copysign(a, other))
            return g * (res / _nonzero(a)).masked_fill(a == 0, 0.0)
        tensor_other = isinstance(other, Tensor)
        _record_binary("CopysignBackward0" if tensor_other else "CopysignBackward1", r, a, other, grad_a,
                       lambda g: g * 0, (a, r_alias))
    return _into(r, out)


def nextafter(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """The next representable float after x toward y."""
    _two_tensors("nextafter", input, other, True)
    a, r = _binary("nextafter", input, other, lambda xp, x, y: xp.nextafter(x, y))
    if needs_grad(a, other):  # PyTorch's gradients: g for x, 0 for y
        _record_binary("NextafterBackward0", r, a, other, lambda g: g, lambda g: g * 0, ())
    return _into(r, out)


def _fextremum(name: str, node: str, kernel, a_wins):
    def op(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        _two_tensors(name, input, other, False)
        if result_type(input, other).is_complex:
            raise RuntimeError(f"{name} not implemented for complex tensors.")
        a, r = _binary(name, input, other, kernel, to_float=False)
        if needs_grad(a, other):
            def picks_a():  # no tie splitting, unlike maximum: the whole gradient goes to x
                return a_wins(a, other) | other.isnan()
            _record_binary(node, r, a, other, lambda g: g.masked_fill(picks_a().logical_not(), 0.0),
                           lambda g: g.masked_fill(picks_a(), 0.0), (a, other))
        return _into(r, out)
    op.__name__ = op.__qualname__ = name
    return op


fmax = _fextremum("fmax", "FmaxBackward0", lambda xp, x, y: xp.fmax(x, y), lambda a, b: a >= b)
fmin = _fextremum("fmin", "FminBackward0", lambda xp, x, y: xp.fmin(x, y), lambda a, b: a <= b)
fmax.__doc__ = "Elementwise max that ignores nan (nan only where both are nan)."
fmin.__doc__ = "Elementwise min that ignores nan (nan only where both are nan)."


def heaviside(input: Tensor, values: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """The step function: 0 for x < 0, 1 for x > 0, `values` where x == 0 (no derivative, as in PyTorch)."""
    _two_tensors("heaviside", input, values, False, "values")
    if input.dtype.is_complex or values.dtype.is_complex:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    a, r = _binary("heaviside", input, values, lambda xp, x, y: xp.where(x == 0, y, x > 0), to_float=False)
    if needs_grad(a, values):
        def heaviside_backward(g):
            raise RuntimeError("derivative for aten::heaviside is not implemented")
        record("NotImplemented", heaviside_backward, r, (a, values))
    return _into(r, out)


def _integer_binary(name: str, kernel, doc: str):
    def op(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        _two_tensors(name, input, other, False)
        dt = result_type(input, other)
        if dt is bool_ or dt.is_floating_point or dt.is_complex:
            raise _not_implemented(name, dt)
        return _into(_binary(name, input, other, kernel, to_float=False)[1], out)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


gcd = _integer_binary("gcd", lambda xp, x, y: xp.gcd(x, y), "Elementwise greatest common divisor (>= 0).")
lcm = _integer_binary("lcm", lambda xp, x, y: xp.lcm(x, y), "Elementwise least common multiple (>= 0).")


def _float_power_dtype(input, exponent) -> _dtype:
    cplx = any(t.dtype.is_complex if isinstance(t, Tensor) else isinstance(t, complex) for t in (input, exponent))
    return complex128 if cplx else float64


def float_power(input, exponent, *, out: Optional[Tensor] = None) -> Tensor:
    """input ** exponent in double precision (float64, or complex128 when either is complex)."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power() received an invalid combination of arguments - got "
                        f"({type(input).__name__}, {type(exponent).__name__})")
    dt = _float_power_dtype(input, exponent)
    scalar = complex if dt is complex128 else float
    base = input.to(dt) if isinstance(input, Tensor) else scalar(input)
    power = exponent.to(dt) if isinstance(exponent, Tensor) else scalar(exponent)
    return _into(_pow(base, power), out)


def _float_power_(self: Tensor, exponent) -> Tensor:
    dt = _float_power_dtype(self, exponent)
    if self.dtype is not dt:
        raise RuntimeError(f"the base given to float_power_ has dtype {_short(self.dtype)} but the operation's "
                           f"result requires dtype {_short(dt)}")
    return _inplace_of(float_power)(self, exponent)


# ------------------------------------------------------------------ predicates (no gradient)

def signbit(input: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """Where the sign bit is set (-0.0 and -nan included); for integers, where negative."""
    x = input._data
    if x.dtype.kind == "c":
        raise NotImplementedError("signbit is not implemented for complex tensors.")
    xp = _xp(x)
    if x.dtype.kind in "biu":
        r = x < 0 if x.dtype.kind == "i" else xp.zeros(x.shape, dtype=bool)
    else:
        r = xp.signbit(x.astype(np.float32) if x.dtype.itemsize == 2 else x)
    return _into(_result(r), out)


def _signed_inf(name: str, sign: float):
    def op(input: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        x = input._data
        if x.dtype.kind == "c":
            raise RuntimeError(f"{name} does not support complex inputs.")
        r = _xp(x).zeros(x.shape, dtype=bool) if x.dtype.kind in "biu" else x == sign * np.inf
        return _into(_result(r), out)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Where input is {'+' if sign > 0 else '-'}inf."
    return op


isposinf = _signed_inf("isposinf", 1.0)
isneginf = _signed_inf("isneginf", -1.0)


def isreal(input: Tensor) -> Tensor:
    """Where input is real: every element of a real tensor, the complex ones with a zero imaginary part."""
    _require_tensor("isreal", "input", 1, input)
    x = input._data
    return _result(x.imag == 0 if x.dtype.kind == "c" else _xp(x).ones(x.shape, dtype=bool))


def is_floating_point(input: Tensor) -> bool:
    """Whether input's dtype is a floating-point type."""
    _require_tensor("is_floating_point", "input", 1, input)
    return input.dtype.is_floating_point


def is_complex(input: Tensor) -> bool:
    """Whether input's dtype is a complex type."""
    _require_tensor("is_complex", "input", 1, input)
    return input.dtype.is_complex


_PYTHON_DTYPES = {float: float64, int: int64, bool: bool_, complex: complex128}


def as_dtype(value, fn: str, arg: str, position: int) -> _dtype:
    """A dtype argument as PyTorch parses one: a dtype, or one of the Python types float, int, bool, complex."""
    if isinstance(value, _dtype):
        return value
    if isinstance(value, type) and value in _PYTHON_DTYPES:
        return _PYTHON_DTYPES[value]
    raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be torch.dtype, not "
                    f"{type(value).__name__}")


def can_cast(from_: _dtype, to: _dtype) -> bool:
    """Whether PyTorch's casting rules allow from_ -> to: not complex to real, floating to integral, nor any type
    but bool to bool."""
    src = as_dtype(from_, "can_cast", "from_", 1)
    dst = as_dtype(to, "can_cast", "to", 2)
    if src.is_complex and not dst.is_complex:
        return False
    if src.is_floating_point and not (dst.is_floating_point or dst.is_complex):
        return False
    return src is bool_ or dst is not bool_


# ------------------------------------------------------------------ Tensor methods

def _method_inplace(fn):
    """An in-place Tensor method x.name_(*args) of fn(x, *args)."""
    return lambda self, *args, **kwargs: _inplace_of(fn)(self, *args, **kwargs)


attach(
    erf_=_inplace_of(_erf), erfc=_erfc, erfc_=_inplace_of(_erfc), erfinv=_erfinv, erfinv_=_inplace_of(_erfinv),
    lgamma=_lgamma, lgamma_=_inplace_of(_lgamma), digamma=_digamma, digamma_=_inplace_of(_digamma),
    polygamma=lambda self, n: polygamma(n, self),
    polygamma_=lambda self, n: _inplace_of(lambda s: polygamma(n, s))(self),
    mvlgamma=lambda self, p: mvlgamma(self, p), mvlgamma_=_method_inplace(mvlgamma),
    i0=_i0, i0_=_inplace_of(_i0), sinc=_sinc, sinc_=_inplace_of(_sinc),
    logit=lambda self, eps=None: logit(self, eps), logit_=_method_inplace(logit),
    xlogy=xlogy, xlogy_=_method_inplace(xlogy), logaddexp=logaddexp, logaddexp2=logaddexp2, hypot=hypot,
    hypot_=_method_inplace(hypot), copysign=copysign, copysign_=_method_inplace(copysign), signbit=signbit,
    heaviside=heaviside, heaviside_=_method_inplace(heaviside), fmax=fmax, fmin=fmin, float_power=float_power,
    float_power_=_float_power_, gcd=gcd, gcd_=_method_inplace(gcd), lcm=lcm, lcm_=_method_inplace(lcm),
    deg2rad=_deg2rad, deg2rad_=_inplace_of(_deg2rad), rad2deg=_rad2deg, rad2deg_=_inplace_of(_rad2deg),
    nextafter=nextafter, nextafter_=_method_inplace(nextafter), isposinf=isposinf, isneginf=isneginf,
    isreal=isreal, fix=trunc, fix_=_inplace_of(trunc),
    asinh=_asinh, asinh_=_inplace_of(_asinh), arcsinh=_asinh, arcsinh_=_inplace_of(_asinh),
    acosh=_acosh, acosh_=_inplace_of(_acosh), arccosh=_acosh, arccosh_=_inplace_of(_acosh),
    atanh=_atanh, atanh_=_inplace_of(_atanh), arctanh=_atanh, arctanh_=_inplace_of(_atanh),
)

# torch.*: the special.* only names (i0e, i1, ndtr, xlog1py, ...) stay in tinytorch.special.
__all__ = ["erf", "erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "logit", "xlogy", "sinc",
           "logaddexp", "logaddexp2", "hypot", "copysign", "signbit", "heaviside", "fmax", "fmin", "float_power",
           "gcd", "lcm", "deg2rad", "rad2deg", "nextafter", "isposinf", "isneginf", "isreal", "fix", "asinh",
           "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "is_floating_point", "is_complex", "can_cast"]
