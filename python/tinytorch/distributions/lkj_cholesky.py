"""torch.distributions.LKJCholesky."""
from __future__ import annotations

import math

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import broadcast_all, finfo

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The LKJ distribution (Lewandowski, Kurowicka and Joe, 2009) over Cholesky factors of dim x dim correlation
    matrices: density of the correlation matrix proportional to det(C)^(concentration - 1). Sampled by the onion
    method."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args: bool | None = None) -> None:
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        event_shape = Size((dim, dim))
        # the squared norm of row k's off-diagonal part is Beta(k / 2, marginal - (k - 1) / 2) (onion method,
        # sec. 3.2). PyTorch 2.13 uses k - 1/2 for the first parameter, which skews rows k >= 2 for dim >= 3.
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = tinytorch.arange(self.dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = tinytorch.cat([offset.new_zeros((1,)), offset])
        beta_conc1 = 0.5 * offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None) -> "LKJCholesky":
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=Size()) -> Tensor:
        with tinytorch.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = tuple(self._extended_shape(sample_shape))
            u_normal = tinytorch.randn(shape, dtype=y.dtype, device=y.device).tril(-1)
            # a direction uniform on the sphere for each row's off-diagonal part (row 0 has none)
            norm = tinytorch.linalg.vector_norm(u_normal, dim=-1, keepdim=True)
            u_hypersphere = u_normal / tinytorch.where(norm == 0, 1.0, norm)
            w = tinytorch.sqrt(y) * u_hypersphere
            tiny = float(finfo(w.dtype).tiny)
            diag_elems = tinytorch.clamp(1 - tinytorch.sum(w ** 2, dim=-1), min=tiny).sqrt()
            return w + tinytorch.diag_embed(diag_elems)

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = tinytorch.arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = tinytorch.sum(order * diag_elems.log(), dim=-1)
        # the normalizer, as in eq. (16) of the LKJ paper
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = tinytorch.lgamma(alpha) * dm1
        numerator = tinytorch.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term
