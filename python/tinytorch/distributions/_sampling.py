"""Samplers the distributions need beyond rand/randn: Gamma (with its implicit reparameterization gradient),
Poisson and Binomial, and a vectorized categorical draw. All draw from tinytorch's CPU generator (so
tinytorch.manual_seed makes them reproducible) and move the result to the parameters' device."""
from __future__ import annotations

import numpy as np

from .._creation import _generator_for
from .._device import CPU, move
from .._tensor import Tensor, _wrap
from .._ops._common import needs_grad, record
from ._special import host, standard_gamma_grad


def _rng():
    return _generator_for(CPU, None)


def _as(x, like: Tensor) -> Tensor:
    # NumPy returns a scalar (not a 0-d array) for a 0-d parameter; the tensor needs an array
    return _wrap(move(np.asarray(x).astype(like._data.dtype), like.device))


def standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) samples of concentration's shape; differentiable in concentration."""
    alpha = host(concentration)
    x = _rng().standard_gamma(alpha)
    x = np.maximum(np.asarray(x), np.finfo(concentration._data.dtype).tiny)  # a zero sample would have no log density
    out = _as(x, concentration)
    if needs_grad(concentration):
        def standard_gamma_backward(g):
            return g * _as(standard_gamma_grad(x, alpha), concentration)
        record("StandardGammaBackward0", standard_gamma_backward, out, (concentration,))
    return out


def poisson(rate: Tensor) -> Tensor:
    """Poisson(rate) counts, in rate's dtype (torch.poisson)."""
    return _as(_rng().poisson(host(rate)), rate)


def binomial(total_count: Tensor, probs: Tensor) -> Tensor:
    """Binomial(total_count, probs) counts, in probs' dtype (torch.binomial)."""
    n = host(total_count).astype(np.int64)
    return _as(_rng().binomial(n, np.clip(host(probs), 0.0, 1.0)), probs)


def categorical(probs: Tensor, sample_shape: tuple) -> Tensor:
    """Category indices (int64) of shape sample_shape + probs.shape[:-1], drawn in proportion to probs' last dim
    by inverting the cumulative sum."""
    p = host(probs)
    cdf = np.cumsum(p, axis=-1)
    u = _rng().random(tuple(sample_shape) + p.shape[:-1]) * cdf[..., -1]
    idx = (cdf <= u[..., None]).sum(-1)
    return _wrap(move(np.asarray(np.minimum(idx, p.shape[-1] - 1), dtype=np.int64), probs.device))


def von_mises(loc: Tensor, concentration: Tensor, shape: tuple) -> Tensor:
    """VonMises(loc, concentration) angles in [-pi, pi) of the given shape, by Best and Fisher's (1979) wrapped
    Cauchy rejection sampler, run in float64 for every point at once until all are accepted."""
    kappa = np.broadcast_to(host(concentration), shape)
    mu = np.broadcast_to(host(loc), shape)
    rng = _rng()
    tau = 1 + np.sqrt(1 + 4 * kappa ** 2)
    rho = (tau - np.sqrt(2 * tau)) / (2 * kappa)
    # small kappa: the proposal constant by its series, the closed form cancels catastrophically
    r = np.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho ** 2) / (2 * rho))
    x = np.empty(shape)
    pending = np.ones(shape, dtype=bool)
    while pending.any():
        n = int(pending.sum())
        u1, u2, u3 = rng.random(n), rng.random(n), rng.random(n)
        rp, kp = r[pending], kappa[pending]
        z = np.cos(np.pi * u1)
        f = (1 + rp * z) / (rp + z)
        c = kp * (rp - f)
        accept = (c * (2 - c) > u2) | (np.log(c / u2) + 1 - c >= 0)
        theta = np.sign(u3 - 0.5) * np.arccos(f)
        idx = np.flatnonzero(pending)[accept]
        x.flat[idx] = theta[accept]
        pending.flat[idx] = False
    x = np.mod(x + mu + np.pi, 2 * np.pi) - np.pi
    return _as(x, loc)
