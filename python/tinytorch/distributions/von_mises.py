"""torch.distributions.VonMises."""
from __future__ import annotations

import math

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from ._sampling import von_mises
from .distribution import Distribution
from .utils import broadcast_all, lazy_property

__all__ = ["VonMises"]


def _log_modified_bessel_i(x: Tensor, order: int) -> Tensor:
    """log I_order(x) for x >= 0, through the exponentially scaled Bessel functions (finite for large x)."""
    scaled = tinytorch.special.i0e(x) if order == 0 else tinytorch.special.i1e(x)
    return scaled.log() + x


class VonMises(Distribution):
    """The von Mises (circular normal) distribution on angles, with mean direction loc and concentration."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        batch_shape = self.loc.shape
        super().__init__(batch_shape, Size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "VonMises":
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        super(VonMises, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * tinytorch.cos(value - self.loc)
        return log_prob - math.log(2 * math.pi) - _log_modified_bessel_i(self.concentration, 0)

    def sample(self, sample_shape=Size()) -> Tensor:
        """Angles in [-pi, pi) (drawn outside the graph: the sampler has no reparameterization)."""
        shape = tuple(self._extended_shape(sample_shape))
        with tinytorch.no_grad():
            return von_mises(self.loc, self.concentration, shape)

    @property
    def mean(self) -> Tensor:
        """The circular mean (mean direction)."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        """The circular variance 1 - I1(k) / I0(k)."""
        return 1 - (_log_modified_bessel_i(self.concentration, 1)
                    - _log_modified_bessel_i(self.concentration, 0)).exp()
