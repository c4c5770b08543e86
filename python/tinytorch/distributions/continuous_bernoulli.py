"""torch.distributions.ContinuousBernoulli."""
from __future__ import annotations

import math
from numbers import Number

import tinytorch
from .._tensor import Size, Tensor
from ..nn.functional import binary_cross_entropy_with_logits
from . import constraints
from .distribution import ExponentialFamily
from .utils import broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham, 2019): density
    C(p) p^x (1 - p)^(1 - x). Near p = 1/2 (inside `lims`) the normalizer and moments use Taylor expansions, since
    their closed forms are 0/0 there."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims: tuple = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            # validate before clamping, so that out-of-range probs are reported
            if validate_args is not None:
                if validate_args and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                    raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.size()
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "ContinuousBernoulli":
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        return tinytorch.where(self._outside_unstable_region(), self.probs,
                               self._lims[0] * tinytorch.ones_like(self.probs))

    def _cont_bern_log_norm(self) -> Tensor:
        """log C(p): log(2 atanh(1 - 2p) / (1 - 2p)), by its Taylor series around p = 1/2."""
        cut_probs = self._cut_probs()
        cut_probs_below_half = tinytorch.where(cut_probs <= 0.5, cut_probs, tinytorch.zeros_like(cut_probs))
        cut_probs_above_half = tinytorch.where(cut_probs >= 0.5, cut_probs, tinytorch.ones_like(cut_probs))
        log_norm = tinytorch.log(tinytorch.abs(tinytorch.log1p(-cut_probs) - tinytorch.log(cut_probs)))
        log_norm = log_norm - tinytorch.where(cut_probs <= 0.5, tinytorch.log1p(-2.0 * cut_probs_below_half),
                                              tinytorch.log(2.0 * cut_probs_above_half - 1.0))
        x = tinytorch.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return tinytorch.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (tinytorch.log1p(-cut_probs) - tinytorch.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * tinytorch.pow(x, 2)) * x
        return tinytorch.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self) -> Tensor:
        return tinytorch.sqrt(self.variance)

    @property
    def variance(self) -> Tensor:
        cut_probs = self._cut_probs()
        vars_ = (cut_probs * (cut_probs - 1.0) / tinytorch.pow(1.0 - 2.0 * cut_probs, 2)
                 + 1.0 / tinytorch.pow(tinytorch.log1p(-cut_probs) - tinytorch.log(cut_probs), 2))
        x = tinytorch.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return tinytorch.where(self._outside_unstable_region(), vars_, taylor)

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> Size:
        return self._param.size()

    def sample(self, sample_shape=Size()) -> Tensor:
        with tinytorch.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        u = tinytorch.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = ((tinytorch.pow(cut_probs, value) * tinytorch.pow(1.0 - cut_probs, 1.0 - value) + cut_probs - 1.0)
                / (2.0 * cut_probs - 1.0))
        unbounded_cdfs = tinytorch.where(self._outside_unstable_region(), cdfs, value)
        return tinytorch.where(value <= 0.0, tinytorch.zeros_like(value),
                               tinytorch.where(value >= 1.0, tinytorch.ones_like(value), unbounded_cdfs))

    def icdf(self, value) -> Tensor:
        cut_probs = self._cut_probs()
        return tinytorch.where(
            self._outside_unstable_region(),
            (tinytorch.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0)) - tinytorch.log1p(-cut_probs))
            / (tinytorch.log(cut_probs) - tinytorch.log1p(-cut_probs)),
            value)

    def entropy(self) -> Tensor:
        log_probs0 = tinytorch.log1p(-self.probs)
        log_probs1 = tinytorch.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple:
        return (self.logits,)

    def _log_normalizer(self, x):
        """log((e^x - 1) / x), the normalizer of exp(x t) on [0, 1]; Taylor-expanded near x = 0."""
        out_unst_reg = (x < -0.01) | (x > 0.01)
        cut_nat_params = tinytorch.where(out_unst_reg, x, -0.01 * tinytorch.ones_like(x))
        log_norm = tinytorch.log(tinytorch.abs(tinytorch.expm1(cut_nat_params))) - tinytorch.log(
            tinytorch.abs(cut_nat_params))
        taylor = 0.5 * x + tinytorch.pow(x, 2) / 24.0 - tinytorch.pow(x, 4) / 2880.0
        return tinytorch.where(out_unst_reg, log_norm, taylor)
