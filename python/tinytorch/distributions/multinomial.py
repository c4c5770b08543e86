"""torch.distributions.Multinomial."""
from __future__ import annotations

import tinytorch
from .._tensor import Size, Tensor
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """Counts of each of K categories (the event) over total_count draws from Categorical(probs / logits)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> "Multinomial":
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs, validate_args=False)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self) -> Tensor:
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    def sample(self, sample_shape=Size()) -> Tensor:
        sample_shape = Size(sample_shape)
        with tinytorch.no_grad():
            draws = self._categorical.sample(Size((self.total_count,)) + sample_shape)
            # (total_count, sample, batch) category indices -> counts along a new last dim
            draws = draws.permute(tuple(range(1, draws.dim())) + (0,))
            counts = tinytorch.zeros(tuple(self._extended_shape(sample_shape)), dtype=self.probs.dtype,
                                     device=self.probs.device)
            return counts.scatter_add(-1, draws, tinytorch.ones_like(draws, dtype=counts.dtype))

    def entropy(self) -> Tensor:
        n = tinytorch.tensor(self.total_count, dtype=self.probs.dtype, device=self.probs.device)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - tinytorch.lgamma(n + 1)
        # E[sum_k log(x_k!)]: each count is Binomial(n, p_k); count 0 contributes log(0!) = 0
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = tinytorch.exp(self._binomial.log_prob(support))
        weights = tinytorch.lgamma(support + 1)
        term2 = (binomial_probs * weights).sum(0).sum(-1)
        return term1 + term2

    def log_prob(self, value) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = logits.clone()
        log_factorial_n = tinytorch.lgamma(value.sum(-1) + 1)
        log_factorial_xs = tinytorch.lgamma(value + 1).sum(-1)
        # a category of probability 0 drawn 0 times contributes nothing (0 * -inf would be nan)
        logits = tinytorch.where((value == 0) & (logits == -float("inf")), 0.0, logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
