"""The regularized incomplete gamma function P(a, x) in NumPy float64 (power series below a + 1, continued
fraction above), its derivative in a, and the Tensor op Gamma.cdf uses."""
from __future__ import annotations

import math

import numpy as np

from .._device import move
from .._tensor import Tensor, _wrap
from .._ops._common import needs_grad, record, sum_to

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
_EPS = np.finfo(np.float64).eps
_TINY = 1e-300
_MAX_TERMS = 2000


def host(t: Tensor) -> np.ndarray:
    """t as a float64 NumPy array on the CPU, outside the graph."""
    return np.asarray(t.detach().cpu()._data, dtype=np.float64)


def _log_prefactor(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return a * np.log(x) - x - _lgamma(a)


def _series_p(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The regularized lower incomplete gamma P(a, x) by its power series (converges fast for x < a + 1)."""
    term = 1.0 / a
    total = term.copy()
    ap = a.copy()
    for _ in range(_MAX_TERMS):
        ap = ap + 1
        term = term * x / ap
        total = total + term
        if np.all(np.abs(term) <= np.abs(total) * _EPS):
            break
    return total * np.exp(_log_prefactor(a, x))


def _continued_fraction_q(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The regularized upper incomplete gamma Q(a, x) by its continued fraction (Lentz; for x >= a + 1)."""
    b = x + 1 - a
    c = np.full_like(x, 1 / _TINY)
    d = 1 / b
    h = d.copy()
    for i in range(1, _MAX_TERMS):
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = np.where(np.abs(d) < _TINY, _TINY, d)
        c = b + an / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d = 1 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1) <= _EPS):
            break
    return np.exp(_log_prefactor(a, x)) * h


def gammainc_array(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P(a, x) = (1 / Gamma(a)) * integral_0^x t^(a-1) e^-t dt, elementwise (float64 arrays)."""
    a, x = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(x, dtype=np.float64))
    out = np.zeros(a.shape)
    series = (x < a + 1) & (x > 0)
    upper = (x >= a + 1) & np.isfinite(x)
    if series.any():
        out[series] = _series_p(a[series], x[series])
    if upper.any():
        out[upper] = 1 - _continued_fraction_q(a[upper], x[upper])
    out[np.isinf(x) & (x > 0)] = 1.0
    out[np.isnan(a) | np.isnan(x)] = np.nan
    return out


def _d_gammainc_da(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dP(a, x)/da by a central difference, each point evaluated by the method that is accurate there."""
    h = 1e-5 * a
    out = np.zeros(a.shape)
    series = (x < a + 1) & (x > 0)
    upper = (x >= a + 1) & np.isfinite(x)
    if series.any():
        s_a, s_x, s_h = a[series], x[series], h[series]
        out[series] = (_series_p(s_a + s_h, s_x) - _series_p(s_a - s_h, s_x)) / (2 * s_h)
    if upper.any():
        u_a, u_x, u_h = a[upper], x[upper], h[upper]
        out[upper] = -(_continued_fraction_q(u_a + u_h, u_x) - _continued_fraction_q(u_a - u_h, u_x)) / (2 * u_h)
    return out


def standard_gamma_grad(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """dx/da of a Gamma(a, 1) sample x at fixed CDF value (implicit reparameterization, Figurnov et al. 2018):
    -(dP/da) / pdf(x)."""
    with np.errstate(all="ignore"):
        log_pdf = (a - 1) * np.log(x) - x - _lgamma(a)
        grad = -_d_gammainc_da(a, x) / np.exp(log_pdf)
    return np.where(np.isfinite(grad), grad, 0.0)


def gammainc(a: Tensor, x: Tensor) -> Tensor:
    """P(a, x) elementwise with broadcasting (torch.special.gammainc), differentiable in x (the Gamma density)
    and in a (numerically)."""
    av, xv = np.broadcast_arrays(host(a), host(x))
    dtype = np.result_type(a._data.dtype, x._data.dtype)
    out = _wrap(move(gammainc_array(av, xv).astype(dtype), x.device))
    if needs_grad(a, x):
        ra, rx = a._requires_grad, x._requires_grad

        def gammainc_backward(g):
            ga = gx = None
            if ra:
                ga = sum_to(g * _wrap(move(_d_gammainc_da(av, xv).astype(dtype), x.device)), tuple(a.shape))
            if rx:
                with np.errstate(all="ignore"):
                    pdf = np.exp((av - 1) * np.log(xv) - xv - _lgamma(av))
                gx = sum_to(g * _wrap(move(np.where(xv > 0, pdf, 0.0).astype(dtype), x.device)), tuple(x.shape))
            return ga, gx
        record("IgammaBackward0", gammainc_backward, out, (a, x))
    return out
