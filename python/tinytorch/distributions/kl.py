"""torch.distributions.kl: kl_divergence(p, q) dispatched on the pair of types, and register_kl to add a
closed form."""
from __future__ import annotations

import math
import warnings
from functools import total_ordering

import tinytorch
from .._tensor import Tensor
from ..nn.functional import softplus
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution, ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import _sum_rightmost, euler_constant

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY: dict = {}  # (type_p, type_q) -> function, as registered
_KL_MEMOIZE: dict = {}  # (type(p), type(q)) -> the most specific registered function (or NotImplemented)

_INF = float("inf")


def register_kl(type_p, type_q):
    """Decorator registering fn(p, q) as KL(p || q) for p of type_p and q of type_q (and their subclasses,
    unless a more specific pair is registered)."""
    if not isinstance(type_p, type) and issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) and issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()  # lookups may resolve differently now
        return fun
    return decorator


@total_ordering
class _Match:
    __slots__ = ["types"]

    def __init__(self, *types) -> None:
        self.types = types

    def __eq__(self, other) -> bool:
        return self.types == other.types

    def __le__(self, other) -> bool:
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    """The most specific registered pair matching (type_p, type_q); a warning when p-first and q-first
    specificity disagree."""
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left_p.__name__}, {right_q.__name__})", RuntimeWarning, stacklevel=2)
    return left_fun


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the batch shape."""
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and "
                                  f"q type {q.__class__.__name__}")
    return fun(p, q)


def _batch_trace_XXT(bmat: Tensor) -> Tensor:
    """trace(X X^T) of each matrix in a batch."""
    n, m = bmat.size(-1), bmat.size(-2)
    return bmat.reshape(-1, m * n).pow(2).sum(-1).reshape(tuple(bmat.shape[:-2]))


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = tinytorch.where(q.probs == 0, _INF, t1)
    t1 = tinytorch.where(p.probs == 0, 0.0, t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = tinytorch.where(q.probs == 1, _INF, t2)
    t2 = tinytorch.where(p.probs == 1, 0.0, t2)
    return t1 + t2


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = tinytorch.lgamma(q.concentration1) + tinytorch.lgamma(q.concentration0) + tinytorch.lgamma(sum_params_p)
    t2 = tinytorch.lgamma(p.concentration1) + tinytorch.lgamma(p.concentration0) + tinytorch.lgamma(sum_params_q)
    t3 = (p.concentration1 - q.concentration1) * tinytorch.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * tinytorch.digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * tinytorch.digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return tinytorch.where(p.total_count > q.total_count, _INF, kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = tinytorch.where((q.probs == 0).expand_as(t), _INF, t)
    t = tinytorch.where((p.probs == 0).expand_as(t), 0.0, t)
    return t.sum(-1)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = tinytorch.lgamma(sum_p_concentration) - tinytorch.lgamma(sum_q_concentration)
    t2 = (tinytorch.lgamma(p.concentration) - tinytorch.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = tinytorch.digamma(p.concentration) - tinytorch.digamma(sum_p_concentration).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    # Bregman divergence of the log normalizer between the natural parameters
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    p_nparams = [t.detach().requires_grad_() for t in p._natural_params]
    q_nparams = q._natural_params
    lg_normal = p._log_normalizer(*p_nparams)
    gradients = tinytorch.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        result = result - _sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = tinytorch.lgamma(q.concentration) - tinytorch.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * tinytorch.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_abs_diff / q.scale + scale_ratio * tinytorch.exp(-loc_abs_diff / p.scale) - 1


def _kl_gaussians(p, q):
    """KL between multivariate normals given as (loc, lower-triangular scale) through their dense factors:
    0.5 * (tr(Sq^-1 Sp) + |Lq^-1 (mq - mp)|^2 - n) + log det Lq - log det Lp."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot "
                         "be computed")
    p_tril, q_tril = _scale_tril_of(p), _scale_tril_of(q)
    half_term1 = (q_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - p_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    combined_batch_shape = tinytorch.broadcast_shapes(q_tril.shape[:-2], p_tril.shape[:-2])
    n = p.event_shape[0]
    q_scale_tril = q_tril.expand(tuple(combined_batch_shape) + (n, n))
    p_scale_tril = p_tril.expand(tuple(combined_batch_shape) + (n, n))
    term2 = _batch_trace_XXT(tinytorch.linalg.solve_triangular(q_scale_tril, p_scale_tril, upper=False))
    term3 = _batch_mahalanobis(q_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


def _scale_tril_of(d):
    if isinstance(d, MultivariateNormal):
        return d._unbroadcasted_scale_tril
    return d.scale_tril


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    return _kl_gaussians(p, q)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Low Rank Multivariate Normals with different event shapes "
                         "cannot be computed")
    return _kl_gaussians(p, q)


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")
    return _kl_gaussians(p, q)


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")
    return _kl_gaussians(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return tinytorch.where((q.low > p.low) | (q.high < p.high), _INF, result)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


# ------------------------------------------------------------------ same-family pairs of the newer distributions

@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    # Chyzak and Nielsen (2019)
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


def _cb_log_density_terms(q):
    """log q(x) = log C + x * log(p) + (1 - x) * log(1 - p) for a ContinuousBernoulli q: (log C, log p,
    log(1 - p))."""
    return q._cont_bern_log_norm(), q.probs.log(), (-q.probs).log1p()


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * euler_constant
    t3 = tinytorch.exp(ct2 + (1 + ct1).lgamma() - ct3)
    return t1 + t2 + t3 - (1 + euler_constant)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    # the support of p must lie inside that of q
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    return tinytorch.where(p.support.lower_bound < q.support.lower_bound, _INF, result)


# ------------------------------------------------------------------ cross-family pairs
# KL(p || q) = -H(p) - E_p[log q(x)], with E_p[log q] in closed form from p's moments.

def _infinite_like(tensor: Tensor) -> Tensor:
    return tinytorch.full_like(tensor, _INF)


def _batch_uniform_e_log(p):
    """E[log x] and E[log(1 - x)] for x ~ Uniform(low, high) inside [0, 1]."""
    width = p.high - p.low
    e_log_x = (tinytorch.xlogy(p.high, p.high) - tinytorch.xlogy(p.low, p.low)) / width - 1
    e_log_1mx = (tinytorch.xlogy(1 - p.low, 1 - p.low) - tinytorch.xlogy(1 - p.high, 1 - p.high)) / width - 1
    return e_log_x, e_log_1mx


def _normal_cross_term(q, mean, second_moment_about_q):
    """-E_p[log q] for a Normal q given E_p[(x - q.loc)^2]."""
    var_q = q.scale.pow(2)
    return 0.5 * (2 * math.pi * var_q).log() + second_moment_about_q / (2 * var_q)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    log_c, log_p, log_1mp = _cb_log_density_terms(q)
    return -p.entropy() - p.mean * (log_p - log_1mp) - log_1mp - log_c


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p, q):
    return _infinite_like(p.concentration1)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    e_log_x = p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    t3 = (q.concentration - 1) * e_log_x
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    e_x = p.concentration1 / (p.concentration1 + p.concentration0)
    second = p.variance + (e_x - q.loc).pow(2)
    return -p.entropy() + _normal_cross_term(q, e_x, second)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return tinytorch.where((q.low > 0) | (q.high < 1), _INF, result)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_infinity(p, q):
    return _infinite_like(p.probs)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    second = p.variance + (p.mean - q.loc).pow(2)
    return -p.entropy() + _normal_cross_term(q, p.mean, second)


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return tinytorch.where((q.low > 0) | (q.high < 1), _INF, result)


@register_kl(Exponential, Beta)
@register_kl(Exponential, ContinuousBernoulli)
@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + q.concentration.lgamma() + q.concentration * euler_constant - (1 + euler_constant)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = (loc_scale_ratio.exp() * scale_rate_prod) / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    # E[x] = 1 / rate, E[x^2] = 2 / rate^2
    e_x = p.rate.reciprocal()
    second = 2 * e_x.pow(2) - 2 * q.loc * e_x + q.loc.pow(2)
    return -p.entropy() + _normal_cross_term(q, e_x, second)


@register_kl(Gamma, Beta)
@register_kl(Gamma, ContinuousBernoulli)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    return _infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma() - p.concentration
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    e_x = p.concentration / p.rate
    second = p.concentration / p.rate.pow(2) + (e_x - q.loc).pow(2)
    return -p.entropy() + _normal_cross_term(q, e_x, second)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    e_x = p.loc + p.scale * euler_constant
    second = p.variance + (e_x - q.loc).pow(2)
    return -p.entropy() + _normal_cross_term(q, e_x, second)


@register_kl(Laplace, Beta)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    second = 2 * p.scale.pow(2) + (p.loc - q.loc).pow(2)
    return -p.entropy() + _normal_cross_term(q, p.loc, second)


@register_kl(Normal, Beta)
@register_kl(Normal, ContinuousBernoulli)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    return _infinite_like(p.loc)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    # E[exp(-x / b)] for x ~ Normal(m, s) is exp(-m / b + s^2 / (2 b^2))
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = -p.entropy() + q.scale.log()
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = tinytorch.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return t1 + t2 + t3


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    # E|x - b| for x ~ Normal(m, s): s sqrt(2 / pi) exp(-d^2 / (2 s^2)) + d erf(d / (s sqrt 2)), d = m - b
    d = p.loc - q.loc
    e_abs = (p.scale * math.sqrt(2 / math.pi) * tinytorch.exp(-0.5 * (d / p.scale).pow(2))
             + d * tinytorch.erf(d / (p.scale * math.sqrt(2))))
    return -p.entropy() + (2 * q.scale).log() + e_abs / q.scale


@register_kl(Pareto, Beta)
@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    # infinite when p has no mean (alpha <= 1)
    result = -p.entropy() - q.rate.log() + q.rate * p.mean
    return tinytorch.where(p.alpha <= 1, _INF, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    e_log_x = p.scale.log() + p.alpha.reciprocal()
    result = (-p.entropy() + q.concentration.lgamma() - q.concentration * q.rate.log()
              - (q.concentration - 1) * e_log_x + q.rate * p.mean)
    return tinytorch.where(p.alpha <= 1, _INF, result)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    # infinite when p has no variance (alpha <= 2)
    second = p.variance + (p.mean - q.loc).pow(2)
    result = -p.entropy() + _normal_cross_term(q, p.mean, second)
    return tinytorch.where(p.alpha <= 2, _INF, result)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    return _infinite_like(p.rate)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    e_log_x, e_log_1mx = _batch_uniform_e_log(p)
    log_beta = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    result = (-p.entropy() + log_beta - (q.concentration1 - 1) * e_log_x - (q.concentration0 - 1) * e_log_1mx)
    return tinytorch.where((p.high > 1) | (p.low < 0), _INF, result)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    log_c, log_p, log_1mp = _cb_log_density_terms(q)
    result = -p.entropy() - log_c - p.mean * (log_p - log_1mp) - log_1mp
    return tinytorch.where((p.high > 1) | (p.low < 0), _INF, result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponetial(p, q):
    result = -p.entropy() - q.rate.log() + q.rate * (p.high + p.low) / 2
    return tinytorch.where(p.low < q.support.lower_bound, _INF, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    # E[log x] for x ~ Uniform(a, b) with a >= 0: (b log b - a log a) / (b - a) - 1
    e_log_x = (tinytorch.xlogy(p.high, p.high) - tinytorch.xlogy(p.low, p.low)) / (p.high - p.low) - 1
    result = (-p.entropy() + q.concentration.lgamma() - q.concentration * q.rate.log()
              - (q.concentration - 1) * e_log_x + q.rate * (p.high + p.low) / 2)
    return tinytorch.where(p.low < q.support.lower_bound, _INF, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (tinytorch.exp(-high_loc_diff) - tinytorch.exp(-low_loc_diff))
    return t1 - t2


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    second = (p.high - p.low).pow(2) / 12 + ((p.high + p.low) / 2 - q.loc).pow(2)
    return -p.entropy() + _normal_cross_term(q, (p.high + p.low) / 2, second)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    e_log_x = (tinytorch.xlogy(p.high, p.high) - tinytorch.xlogy(p.low, p.low)) / (p.high - p.low) - 1
    result = -p.entropy() - q.alpha.log() - q.alpha * q.scale.log() + (q.alpha + 1) * e_log_x
    return tinytorch.where(p.low < q.support.lower_bound, _INF, result)
