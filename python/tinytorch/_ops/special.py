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
from .pointwise import _fit, _inplace_of, _result, _unary, broadcast_error, pow as _pow, trunc, where

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


# ------------------------------------------------------------------ Bessel J, Y, K and Airy Ai (float64)

# Cephes' rational approximations (S. L. Moshier), highest degree first: J0 on [0, 5] through its first two zeros
# (its squares DR1, DR2), Y0 - (2/pi) log(x) J0 on [0, 5], and the Hankel amplitudes P, Q of both beyond 5.
_J0_DR1, _J0_DR2 = 5.78318596294678452118E0, 3.04712623436620863991E1
_J0_RP = (-4.79443220978201773821E9, 1.95617491946556577543E12, -2.49248344360967716204E14,
          9.70862251047306323952E15)
_J0_RQ = (4.99563147152651017219E2, 1.73785401676374683123E5, 4.84409658339962045305E7, 1.11855537045356834862E10,
          2.11277520115489217587E12, 3.10518229857422583814E14, 3.18121955943204943306E16,
          1.71086294081043136091E18)
_J0_PP = (7.96936729297347051624E-4, 8.28352392107440799803E-2, 1.23953371646414299388E0, 5.44725003058768775090E0,
          8.74716500199817011941E0, 5.30324038235394892183E0, 9.99999999999999997821E-1)
_J0_PQ = (9.24408810558863637013E-4, 8.56288474354474431428E-2, 1.25352743901058953537E0, 5.47097740330417105182E0,
          8.76190883237069594232E0, 5.30605288235394617618E0, 1.00000000000000000218E0)
_J0_QP = (-1.13663838898469149931E-2, -1.28252718670509318512E0, -1.95539544257735972385E1,
          -9.32060152123768231369E1, -1.77681167980488050595E2, -1.47077505154951170175E2,
          -5.14105326766599330220E1, -6.05014350600728481186E0)
_J0_QQ = (6.43178256118178023184E1, 8.56430025976980587198E2, 3.88240183605401609683E3, 7.24046774195652478189E3,
          5.93072701187316984827E3, 2.06209331660327847417E3, 2.42005740240291393179E2)
_Y0_YP = (1.55924367855235737965E4, -1.46639295903971606143E7, 5.43526477051876500413E9,
          -9.82136065717911466409E11, 8.75906394395366999549E13, -3.46628303384729719441E15,
          4.42733268572569800351E16, -1.84950800436986690637E16)
_Y0_YQ = (1.04128353664259848412E3, 6.26107330137134956842E5, 2.68919633393814121987E8, 8.64002487103935000337E10,
          2.02979612750105546709E13, 3.17157752842975028269E15, 2.50596256172653059228E17)
# The same for order 1 (Z1, Z2: the squares of J1's first two positive zeros).
_J1_Z1, _J1_Z2 = 1.46819706421238932572E1, 4.92184563216946036703E1
_J1_RP = (-8.99971225705559398224E8, 4.52228297998194034323E11, -7.27494245221818276015E13,
          3.68295732863852883286E15)
_J1_RQ = (6.20836478118054335476E2, 2.56987256757748830383E5, 8.35146791431949253037E7, 2.21511595479792499675E10,
          4.74914122079991414898E12, 7.84369607876235854894E14, 8.95222336184627338078E16,
          5.32278620332680085395E18)
_J1_PP = (7.62125616208173112003E-4, 7.31397056940917570436E-2, 1.12719608129684925192E0, 5.11207951146807644818E0,
          8.42404590141772420927E0, 5.21451598682361504063E0, 1.00000000000000000254E0)
_J1_PQ = (5.71323128072548699714E-4, 6.88455908754495404082E-2, 1.10514232634061696926E0, 5.07386386128601488557E0,
          8.39985554327604159757E0, 5.20982848682361821619E0, 9.99999999999999997461E-1)
_J1_QP = (5.10862594750176621635E-2, 4.98213872951233449420E0, 7.58238284132545283818E1, 3.66779609360150777800E2,
          7.10856304998926107277E2, 5.97489612400613639965E2, 2.11688757100572135698E2, 2.52070205858023719784E1)
_J1_QQ = (7.42373277035675149943E1, 1.05644886038262816351E3, 4.98641058337653607651E3, 9.56231892404756170795E3,
          7.99704160447350683650E3, 2.82619278517639096600E3, 3.36093607810698293419E2)
_Y1_YP = (1.26320474790178026440E9, -6.47355876379160291031E11, 1.14509511541823727583E14,
          -8.12770255501325109621E15, 2.02439475713594898196E17, -7.78877196265950026825E17)
_Y1_YQ = (5.94301592346128195359E2, 2.35564092943068577943E5, 7.34811944459721705660E7, 1.87601316108706159478E10,
          3.88231277496238566008E12, 6.20557727146953693363E14, 6.87141087355300489866E16,
          3.97270608116560655612E18)
# Cephes' Chebyshev series: K0(x) + log(x/2) I0(x) and x (K1(x) - log(x/2) I1(x)) in x^2 - 2 on [0, 2];
# exp(x) sqrt(x) K0(x) and exp(x) sqrt(x) K1(x) in 8/x - 2 on (2, inf).
_K0_A = (1.37446543561352307156E-16, 4.25981614279661018399E-14, 1.03496952576338420167E-11,
         1.90451637722020886025E-9, 2.53479107902614945675E-7, 2.28621210311945178607E-5,
         1.26461541144692592338E-3, 3.59799365153615016266E-2, 3.44289899924628486886E-1,
         -5.35327393233902768720E-1)
_K0_B = (5.30043377268626276149E-18, -1.64758043015242134646E-17, 5.21039150503902756861E-17,
         -1.67823109680541210385E-16, 5.51205597852431940784E-16, -1.84859337734377901440E-15,
         6.34007647740507060557E-15, -2.22751332699166985548E-14, 8.03289077536357521100E-14,
         -2.98009692317273043925E-13, 1.14034058820847496303E-12, -4.51459788337394416547E-12,
         1.85594911495471785253E-11, -7.95748924447710747776E-11, 3.57739728140030116597E-10,
         -1.69753450938905987466E-9, 8.57403401741422608519E-9, -4.66048989768794782956E-8,
         2.76681363944501510342E-7, -1.83175552271911948767E-6, 1.39498137188764993662E-5,
         -1.28495495816278026384E-4, 1.56988388573005337491E-3, -3.14481013119645005427E-2,
         2.44030308206595545468E0)
_K1_A = (-7.02386347938628759343E-18, -2.42744985051936593393E-15, -6.66690169419932900609E-13,
         -1.41148839263352776110E-10, -2.21338763073472585583E-8, -2.43340614156596823496E-6,
         -1.73028895751305206302E-4, -6.97572385963986435018E-3, -1.22611180822657148235E-1,
         -3.53155960776544875667E-1, 1.52530022733894777053E0)
_K1_B = (-5.75674448366501715755E-18, 1.79405087314755922667E-17, -5.68946255844285935196E-17,
         1.83809354436663880070E-16, -6.05704724837331885336E-16, 2.03870316562433424052E-15,
         -7.01983709041831346144E-15, 2.47715442448130437068E-14, -8.97670518232499435011E-14,
         3.34841966607842919884E-13, -1.28917396095102890680E-12, 5.13963967348173025100E-12,
         -2.12996783842756842877E-11, 9.21831518760500529508E-11, -4.19035475934189648750E-10,
         2.01504975519703286596E-9, -1.03457624656780970260E-8, 5.74108412545004946722E-8,
         -3.50196060308781257119E-7, 2.40648494783721712015E-6, -1.93619797416608296024E-5,
         1.95215518471351631108E-4, -2.85781685962277938680E-3, 1.03923736576817238437E-1,
         2.72062619048444266945E0)
# Cephes' Airy Ai: the rational functions of 1/zeta (zeta = 2/3 |x|^(3/2)) for x >= 2.09 (AN/AD) and for x < -2.09
# (the modulus and phase corrections AFN/AFD, AGN/AGD); the Maclaurin series in between.
_AI_AN = (3.46538101525629032477E-1, 1.20075952739645805542E1, 7.62796053615234516538E1, 1.68089224934630576269E2,
          1.59756391350164413639E2, 7.05360906840444183113E1, 1.40264691163389668864E1, 9.99999999999999995305E-1)
_AI_AD = (5.67594532638770212846E-1, 1.47562562584847203173E1, 8.45138970141474626562E1, 1.77318088145400459522E2,
          1.64234692871529701831E2, 7.14778400825575695274E1, 1.40959135607834029598E1, 1.00000000000000000470E0)
_AI_AFN = (-1.31696323418331795333E-1, -6.26456544431912369773E-1, -6.93158036036933542233E-1,
           -2.79779981545119124951E-1, -4.91900132609500318020E-2, -4.06265923594885404393E-3,
           -1.59276496239262096340E-4, -2.77649108155232920844E-6, -1.67787698489114633780E-8)
_AI_AFD = (1.33560420706553243746E1, 3.26825032795224613948E1, 2.67367040941499554804E1, 9.18707402907259625840E0,
           1.47529146771666414581E0, 1.15687173795188044134E-1, 4.40291641615211203805E-3,
           7.54720348287414296618E-5, 4.51850092970580378464E-7)
_AI_AGN = (1.97339932091685679179E-2, 3.91103029615688277255E-1, 1.06579897599595591108E0, 9.39169229816650230044E-1,
           3.51465656105547619242E-1, 6.33888919628925490927E-2, 5.85804113048388458567E-3,
           2.82851600836737019778E-4, 6.98793669997260967291E-6, 8.11789239554389293311E-8,
           3.41551784765923618484E-10)
_AI_AGD = (9.30892908077441974853E0, 1.98352928718312140417E1, 1.55646628932864612953E1, 5.47686069422975497931E0,
           9.54293611618961883998E-1, 8.64580826352392193095E-2, 4.12656523824222607191E-3,
           1.01259085116509135510E-4, 1.17166733214413521882E-6, 4.91834570062930015649E-9)
_AI_C1, _AI_C2 = 0.35502805388781723926, 0.258819403792806798405  # Ai(0), -Ai'(0)
_MACHEP = 2.0 ** -53
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TWO_OVER_PI = 2.0 / math.pi
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _polevl(z, coeffs):
    """A polynomial with its coefficients highest degree first (Cephes' polevl)."""
    return _horner(coeffs[::-1], z)


def _p1evl(z, coeffs):
    """As _polevl with a leading coefficient 1 left out of `coeffs` (Cephes' p1evl)."""
    return _horner(coeffs[::-1] + (1.0,), z)


def _hankel(a, pp, pq, qp, qq, phase: float):
    """sqrt(2/(pi a)) (P cos(a - phase) - (5/a) Q sin(a - phase)) and the same with sin, cos for a > 5: the
    asymptotic forms of J and Y (phase pi/4 for order 0, 3 pi/4 for order 1)."""
    w = 5.0 / a
    z = w * w
    p = _polevl(z, pp) / _polevl(z, pq)
    q = _polevl(z, qp) / _p1evl(z, qq)
    xn = a - phase
    c, s = np.cos(xn), np.sin(xn)
    scale = _SQRT_2_OVER_PI / np.sqrt(a)
    return (p * c - w * q * s) * scale, (p * s + w * q * c) * scale


def _j0_small(a):
    z = a * a
    return np.where(a < 1e-5, 1.0 - z / 4.0, (z - _J0_DR1) * (z - _J0_DR2) * _polevl(z, _J0_RP) / _p1evl(z, _J0_RQ))


def _j1_small(x):
    z = x * x
    return _polevl(z, _J1_RP) / _p1evl(z, _J1_RQ) * x * (z - _J1_Z1) * (z - _J1_Z2)


def _j0_64(x):
    a = np.abs(x)
    return np.where(a <= 5.0, _j0_small(a), _hankel(a, _J0_PP, _J0_PQ, _J0_QP, _J0_QQ, np.pi / 4)[0])


def _j1_64(x):
    a = np.abs(x)
    large = _hankel(a, _J1_PP, _J1_PQ, _J1_QP, _J1_QQ, 3 * np.pi / 4)[0]
    return np.where(a <= 5.0, _j1_small(x), np.where(x < 0, -large, large))  # small: odd through x itself (-0.0)


def _y0_64(x):
    z = x * x
    small = _polevl(z, _Y0_YP) / _p1evl(z, _Y0_YQ) + _TWO_OVER_PI * np.log(x) * _j0_small(x)
    small = np.where(x == 0, -np.inf, np.where(x < 0, np.nan, small))
    return np.where(x <= 5.0, small, _hankel(x, _J0_PP, _J0_PQ, _J0_QP, _J0_QQ, np.pi / 4)[1])


def _y1_64(x):
    z = x * x
    small = x * (_polevl(z, _Y1_YP) / _p1evl(z, _Y1_YQ)) + _TWO_OVER_PI * (_j1_small(x) * np.log(x) - 1.0 / x)
    small = np.where(x == 0, -np.inf, np.where(x < 0, np.nan, small))
    return np.where(x <= 5.0, small, _hankel(x, _J1_PP, _J1_PQ, _J1_QP, _J1_QQ, 3 * np.pi / 4)[1])


def _k64(x, a_coeffs, b_coeffs, order: int, scaled: bool):
    """K0 or K1 (order), exp(x)-scaled or not: inf at 0, nan for x < 0."""
    near = _chbevl(x * x - 2.0, a_coeffs)
    if order == 0:
        small = near - np.log(0.5 * x) * _i0_64(x)
    else:
        small = np.log(0.5 * x) * _i1_64(x) + near / x
    far = _chbevl(8.0 / x - 2.0, b_coeffs)
    if scaled:
        small = small * np.exp(x)
    else:
        far = np.exp(-x) * far
    r = np.where(x <= 2.0, small, far / np.sqrt(x))
    return np.where(x == 0, np.inf, np.where(x < 0, np.nan, r))


def _k0_64(x):
    return _k64(x, _K0_A, _K0_B, 0, False)


def _k0e_64(x):
    return _k64(x, _K0_A, _K0_B, 0, True)


def _k1_64(x):
    return _k64(x, _K1_A, _K1_B, 1, False)


def _k1e_64(x):
    return _k64(x, _K1_A, _K1_B, 1, True)


def _airy_ai64(x):
    """Ai(x): nan at +-inf (as ATen), 0 past x = 103.892, where exp(-zeta) underflows."""
    out = np.where(np.isinf(x) | np.isnan(x), np.nan, 0.0)
    neg = x < -2.09
    xn = x[neg]
    t = np.sqrt(-xn)
    zeta = -2.0 * xn * t / 3.0
    z = 1.0 / zeta
    zz = z * z
    uf = 1.0 + zz * _polevl(zz, _AI_AFN) / _p1evl(zz, _AI_AFD)
    ug = z * _polevl(zz, _AI_AGN) / _p1evl(zz, _AI_AGD)
    theta = zeta + 0.25 * np.pi
    out[neg] = _INV_SQRT_PI / np.sqrt(t) * (np.sin(theta) * uf - np.cos(theta) * ug)
    pos = (x >= 2.09) & (x <= 103.892)
    xp = x[pos]
    t = np.sqrt(xp)
    zeta = 2.0 * xp * t / 3.0
    z = 1.0 / zeta
    out[pos] = _INV_SQRT_PI * (_polevl(z, _AI_AN) / _polevl(z, _AI_AD)) / (2.0 * np.sqrt(t) * np.exp(zeta))
    mid = (x >= -2.09) & (x < 2.09)
    xm = x[mid]
    # Ai = c1 f - c2 g, f and g the series sum z^k / (3k)! times (1 4 7 ...), (2 5 8 ...) products
    z = xm * xm * xm
    f, g = np.ones_like(xm), xm.copy()
    uf, ug = np.ones_like(xm), xm.copy()
    k = 1.0
    while True:
        uf = uf * z / ((k + 1.0) * (k + 2.0))
        ug = ug * z / ((k + 2.0) * (k + 3.0))
        f += uf
        g += ug
        k += 3.0
        if not (np.abs(uf) > _MACHEP * np.abs(f)).any():
            break
    out[mid] = _AI_C1 * f - _AI_C2 * g
    return out


def _spherical_j0_64(x):
    """sin(x) / x: a Maclaurin polynomial below 1/2, 0 at +-inf."""
    z = x * x
    series = 1.0 + z * _horner((-1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800, 1 / 6227020800), z)
    r = np.where(np.abs(x) < 0.5, series, np.sin(x) / x)
    return np.where(np.isinf(x), 0.0, r)


# ------------------------------------------------------------------ Hurwitz zeta, incomplete gamma (float64)

def _hurwitz_zeta64(s, q):
    """zeta(s, q) = sum_k (q + k)^-s elementwise (Cephes' algorithm, as ATen): direct terms until q + k > 9 or they
    stop mattering, then Euler-Maclaurin. inf at s == 1 and at the poles q = 0, -1, ...; nan for s < 1, and for
    q < 0 unless s is an integer."""
    s, q = np.broadcast_arrays(s, q)
    out = np.full(s.shape, np.nan)
    pole = (s == 1) | ~(s < 1) & (q <= 0) & (q == np.floor(q))
    out[pole] = np.inf
    ok = ~pole & ~(s < 1) & ~((q <= 0) & (s != np.floor(s)))
    s, q = s[ok], q[ok]
    total = q ** -s
    a = q.copy()
    b = np.zeros_like(q)
    live = np.ones(q.shape, dtype=bool)  # not yet converged in the direct terms
    i = 0
    while True:
        step = live & ((i < 9) | (a <= 9.0))
        if not step.any():
            break
        i += 1
        a = np.where(step, a + 1.0, a)
        b = np.where(step, a ** -s, b)
        total = np.where(step, total + b, total)
        live &= ~(step & (np.abs(b / total) < _MACHEP))
    # Euler-Maclaurin from w = a on, for the ones the direct terms did not finish
    w = a
    em = total + b * w / (s - 1.0) - 0.5 * b
    fac, k = np.ones_like(q), 0.0
    em_live = live.copy()
    for coeff in _ZETA_A:
        fac = fac * (s + k)
        b = b / w
        term = fac * b / coeff
        em = np.where(em_live, em + term, em)
        em_live &= ~(np.abs(term / em) < _MACHEP)
        k += 1.0
        fac = fac * (s + k)
        b = b / w
        k += 1.0
    out[ok] = np.where(live, em, total)
    return out


def _log1pmx(d):
    """log(1 + d) - d, with relative accuracy for small d (its series below |d| = 1/2)."""
    small = np.abs(d) < 0.5
    ds = np.where(small, d, 0.0)
    series = np.zeros_like(d)
    power = ds * ds
    for k in range(2, 60):
        series += (-1.0) ** (k + 1) * power / k
        power = power * ds
    return np.where(small, series, np.log1p(d) - d)


def _igam_fac(a, x):
    """x^a exp(-x) / Gamma(a). For a >= 10 through Stirling's series, exp(-a (d - log(1 + d))) sqrt(a / 2 pi) /
    exp(stirling(a)) with d = (x - a) / a, which keeps its relative accuracy for large a and x."""
    direct = np.exp(a * np.log(x) - x - _lgamma64(a))
    r = 1.0 / a
    corr = r * _horner(_STIRLING, r * r)
    stirling = np.exp(a * _log1pmx((x - a) / a) - corr) * np.sqrt(a / (2.0 * np.pi))
    return np.where(a >= 10.0, stirling, direct)


def _lgam1p(a):
    """lgamma(1 + a), accurate where it vanishes (a near 0 and 1)."""
    out = _lgamma64(a + 1.0)
    near0 = np.abs(a) <= 0.5
    out[near0] = _horner(_LGAMMA2, a[near0]) - np.log1p(a[near0])
    near1 = np.abs(a - 1.0) < 0.5
    out[near1] = _horner(_LGAMMA2, a[near1] - 1.0)
    return out


def _iterate(step, state: dict, n: int, limit: int = 2000) -> dict:
    """Run step(state, k) -> converged mask on the elements not yet converged, at most `limit` times (Cephes'
    MAXITER); each step sees only the live elements, so a few slow ones cost no work on the rest."""
    live = np.arange(n)
    for k in range(1, limit + 1):
        if live.size == 0:
            break
        sub = {key: v[live] for key, v in state.items()}
        done = step(sub, k)
        for key, v in sub.items():
            state[key][live] = v
        live = live[~done]
    return state


def _igam_series(a, x):
    """P(a, x) by its power series (for x not past a)."""
    fac = _igam_fac(a, x)

    def step(st, k):
        st["r"] += 1.0
        st["term"] *= st["x"] / st["r"]
        st["total"] += st["term"]
        return ~(st["term"] > _MACHEP * st["total"])
    st = _iterate(step, {"x": x.copy(), "r": a.copy(), "term": np.ones_like(a), "total": np.ones_like(a)}, a.size)
    return np.where(fac == 0, 0.0, st["total"] * fac / a)


def _igamc_series(a, x):
    """Q(a, x) for x <= 1.1 and a small: 1 - x^a / Gamma(a + 1) (1 - a sum_n (-x)^n / (n! (a + n)))."""
    def step(st, n):
        st["fac"] *= -st["x"] / n
        term = st["fac"] / (st["a"] + n)
        st["total"] += term
        return ~(np.abs(term) > _MACHEP * np.abs(st["total"]))
    st = _iterate(step, {"a": a.copy(), "x": x.copy(), "fac": np.ones_like(a), "total": np.zeros_like(a)}, a.size)
    logx = np.log(x)
    return -np.expm1(a * logx - _lgam1p(a)) - np.exp(a * logx - _lgamma64(a)) * st["total"]


def _igamc_fraction(a, x):
    """Q(a, x) by Legendre's continued fraction (for x past a), in Cephes' recurrence form."""
    big, big_inv = 4.503599627370496e15, 2.22044604925031308085e-16
    fac = _igam_fac(a, x)
    z = x + 2.0 - a

    def step(st, k):
        st["y"] += 1.0
        st["z"] += 2.0
        yc = st["y"] * k
        pk = st["pkm1"] * st["z"] - st["pkm2"] * yc
        qk = st["qkm1"] * st["z"] - st["qkm2"] * yc
        nz = qk != 0
        r = pk / np.where(nz, qk, 1.0)
        t = np.where(nz, np.abs((st["ans"] - r) / r), 1.0)
        st["ans"] = np.where(nz, r, st["ans"])
        rescale = np.where(np.abs(pk) > big, big_inv, 1.0)
        st["pkm2"], st["pkm1"] = st["pkm1"] * rescale, pk * rescale
        st["qkm2"], st["qkm1"] = st["qkm1"] * rescale, qk * rescale
        return t <= _MACHEP
    st = _iterate(step, {"y": 1.0 - a, "z": z, "pkm2": np.ones_like(a), "qkm2": x.copy(), "pkm1": x + 1.0,
                         "qkm1": z * x, "ans": (x + 1.0) / (z * x)}, a.size)
    return np.where(fac == 0, 0.0, st["ans"] * fac)


# Temme's uniform expansion, Q(a, x) = erfc(eta sqrt(a/2)) / 2 + exp(-a eta^2 / 2) / sqrt(2 pi a) sum_k C_k(eta) a^-k,
# for large a with x near a: the Taylor coefficients in eta of C_0 ... C_3 (DiDonato and Morris' d_kn, as Cephes'
# igam.h tabulates them); for a > 1000 and |eta| < 0.15 the terms left out are below 1e-17.
_TEMME_D = (
    (-3.3333333333333333e-1, 8.3333333333333333e-2, -1.4814814814814815e-2, 1.1574074074074074e-3,
     3.527336860670194e-4, -1.7875514403292181e-4, 3.9192631785224378e-5, -2.1854485106799922e-6,
     -1.85406221071516e-6, 8.296711340953086e-7, -1.7665952736826079e-7),
    (-1.8518518518518519e-3, -3.4722222222222222e-3, 2.6455026455026455e-3, -9.9022633744855967e-4,
     2.0576131687242798e-4, -4.0187757201646091e-7, -1.8098550334489978e-5, 7.6491609160811101e-6,
     -1.6120900894563446e-6, 4.6471278028074343e-9, 1.378633446915721e-7),
    (4.1335978835978836e-3, -2.6813271604938272e-3, 7.7160493827160494e-4, 2.0093878600823045e-6,
     -1.0736653226365161e-4, 5.2923448829120125e-5, -1.2760635188618728e-5, 3.4235787340961381e-8,
     1.3721957309062933e-6, -6.298992138380055e-7, 1.4280614206064242e-7),
    (6.4943415637860082e-4, 2.2947209362139918e-4, -4.6918949439525571e-4, 2.6772063206283885e-4,
     -7.5618016718839764e-5, -2.3965051138672967e-7, 1.1082654115347302e-5, -5.6749528269915966e-6,
     1.4230900732435884e-6, -2.7861080291528142e-11, -1.6958404091930277e-7),
)


def _igam_temme(a, x, upper: bool):
    """P or Q (upper) by Temme's expansion (a > 1000, |x - a| / a < 4.5 / sqrt(a))."""
    sigma = (x - a) / a
    eta = np.copysign(np.sqrt(-2.0 * _log1pmx(sigma)), sigma)
    sgn = 1.0 if upper else -1.0
    total = np.zeros_like(a)
    afac = np.ones_like(a)
    for row in _TEMME_D:
        total += _horner(row, eta) * afac
        afac = afac / a
    return 0.5 * _erfc64(sgn * eta * np.sqrt(a / 2)) + sgn * np.exp(-0.5 * a * eta * eta) * total / np.sqrt(
        2.0 * np.pi * a)


def _igamma_pair(a, x, upper: bool):
    """P(a, x) (upper=False) or Q(a, x), with ATen's values at the edges: nan for a < 0 or x < 0, for a == x == 0
    and for a == x == inf; a == 0 is the limit a -> 0 (P = 1 for x > 0); P = 0 at x == 0, P = 1 at x == inf."""
    a, x = (np.array(v, dtype=np.float64) for v in np.broadcast_arrays(a, x))
    lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)  # P's edge values 0 and 1, as Q's 1 and 0
    out = np.full(a.shape, np.nan)
    bad = (x < 0) | (a < 0)
    zero_a = ~bad & (a == 0)
    out[zero_a & (x > 0)] = hi
    edge = ~bad & ~zero_a
    out[edge & (x == 0)] = lo
    inf_a = edge & (x != 0) & np.isinf(a)
    out[inf_a & ~np.isinf(x)] = lo
    inf_x = edge & (x != 0) & ~np.isinf(a) & np.isinf(x)
    out[inf_x] = hi
    rest = edge & (x != 0) & ~np.isinf(a) & ~np.isinf(x)  # nan a or x included: they come out nan
    ar, xr = a[rest], x[rest]
    res = np.empty_like(ar)
    temme = (ar > 1000.0) & (np.abs(xr - ar) / ar < 4.5 / np.sqrt(ar))
    res[temme] = _igam_temme(ar[temme], xr[temme], upper)
    # Q by the fraction past max(a, 1.1); P by the series below a; Q's own series for small x and a, where
    # 1 - P would lose Q's relative accuracy.
    frac = ~temme & ((xr > 1.1) & (xr >= ar) if upper else (xr > 1.0) & (xr > ar))
    small_q = ~temme & ~frac & (xr <= 1.1) & np.where(xr <= 0.5, -0.4 / np.log(xr) >= ar, xr * 1.1 >= ar) \
        if upper else np.zeros_like(frac)
    series = ~temme & ~frac & ~small_q
    res[frac] = _igamc_fraction(ar[frac], xr[frac])
    res[small_q] = _igamc_series(ar[small_q], xr[small_q])
    res[series] = _igam_series(ar[series], xr[series])
    out[rest] = np.where(series if upper else frac, 1.0 - res, res)
    return out


def _gammainc64(a, x):
    return _igamma_pair(a, x, False)


def _gammaincc64(a, x):
    return _igamma_pair(a, x, True)


# ------------------------------------------------------------------ orthogonal polynomials (float64)

# Each takes x (float64) and n (int64, already broadcast): 0 for n < 0, closed forms at the ends of the interval,
# the trigonometric form inside it for larger n (as ATen, whose values these match), the three-term recurrence
# elsewhere.

def _recurrence(n, p0, p1, step):
    """P_n by P_{k+1} = step(k, P_k, P_{k-1}) from P_0 = p0, P_1 = p1 (arrays), for each element's own n."""
    p, q = p0, p1
    for k in range(1, int(n.max(initial=1))):
        r = step(k, q, p)
        live = k < n
        p, q = np.where(live, q, p), np.where(live, r, q)
    return np.where(n == 0, p0, q)


def _odd(n):
    """Odd degrees, where the polynomials' values at -1 change sign."""
    return n % 2 == 1


def _chebyshev_t64(x, n):
    r = _recurrence(n, np.ones_like(x), x, lambda k, q, p: (x + x) * q - p)
    inside = (np.abs(x) < 1) & (n > 6)
    r = np.where(inside, np.cos(n * np.arccos(x)), r)
    r = np.where(np.abs(x) == 1, np.where((x > 0) | ~_odd(n), 1.0, -1.0), r)
    return np.where(n < 0, 0.0, r)


def _chebyshev_u64(x, n):
    r = _recurrence(n, np.ones_like(x), x + x, lambda k, q, p: (x + x) * q - p)
    theta = np.arccos(x)
    s = np.sin(theta)
    trig = np.where(s != 0, np.sin((n + 1) * theta) / np.where(s != 0, s, 1.0), (n + 1) * np.cos((n + 1) * theta) / x)
    r = np.where((np.abs(x) < 1) & (n > 8), trig, r)
    r = np.where(np.abs(x) == 1, np.where((x > 0) | ~_odd(n), n + 1.0, -(n + 1.0)), r)
    return np.where(n < 0, 0.0, r)


def _chebyshev_v64(x, n):
    r = _recurrence(n, np.ones_like(x), x + x - 1.0, lambda k, q, p: (x + x) * q - p)
    theta = np.arccos(x)
    c = np.cos(theta / 2)
    ends = np.where(_odd(n), -(n + n + 1.0), n + n + 1.0)
    trig = np.where(np.sin(theta / 2) != 1, np.cos((n + 0.5) * theta) / np.where(c != 0, c, 1.0), ends)
    r = np.where((np.abs(x) < 1) & (n > 8), trig, r)
    r = np.where(np.abs(x) == 1, np.where(x > 0, 1.0, ends), r)
    return np.where(n < 0, 0.0, r)


def _chebyshev_w64(x, n):
    r = _recurrence(n, np.ones_like(x), x + x + 1.0, lambda k, q, p: (x + x) * q - p)
    theta = np.arccos(x)
    s = np.sin(theta / 2)
    ends = np.where(x > 0, n + n + 1.0, np.where(_odd(n), -1.0, 1.0))
    trig = np.where(np.cos(theta / 2) != 1, np.sin((n + 0.5) * theta) / np.where(s != 0, s, 1.0), ends)
    r = np.where((np.abs(x) < 1) & (n > 8), trig, r)
    r = np.where(np.abs(x) == 1, ends, r)
    return np.where(n < 0, 0.0, r)


def _shifted(fn):
    """The shifted polynomial on [0, 1]: fn at 2x - 1."""
    return lambda x, n: fn(x + x - 1.0, n)


def _hermite_h64(x, n):
    r = _recurrence(n, np.ones_like(x), x + x, lambda k, q, p: (x + x) * q - (k + k) * p)
    return np.where(n < 0, 0.0, r)


def _hermite_he64(x, n):
    r = _recurrence(n, np.ones_like(x), x.copy(), lambda k, q, p: x * q - k * p)
    return np.where(n < 0, 0.0, r)


def _laguerre_l64(x, n):
    r = _recurrence(n, np.ones_like(x), 1.0 - x, lambda k, q, p: ((k + k + 1.0 - x) * q - k * p) / (k + 1.0))
    r = np.where(x == 0, 1.0, r)
    return np.where(n < 0, 0.0, r)


def _legendre_p64(x, n):
    r = _recurrence(n, np.ones_like(x), x.copy(), lambda k, q, p: ((k + k + 1.0) * x * q - k * p) / (k + 1.0))
    r = np.where(np.abs(x) == 1, np.where((x > 0) | ~_odd(n), 1.0, -1.0), r)
    return np.where(n < 0, 0.0, r)


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
    dt = result_type(a, b)
    if not isinstance(a, Tensor):  # a number: made a tensor of the result dtype, not rounded to the default one
        from .._creation import tensor
        a = tensor(a, dtype=dt, device=b.device)
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


# ------------------------------------------------------------------ Bessel, Airy, zeta, incomplete gamma, polynomials

def _host(fn64, *arrays):
    """fn64 on float64 NumPy arrays, for arrays of any device: CUDA arrays go through the host, so that every
    device gives ATen's CPU values at the edges (cupyx.scipy.special's differ there)."""
    for v in arrays:
        if type(v) is not np.ndarray and hasattr(v, "get"):
            xp = _xp(v)
            return xp.asarray(_host(fn64, *(u.get() if hasattr(u, "get") else u for u in arrays)))
    with np.errstate(all="ignore"):  # overflow to inf (also in rounding to float32) is a result here
        return fn64(*(np.asarray(v, dtype=np.float64) for v in arrays))


def _float_dtype(name: str, dt: _dtype, half: bool = False) -> _dtype:
    """The dtype a kernel of these computes in: integers and bool promote to the default float; half precision
    only where ATen has the kernel (`half`), complex nowhere."""
    if dt.is_complex or (dt.is_floating_point and dt.itemsize == 2 and not half):
        raise _not_implemented(name, dt)
    return dt if dt.is_floating_point else get_default_dtype()


def _no_grad_unary(name: str, fn64, arg: str, doc: str):
    """A torch.special function of one tensor without a derivative: its result does not require grad (as ATen's)."""
    def run(t: Tensor, out: Optional[Tensor]) -> Tensor:
        _require_tensor("special_" + name, arg, 1, t)
        x = t._data
        dt = _float_dtype(name, t.dtype)
        if type(x) is MetaArray:
            return _into(_result(MetaArray(x.shape, dt.np)), out)
        r = _host(lambda v: fn64(np.atleast_1d(v)).reshape(np.shape(v)).astype(dt.np, copy=False), x)
        return _into(_result(r), out)

    if arg == "x":
        def fn(x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
            return run(x, out)
    else:
        def fn(input: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
            return run(input, out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


airy_ai = _no_grad_unary("airy_ai", _airy_ai64, "x", "The Airy function Ai(x), the solution of y'' = x y that "
                         "decays for x -> inf.")
bessel_j0 = _no_grad_unary("bessel_j0", _j0_64, "input", "The Bessel function of the first kind of order 0.")
bessel_j1 = _no_grad_unary("bessel_j1", _j1_64, "input", "The Bessel function of the first kind of order 1.")
bessel_y0 = _no_grad_unary("bessel_y0", _y0_64, "input", "The Bessel function of the second kind of order 0 "
                           "(-inf at 0, nan for x < 0).")
bessel_y1 = _no_grad_unary("bessel_y1", _y1_64, "input", "The Bessel function of the second kind of order 1 "
                           "(-inf at 0, nan for x < 0).")
modified_bessel_i0 = _no_grad_unary("modified_bessel_i0", _i0_64, "input",
                                    "The modified Bessel function of the first kind of order 0 (no derivative, "
                                    "unlike torch.i0).")
modified_bessel_i1 = _no_grad_unary("modified_bessel_i1", _i1_64, "input",
                                    "The modified Bessel function of the first kind of order 1 (no derivative).")
modified_bessel_k0 = _no_grad_unary("modified_bessel_k0", _k0_64, "input",
                                    "The modified Bessel function of the second kind of order 0 (inf at 0, nan "
                                    "for x < 0).")
modified_bessel_k1 = _no_grad_unary("modified_bessel_k1", _k1_64, "input",
                                    "The modified Bessel function of the second kind of order 1 (inf at 0, nan "
                                    "for x < 0).")
scaled_modified_bessel_k0 = _no_grad_unary("scaled_modified_bessel_k0", _k0e_64, "x",
                                           "exp(x) K0(x): modified_bessel_k0 without its underflow.")
scaled_modified_bessel_k1 = _no_grad_unary("scaled_modified_bessel_k1", _k1e_64, "x",
                                           "exp(x) K1(x): modified_bessel_k1 without its underflow.")
spherical_bessel_j0 = _no_grad_unary("spherical_bessel_j0", _spherical_j0_64, "x",
                                     "The spherical Bessel function of the first kind of order 0, sin(x) / x.")


def _invalid_pair(fn: str, first, second, names: tuple) -> TypeError:
    a, b = names
    return TypeError(f"{fn}() received an invalid combination of arguments - got ({type(first).__name__}, "
                     f"{type(second).__name__}), but expected one of:\n * (Tensor {a}, Tensor {b}, *, Tensor out = "
                     f"None)\n * (Number {'self' if a == 'input' else a}, Tensor {b}, *, Tensor out = None)\n"
                     f" * (Tensor {a}, Number {b}, *, Tensor out = None)\n")


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float)) or isinstance(v, np.generic) and v.dtype.kind in "biuf"


def _pair_kernel(name: str, fn: str, first, second, names: tuple, fn64, half: bool = False,
                 integral_ok: bool = True) -> Tensor:
    """fn64(x, y) in float64 on a tensor and a tensor or number, broadcast, in their promoted float dtype."""
    if not (isinstance(first, Tensor) and (isinstance(second, Tensor) or _is_number(second))
            or _is_number(first) and isinstance(second, Tensor)):
        raise _invalid_pair(fn, first, second, names)
    dt = result_type(first, second)
    if not integral_ok and not (dt.is_floating_point or dt.is_complex):
        raise _not_implemented(name, dt)
    dt = _float_dtype(name, dt, half)
    x, y = (v._data if isinstance(v, Tensor) else float(v) for v in (first, second))
    if type(x) is MetaArray or type(y) is MetaArray:
        return _result(MetaArray(np.broadcast_shapes(np.shape(x), np.shape(y)), dt.np))
    try:
        shape = np.broadcast_shapes(np.shape(x), np.shape(y))
    except ValueError as e:
        raise broadcast_error(first, second, e) from None

    def run(u, v):
        u, v = np.broadcast_arrays(np.atleast_1d(u), np.atleast_1d(v))
        return fn64(u, v).reshape(shape).astype(dt.np, copy=False)
    return _result(_host(run, x, y))


def zeta(input, other, *, out: Optional[Tensor] = None) -> Tensor:
    """The Hurwitz zeta function sum_k (other + k)^-input (input or other may be a number). Differentiable in
    `other` only, as in PyTorch."""
    r = _pair_kernel("zeta", "special_zeta", input, other, ("input", "other"), _hurwitz_zeta64)
    if needs_grad(input, other):
        if isinstance(input, Tensor) and input._requires_grad:
            def zeta_backward(g):
                raise NotImplementedError("the derivative for 'zeta' is not implemented.")
            node = "SpecialZetaBackward0" if isinstance(other, Tensor) else "SpecialZetaBackward2"
            inputs = (input, other) if isinstance(other, Tensor) else (input,)
            record(node, zeta_backward, r, inputs)
        else:
            fit = _fitter(other)
            node = "SpecialZetaBackward0" if isinstance(input, Tensor) else "SpecialZetaBackward1"
            inputs = (input, other) if isinstance(input, Tensor) else (other,)

            def grad_other(g):  # d/dq zeta(s, q) = -s zeta(s + 1, q)
                return fit(g * -input * zeta(input + 1.0, other))
            record(node, (lambda g: (None, grad_other(g))) if isinstance(input, Tensor) else grad_other, r, inputs,
                   inputs)
    return _into(r, out)


def _incomplete_gamma(name: str, node: str, fn64, sign: float, doc: str):
    def op(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        _require_tensor("special_" + name, "input", 1, input)
        _require_tensor("special_" + name, "other", 2, other)
        kernel = "igamma" if sign > 0 else "igammac"
        r = _pair_kernel(kernel, "special_" + name, input, other, ("input", "other"), fn64, half=True,
                         integral_ok=False)
        if needs_grad(input, other):
            fit, wants_input = _fitter(other), input._requires_grad

            def backward(g):
                if wants_input:
                    raise NotImplementedError(f"the derivative for '{kernel}: input' is not implemented.")
                # d/dx P(a, x) = x^(a-1) exp(-x) / Gamma(a); Q's is its negative
                density = ((input - 1.0) * other.log() - other - _lgamma(input)).exp()
                return None, fit(g * density * sign)
            record(node, backward, r, (input, other), (input, other))
        return _into(r, out)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


gammainc = _incomplete_gamma("gammainc", "IgammaBackward0", _gammainc64, 1.0,
                             "The regularized lower incomplete gamma function P(input, other) (torch.igamma).")
gammaincc = _incomplete_gamma("gammaincc", "IgammacBackward0", _gammaincc64, -1.0,
                              "The regularized upper incomplete gamma function Q(input, other) = 1 - P "
                              "(torch.igammac).")


def igamma(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """The regularized lower incomplete gamma function (torch.special.gammainc)."""
    return gammainc(input, other, out=out)


def igammac(input: Tensor, other: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """The regularized upper incomplete gamma function (torch.special.gammaincc)."""
    return gammaincc(input, other, out=out)


def _degree(n):
    """A float64 degree array as ATen converts one, truncated toward 0; nan, inf and values past int64 become
    int64's minimum there, so count as negative (the polynomial is 0)."""
    fits = np.abs(n) < 2.0 ** 63  # false for nan too
    return np.where(fits, np.trunc(np.where(fits, n, -1.0)), -1.0).astype(np.int64)


def _polynomial(name: str, fn64, doc: str):
    def fn(x, n, *, out: Optional[Tensor] = None) -> Tensor:
        r = _pair_kernel(name, "special_" + name, x, n, ("x", "n"), lambda u, v: fn64(u, _degree(v)))
        return _into(r, out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", _chebyshev_t64,
                                     "The Chebyshev polynomial of the first kind T_n(x) (n truncated to an integer; "
                                     "0 for n < 0).")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", _chebyshev_u64,
                                     "The Chebyshev polynomial of the second kind U_n(x).")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", _chebyshev_v64,
                                     "The Chebyshev polynomial of the third kind V_n(x).")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", _chebyshev_w64,
                                     "The Chebyshev polynomial of the fourth kind W_n(x).")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t", _shifted(_chebyshev_t64),
                                             "T_n(2x - 1), the Chebyshev polynomial of the first kind on [0, 1].")
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u", _shifted(_chebyshev_u64),
                                             "U_n(2x - 1), the Chebyshev polynomial of the second kind on [0, 1].")
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v", _shifted(_chebyshev_v64),
                                             "V_n(2x - 1), the Chebyshev polynomial of the third kind on [0, 1].")
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w", _shifted(_chebyshev_w64),
                                             "W_n(2x - 1), the Chebyshev polynomial of the fourth kind on [0, 1].")
hermite_polynomial_h = _polynomial("hermite_polynomial_h", _hermite_h64,
                                   "The physicists' Hermite polynomial H_n(x).")
hermite_polynomial_he = _polynomial("hermite_polynomial_he", _hermite_he64,
                                    "The probabilists' Hermite polynomial He_n(x).")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", _laguerre_l64, "The Laguerre polynomial L_n(x).")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", _legendre_p64, "The Legendre polynomial P_n(x).")


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
    isreal=isreal, fix=trunc, fix_=_inplace_of(trunc), igamma=igamma, igamma_=_method_inplace(igamma),
    igammac=igammac, igammac_=_method_inplace(igammac),
    asinh=_asinh, asinh_=_inplace_of(_asinh), arcsinh=_asinh, arcsinh_=_inplace_of(_asinh),
    acosh=_acosh, acosh_=_inplace_of(_acosh), arccosh=_acosh, arccosh_=_inplace_of(_acosh),
    atanh=_atanh, atanh_=_inplace_of(_atanh), arctanh=_atanh, arctanh_=_inplace_of(_atanh),
)

# torch.*: the special.* only names (i0e, i1, ndtr, xlog1py, ...) stay in tinytorch.special.
__all__ = ["erf", "erfc", "erfinv", "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "logit", "xlogy", "sinc",
           "logaddexp", "logaddexp2", "hypot", "copysign", "signbit", "heaviside", "fmax", "fmin", "float_power",
           "gcd", "lcm", "deg2rad", "rad2deg", "nextafter", "isposinf", "isneginf", "isreal", "fix", "asinh",
           "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "is_floating_point", "is_complex", "can_cast", "igamma",
           "igammac"]
