"""torch.distributions.Wishart."""
from __future__ import annotations

import math
import warnings
from numbers import Number

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from .distribution import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property

__all__ = ["Wishart"]


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma: sum_{i=0}^{p-1} digamma(x - i / 2)."""
    if not bool(tinytorch.ge(x, (p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    i = tinytorch.arange(p, dtype=x.dtype, device=x.device)
    return tinytorch.digamma(x.unsqueeze(-1) - i / 2).sum(-1)


def _clamp_above_eps(x: Tensor) -> Tensor:
    return x.clamp(min=float(tinytorch.finfo(x.dtype).eps))


class Wishart(ExponentialFamily):
    """The Wishart distribution over p x p positive-definite matrices: sum of df outer products of
    MultivariateNormal(0, covariance_matrix) vectors (df may be real, > p - 1). Sampled by the Bartlett
    decomposition."""

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict:
        return {"covariance_matrix": constraints.positive_definite, "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix: Tensor | None = None, precision_matrix: Tensor | None = None,
                 scale_tril: Tensor | None = None, validate_args: bool | None = None) -> None:
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                 "specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, Number):
            batch_shape = Size(param.shape[:-2])
            self.df = tinytorch.tensor(df, dtype=param.dtype, device=param.device)
        else:
            batch_shape = Size(tinytorch.broadcast_shapes(param.shape[:-2], df.shape))
            self.df = df.expand(batch_shape)
        event_shape = param.shape[-2:]
        if bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {event_shape[-1] - 1}.")
        if scale_tril is not None:
            self.scale_tril = param.expand(batch_shape + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(batch_shape + (-1, -1))
        else:
            self.precision_matrix = param.expand(batch_shape + (-1, -1))
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = tinytorch.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2_for(self.df)

    def _chi2_for(self, df: Tensor):
        from .chi2 import Chi2
        # the squared diagonal of the Bartlett factor: chi-squared with df, df - 1, ..., df - p + 1 degrees
        p = self._event_shape[-1]
        return Chi2(df=df.unsqueeze(-1) - tinytorch.arange(p, dtype=self._unbroadcasted_scale_tril.dtype,
                                                           device=self._unbroadcasted_scale_tril.device).expand(
            tuple(self._batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None) -> "Wishart":
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        cov_shape = batch_shape + self.event_shape
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2_for(new.df)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(self._batch_shape + self._event_shape)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._batch_shape + self._event_shape)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        identity = tinytorch.eye(self._event_shape[-1], device=self._unbroadcasted_scale_tril.device,
                                 dtype=self._unbroadcasted_scale_tril.dtype)
        return tinytorch.cholesky_solve(identity, self._unbroadcasted_scale_tril).expand(
            self._batch_shape + self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.df.view(self._batch_shape + (1, 1)) * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        # defined for df >= p + 1 only
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = tinytorch.where(factor <= 0, math.nan, factor)
        return factor.view(self._batch_shape + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self.df.view(self._batch_shape + (1, 1)) * (V.pow(2) + tinytorch.einsum("...i,...j->...ij", diag_V,
                                                                                        diag_V))

    def _bartlett_sampling(self, sample_shape=Size()) -> Tensor:
        p = self._event_shape[-1]
        noise = _clamp_above_eps(self._dist_chi2.rsample(sample_shape).sqrt()).diag_embed(dim1=-2, dim2=-1)
        below = tinytorch.randn(tuple(noise.shape[:-2]) + (p * (p - 1) // 2,), dtype=noise.dtype, device=noise.device)
        noise = _fill_below(noise, below, p)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=Size(), max_try_correction=None) -> Tensor:
        """Samples by the Bartlett decomposition; a sample that is numerically singular is drawn again, up to
        max_try_correction times (default 10), with a warning."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        is_singular = ~self.support.check(sample)
        if bool(is_singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                sample_new = self._bartlett_sampling(sample_shape)
                sample = tinytorch.where(is_singular[..., None, None], sample_new, sample)
                is_singular = ~self.support.check(sample)
                if not bool(is_singular.any()):
                    break
        return sample

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        return (-nu * (p * math.log(2) / 2 + self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                - tinytorch.mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * tinytorch.linalg.slogdet(value).logabsdet
                - tinytorch.cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(-1)
                / 2)

    def entropy(self) -> Tensor:
        nu = self.df
        p = self._event_shape[-1]
        return ((p + 1) * (p * math.log(2) / 2 + self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log()
                           .sum(-1))
                + tinytorch.mvlgamma(nu / 2, p) - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self) -> tuple:
        nu = self.df
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-tinytorch.linalg.slogdet(-2 * x).logabsdet + math.log(2) * p) \
            + tinytorch.mvlgamma(y + (p + 1) / 2, p)


def _fill_below(noise: Tensor, below: Tensor, p: int) -> Tensor:
    """noise with its strictly-lower triangle (row-major) set to the entries of below."""
    mask = tinytorch.ones(p, p, dtype=tinytorch.bool, device=noise.device).tril(-1)
    flat = tinytorch.zeros(tuple(noise.shape[:-2]) + (p * p,), dtype=noise.dtype, device=noise.device)
    idx = tinytorch.nonzero(mask.reshape(-1)).reshape(-1)
    flat = flat.index_copy(-1, idx, below)
    return noise + flat.reshape(noise.shape)
