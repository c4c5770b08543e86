"""torch.distributions.Kumaraswamy."""
from __future__ import annotations

import tinytorch
from .._tensor import Tensor
from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all, euler_constant

__all__ = ["Kumaraswamy"]


def _moments(a: Tensor, b: Tensor, n: int) -> Tensor:
    """E[X^n] = b * B(1 + n / a, b)."""
    arg1 = 1 + n / a
    log_value = tinytorch.lgamma(arg1) + tinytorch.lgamma(b) - tinytorch.lgamma(arg1 + b)
    return b * tinytorch.exp(log_value)


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on (0, 1): (1 - (1 - U) ** (1 / concentration0)) ** (1 / concentration1)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(tinytorch.full_like(self.concentration0, 0),
                            tinytorch.full_like(self.concentration0, 1), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "Kumaraswamy":
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        # defined for concentrations >= 1 (not both equal to 1); nan elsewhere
        log_mode = ((self.concentration1 - 1).log() - (self.concentration1 * self.concentration0 - 1).log()) \
            / self.concentration1
        log_mode = tinytorch.where((self.concentration0 < 1) | (self.concentration1 < 1), float("nan"), log_mode)
        return log_mode.exp()

    @property
    def variance(self) -> Tensor:
        return (_moments(self.concentration1, self.concentration0, 2)
                - _moments(self.concentration1, self.concentration0, 1).pow(2))

    def entropy(self) -> Tensor:
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        h0 = tinytorch.digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * h0 - tinytorch.log(self.concentration1) - tinytorch.log(self.concentration0)
