"""torch.distributions.GeneralizedPareto."""
from __future__ import annotations

import math
from numbers import Number

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution: exceedances over loc with the given scale and tail concentration
    (exponential for concentration 0, bounded above by loc - scale / concentration when it is negative)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        scalar = isinstance(loc, Number) and isinstance(scale, Number) and isinstance(concentration, Number)
        super().__init__(Size() if scalar else self.loc.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "GeneralizedPareto":
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(GeneralizedPareto, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _safe_concentration(self, concentration: Tensor) -> tuple:
        # concentration 0 is the exponential limit: evaluate the general form at 1 and select the limit instead
        eq_zero = tinytorch.isclose(concentration, tinytorch.zeros_like(concentration))
        return eq_zero, tinytorch.where(eq_zero, tinytorch.ones_like(concentration), concentration)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        u = tinytorch.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration(self.concentration)
        y = 1 / safe_conc + tinytorch.ones_like(z)
        where_nonzero = tinytorch.where(y == 0, y, y * tinytorch.log1p(safe_conc * z))
        return -self.scale.log() - tinytorch.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value) -> Tensor:
        """log(1 - cdf(value))."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._safe_concentration(self.concentration)
        where_nonzero = -tinytorch.log1p(safe_conc * z) / safe_conc
        return tinytorch.where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value) -> Tensor:
        """log(cdf(value)), accurate where the cdf is near 0."""
        return tinytorch.log1p(-tinytorch.exp(self.log_survival_function(value)))

    def cdf(self, value) -> Tensor:
        return tinytorch.exp(self.log_cdf(value))

    def icdf(self, value) -> Tensor:
        loc, scale, concentration = broadcast_all(self.loc, self.scale, self.concentration)
        eq_zero, safe_conc = self._safe_concentration(concentration)
        logu = tinytorch.log1p(-value)
        where_nonzero = loc + scale / safe_conc * tinytorch.expm1(-safe_conc * logu)
        return tinytorch.where(eq_zero, loc - scale * logu, where_nonzero)

    def _z(self, x: Tensor) -> Tensor:
        return (x - self.loc) / self.scale

    @property
    def mean(self) -> Tensor:
        # undefined (nan) for concentration >= 1
        valid = self.concentration < 1
        safe_conc = tinytorch.where(valid, self.concentration, 0.5)
        return tinytorch.where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self) -> Tensor:
        # undefined (nan) for concentration >= 1/2
        valid = self.concentration < 0.5
        safe_conc = tinytorch.where(valid, self.concentration, 0.25)
        return tinytorch.where(valid, self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc)), math.nan)

    def entropy(self) -> Tensor:
        return (tinytorch.log(self.scale) + self.concentration + 1).broadcast_to(tuple(self._batch_shape))

    @property
    def mode(self) -> Tensor:
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = tinytorch.where(self.concentration < 0, lower - self.scale / self.concentration, math.inf)
        return constraints.interval(lower, upper)
