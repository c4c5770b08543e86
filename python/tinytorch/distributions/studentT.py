"""torch.distributions.StudentT."""
from __future__ import annotations

import math

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .utils import _standard_normal, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t distribution with df degrees of freedom, shifted by loc and scaled by scale."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "StudentT":
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = Size(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        # undefined (nan) for df <= 1
        return tinytorch.where(self.df > 1, self.loc.clone(), float("nan"))

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        # infinite for 1 < df <= 2, undefined for df <= 1
        m = self.scale.pow(2) * self.df / (self.df - 2)
        m = tinytorch.where(self.df <= 2, math.inf, m)
        return tinytorch.where(self.df <= 1, float("nan"), m)

    def rsample(self, sample_shape=Size()) -> Tensor:
        # X / sqrt(Z / df) for X standard normal and Z chi-squared with df degrees of freedom
        shape = self._extended_shape(sample_shape)
        X = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        Z = self._chi2.rsample(sample_shape)
        Y = X * tinytorch.rsqrt(Z / self.df)
        return self.loc + self.scale * Y

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + tinytorch.lgamma(0.5 * self.df)
             - tinytorch.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * tinytorch.log1p(y ** 2.0 / self.df) - Z

    def entropy(self) -> Tensor:
        lbeta = tinytorch.lgamma(0.5 * self.df) + math.lgamma(0.5) - tinytorch.lgamma(0.5 * (self.df + 1))
        return (self.scale.log() + 0.5 * (self.df + 1) * (tinytorch.digamma(0.5 * (self.df + 1))
                                                           - tinytorch.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)
