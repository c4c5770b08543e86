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


def standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) samples of concentration's shape; differentiable in concentration."""
    alpha = host(concentration)
    x = _rng().standard_gamma(alpha)
    x = np.maximum(x, np.finfo(concentration._data.dtype).tiny)  # a zero sample would have no log density
    out = _wrap(move(x.astype(concentration._data.dtype), concentration.device))
    if needs_grad(concentration):
        def standard_gamma_backward(g):
            return g * _wrap(move(standard_gamma_grad(x, alpha).astype(concentration._data.dtype),
                                  concentration.device))
        record("StandardGammaBackward0", standard_gamma_backward, out, (concentration,))
    return out


def poisson(rate: Tensor) -> Tensor:
    """Poisson(rate) counts, in rate's dtype (torch.poisson)."""
    return _wrap(move(_rng().poisson(host(rate)).astype(rate._data.dtype), rate.device))


def binomial(total_count: Tensor, probs: Tensor) -> Tensor:
    """Binomial(total_count, probs) counts, in probs' dtype (torch.binomial)."""
    n = host(total_count).astype(np.int64)
    return _wrap(move(_rng().binomial(n, np.clip(host(probs), 0.0, 1.0)).astype(probs._data.dtype),
                      probs.device))


def categorical(probs: Tensor, sample_shape: tuple) -> Tensor:
    """Category indices (int64) of shape sample_shape + probs.shape[:-1], drawn in proportion to probs' last dim
    by inverting the cumulative sum."""
    p = host(probs)
    cdf = np.cumsum(p, axis=-1)
    u = _rng().random(tuple(sample_shape) + p.shape[:-1]) * cdf[..., -1]
    idx = (cdf <= u[..., None]).sum(-1)
    return _wrap(move(np.minimum(idx, p.shape[-1] - 1).astype(np.int64), probs.device))
