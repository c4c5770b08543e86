"""torch.distributions.Dirichlet."""
from __future__ import annotations

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from ._sampling import standard_gamma
from .distribution import ExponentialFamily
from .utils import finfo

__all__ = ["Dirichlet"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution over the simplex, with concentration along the last dim. Samples are
    normalized Gamma(concentration, 1) draws, differentiable in the concentration."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "Dirichlet":
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape) + tuple(self.event_shape))
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        gammas = standard_gamma(self.concentration.expand(shape))
        x = gammas / gammas.sum(-1, keepdim=True)
        limits = finfo(x.dtype)
        return x.clamp(min=float(limits.tiny), max=1 - float(limits.eps))

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return (tinytorch.xlogy(self.concentration - 1.0, value).sum(-1) + tinytorch.lgamma(self.concentration.sum(-1))
                - tinytorch.lgamma(self.concentration).sum(-1))

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self) -> Tensor:
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # every concentration below 1: the density is unbounded at every vertex; PyTorch reports the first one
        # (the argmax of the all-zero clamped concentrations)
        mask = (self.concentration < 1).all(-1, keepdim=True)
        vertex = tinytorch.nn.functional.one_hot(concentrationm1.argmax(-1), self.concentration.shape[-1])
        return tinytorch.where(mask, vertex.to(mode.dtype), mode)

    @property
    def variance(self) -> Tensor:
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self) -> Tensor:
        k = self.concentration.size(-1)
        a0 = self.concentration.sum(-1)
        return (tinytorch.lgamma(self.concentration).sum(-1) - tinytorch.lgamma(a0)
                - (k - a0) * tinytorch.digamma(a0)
                - ((self.concentration - 1.0) * tinytorch.digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self) -> tuple:
        return (self.concentration,)

    def _log_normalizer(self, x):
        return tinytorch.lgamma(x).sum(-1) - tinytorch.lgamma(x.sum(-1))
