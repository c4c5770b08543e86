"""torch.distributions.Gamma."""
from __future__ import annotations

from numbers import Number

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from ._sampling import standard_gamma
from ._special import gammainc
from .distribution import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Gamma"]


class Gamma(ExponentialFamily):
    """The Gamma distribution with shape `concentration` and `rate` (mean concentration / rate). rsample is
    differentiable in both parameters (implicit reparameterization for the concentration)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch_shape = Size() if isinstance(concentration, Number) and isinstance(rate, Number) \
            else self.concentration.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "Gamma":
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        return standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)

    def log_prob(self, value) -> Tensor:
        value = tinytorch.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (tinytorch.xlogy(self.concentration, self.rate) + tinytorch.xlogy(self.concentration - 1, value)
                - self.rate * value - tinytorch.lgamma(self.concentration))

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return gammainc(self.concentration, self.rate * value)

    def entropy(self) -> Tensor:
        return (self.concentration - tinytorch.log(self.rate) + tinytorch.lgamma(self.concentration)
                + (1.0 - self.concentration) * tinytorch.digamma(self.concentration))

    @property
    def _natural_params(self) -> tuple:
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return tinytorch.lgamma(x + 1) + (x + 1) * tinytorch.log(-y.reciprocal())
