"""torch.special: the special functions under PyTorch's special.* names (the same ops as torch.* where both exist)."""
from __future__ import annotations

from typing import Optional

from ._ops import nn as _nn, pointwise as _pw, reduction as _red
from ._ops._common import _short
from ._ops.special import (_public, airy_ai, bessel_j0, bessel_j1, bessel_y0, bessel_y1, chebyshev_polynomial_t,
                           chebyshev_polynomial_u, chebyshev_polynomial_v, chebyshev_polynomial_w, digamma, entr, erf,
                           erfc, erfcx, erfinv, gammainc, gammaincc, hermite_polynomial_h, hermite_polynomial_he, i0,
                           i0e, i1, i1e, laguerre_polynomial_l, legendre_polynomial_p, lgamma, log_ndtr, logit,
                           modified_bessel_i0, modified_bessel_i1, modified_bessel_k0, modified_bessel_k1, mvlgamma,
                           ndtr, ndtri, polygamma, scaled_modified_bessel_k0, scaled_modified_bessel_k1,
                           shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u,
                           shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w, sinc, spherical_bessel_j0,
                           xlog1py, xlogy, zeta)
from ._tensor import Tensor

__all__ = ["erf", "erfc", "erfcx", "erfinv", "expit", "logit", "xlogy", "xlog1py", "gammaln", "digamma", "psi",
           "polygamma", "multigammaln", "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "sinc", "entr",
           "expm1", "exp2", "log1p", "round", "softmax", "log_softmax", "logsumexp", "zeta", "gammainc", "gammaincc",
           "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "spherical_bessel_j0", "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
           "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]

gammaln = lgamma
psi = digamma
expit = _public(_pw.sigmoid, "expit", "The logistic sigmoid 1 / (1 + exp(-x)).")
expm1 = _public(_pw.expm1, "expm1", "exp(x) - 1, accurate near 0.")
exp2 = _public(_pw.exp2, "exp2", "2^x.")
log1p = _public(_pw.log1p, "log1p", "log(1 + x), accurate near 0.")


def multigammaln(input: Tensor, p: int, *, out: Optional[Tensor] = None) -> Tensor:
    """The multivariate log-gamma function of dimension p (torch.mvlgamma)."""
    return mvlgamma(input, p, out=out)


def round(input: Tensor, *, decimals: int = 0, out: Optional[Tensor] = None) -> Tensor:  # noqa: A001
    """Round half to even, to `decimals` decimal places (floating-point input only, as PyTorch's kernels)."""
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        kernel = "round_vml_cpu" if decimals == 0 else "round_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_short(input.dtype)}'")
    r = _pw.round(input, decimals)
    return r if out is None else out.copy_(r)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """softmax along dim (computed in `dtype` when given)."""
    return _nn.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """log_softmax along dim (computed in `dtype` when given)."""
    return _nn.log_softmax(input, dim, dtype=dtype)


def logsumexp(input: Tensor, dim, keepdim: bool = False, *, out: Optional[Tensor] = None) -> Tensor:
    """log(sum(exp(input))) over dim, without overflow."""
    r = _red.logsumexp(input, dim, keepdim)
    return r if out is None else out.copy_(r)
