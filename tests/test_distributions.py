"""torch.distributions: log_prob/entropy/moments against closed forms in NumPy/math, sample shapes and moments
under a fixed seed, reparameterized gradients and parameter gradients by gradcheck in float64, argument
validation with PyTorch's messages, transforms, constraints, KL divergences, and PyTorch's values when it is
importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch
from tinytorch import distributions as D
from tinytorch.autograd import gradcheck, gradgradcheck
from tinytorch.distributions import constraints, transforms
from tinytorch.distributions._special import gammainc_array, standard_gamma_grad

HAS_TORCH = importlib.util.find_spec("torch") is not None
torch_only = pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")

F64 = tinytorch.float64
_lgamma = np.vectorize(math.lgamma)
_erf = np.vectorize(math.erf)


def t64(x, requires_grad=False):
    return tinytorch.tensor(np.asarray(x, dtype=np.float64), dtype=F64, requires_grad=requires_grad)


def _digamma(x):
    """psi(x) for x > 0: recurrence up to 6, then the asymptotic series."""
    x = np.asarray(x, dtype=np.float64)
    r = np.zeros_like(x)
    while (x < 6).any():
        small = x < 6
        r = r - np.where(small, 1 / x, 0)
        x = np.where(small, x + 1, x)
    f = 1 / (x * x)
    return r + np.log(x) - 0.5 / x - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f / 132))))


def _close(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(got.detach().numpy(), np.asarray(want, dtype=np.float64), rtol=rtol, atol=atol)


def _seeded(fn):
    """fn with the RNG reset on every call: a reparameterized sample becomes a deterministic function of the
    parameters, so gradcheck can differentiate it."""
    def run(*args):
        tinytorch.manual_seed(0)
        return fn(*args)
    return run


# ------------------------------------------------------------------ closed forms

MU, SIGMA, X = np.array([0.3, -1.0, 2.0]), np.array([1.2, 0.5, 3.0]), np.array([0.1, -0.4, 5.0])


def test_normal_matches_the_closed_forms():
    d = D.Normal(t64(MU), t64(SIGMA))
    _close(d.log_prob(t64(X)), -(X - MU) ** 2 / (2 * SIGMA ** 2) - np.log(SIGMA) - 0.5 * math.log(2 * math.pi))
    _close(d.entropy(), 0.5 + 0.5 * math.log(2 * math.pi) + np.log(SIGMA))
    _close(d.cdf(t64(X)), 0.5 * (1 + _erf((X - MU) / (SIGMA * math.sqrt(2)))))
    _close(d.mean, MU)
    _close(d.mode, MU)
    _close(d.stddev, SIGMA)
    _close(d.variance, SIGMA ** 2)
    _close(d.perplexity(), np.exp(0.5 + 0.5 * math.log(2 * math.pi) + np.log(SIGMA)))
    # the exponential-family entropy (autograd through the log normalizer) agrees with the closed form
    _close(D.ExponentialFamily.entropy(d), d.entropy().detach().numpy())


def test_normal_icdf_inverts_the_cdf():
    d = D.Normal(t64(MU), t64(SIGMA))
    p = t64([0.05, 0.5, 0.9])
    _close(d.cdf(d.icdf(p)), p.numpy(), rtol=1e-9)
    _close(d.icdf(t64([0.5, 0.5, 0.5])), MU, atol=1e-12)


def test_uniform_exponential_laplace_match_the_closed_forms():
    lo, hi = np.array([0.0, -2.0]), np.array([1.0, 3.0])
    u = D.Uniform(t64(lo), t64(hi))
    _close(u.log_prob(t64([0.5, 2.9])), -np.log(hi - lo))
    assert D.Uniform(t64(lo), t64(hi), validate_args=False).log_prob(t64([1.5, 3.0])).numpy().tolist() == \
        [-math.inf, -math.inf]  # outside [low, high): zero density
    _close(u.entropy(), np.log(hi - lo))
    _close(u.mean, (lo + hi) / 2)
    _close(u.variance, (hi - lo) ** 2 / 12)
    _close(u.stddev, (hi - lo) / math.sqrt(12))
    _close(u.cdf(t64([0.25, 0.5])), [0.25, 0.5])
    _close(u.icdf(t64([0.25, 0.5])), [0.25, 0.5])
    assert np.isnan(u.mode.numpy()).all()

    rate = np.array([0.5, 2.0])
    e = D.Exponential(t64(rate))
    x = np.array([0.3, 2.0])
    _close(e.log_prob(t64(x)), np.log(rate) - rate * x)
    _close(e.entropy(), 1 - np.log(rate))
    _close(e.mean, 1 / rate)
    _close(e.variance, 1 / rate ** 2)
    _close(e.cdf(t64(x)), 1 - np.exp(-rate * x))
    _close(e.icdf(e.cdf(t64(x))), x)
    _close(e.mode, [0.0, 0.0])
    _close(D.ExponentialFamily.entropy(e), 1 - np.log(rate))

    loc, scale = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    lap = D.Laplace(t64(loc), t64(scale))
    x = np.array([0.3, -1.0])
    _close(lap.log_prob(t64(x)), -np.log(2 * scale) - np.abs(x - loc) / scale)
    _close(lap.entropy(), 1 + np.log(2 * scale))
    _close(lap.variance, 2 * scale ** 2)
    _close(lap.stddev, math.sqrt(2) * scale)
    cdf = np.where(x < loc, 0.5 * np.exp((x - loc) / scale), 1 - 0.5 * np.exp(-(x - loc) / scale))
    _close(lap.cdf(t64(x)), cdf)
    _close(lap.icdf(t64(cdf)), x)


def test_gamma_beta_dirichlet_match_the_closed_forms():
    a, b, x = np.array([0.5, 2.0, 7.5]), np.array([1.0, 3.0, 0.25]), np.array([0.3, 2.0, 20.0])
    g = D.Gamma(t64(a), t64(b))
    _close(g.log_prob(t64(x)), a * np.log(b) + (a - 1) * np.log(x) - b * x - _lgamma(a))
    _close(g.entropy(), a - np.log(b) + _lgamma(a) + (1 - a) * _digamma(a), rtol=1e-8)
    _close(g.mean, a / b)
    _close(g.variance, a / b ** 2)
    _close(g.mode, np.maximum((a - 1) / b, 0))
    _close(D.ExponentialFamily.entropy(g), g.entropy().detach().numpy(), rtol=1e-8)
    # cdf: P(1, y) = 1 - e^-y, P(2, y) = 1 - e^-y (1 + y), P(1/2, y) = erf(sqrt(y))
    y = np.array([0.2, 1.5, 6.0])
    _close(D.Gamma(t64([1.0, 2.0, 0.5]), t64([1.0, 1.0, 1.0])).cdf(t64(y)),
           [1 - math.exp(-0.2), 1 - math.exp(-1.5) * 2.5, math.erf(math.sqrt(6.0))], rtol=1e-9)

    c1, c0, x = np.array([0.5, 2.0]), np.array([1.5, 3.0]), np.array([0.3, 0.9])
    be = D.Beta(t64(c1), t64(c0))
    log_beta_fn = _lgamma(c1) + _lgamma(c0) - _lgamma(c1 + c0)
    _close(be.log_prob(t64(x)), (c1 - 1) * np.log(x) + (c0 - 1) * np.log1p(-x) - log_beta_fn)
    _close(be.entropy(), log_beta_fn - (c1 - 1) * _digamma(c1) - (c0 - 1) * _digamma(c0)
           + (c1 + c0 - 2) * _digamma(c1 + c0), rtol=1e-8)
    _close(be.mean, c1 / (c1 + c0))
    _close(be.variance, c1 * c0 / ((c1 + c0) ** 2 * (c1 + c0 + 1)))
    _close(be.concentration1, c1)
    _close(be.concentration0, c0)
    _close(D.Beta(2.0, 3.0).log_prob(tinytorch.tensor(0.3)).double(),
           math.log(0.3) + 2 * math.log(0.7) - (math.lgamma(2) + math.lgamma(3) - math.lgamma(5)), rtol=1e-6)

    alpha = np.array([[0.5, 2.0, 1.0], [1.0, 1.0, 3.0]])
    v = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    di = D.Dirichlet(t64(alpha))
    _close(di.log_prob(t64(v)), ((alpha - 1) * np.log(v)).sum(-1) + _lgamma(alpha.sum(-1))
           - _lgamma(alpha).sum(-1))
    a0 = alpha.sum(-1)
    _close(di.entropy(), _lgamma(alpha).sum(-1) - _lgamma(a0) - (3 - a0) * _digamma(a0)
           - ((alpha - 1) * _digamma(alpha)).sum(-1), rtol=1e-8)
    _close(di.mean, alpha / a0[:, None])
    _close(di.variance, alpha * (a0[:, None] - alpha) / (a0[:, None] ** 2 * (a0[:, None] + 1)))
    _close(D.Dirichlet(t64([2.0, 3.0, 5.0])).mode, [1 / 7, 2 / 7, 4 / 7])
    # all below 1: the density is unbounded at every vertex and PyTorch reports the first
    _close(D.Dirichlet(t64([0.5, 0.9, 0.2])).mode, [1.0, 0.0, 0.0])


def test_bernoulli_and_categorical_match_the_closed_forms():
    p = np.array([0.3, 0.8, 0.5])
    for d in (D.Bernoulli(probs=t64(p)), D.Bernoulli(logits=t64(np.log(p / (1 - p))))):
        _close(d.log_prob(t64([1.0, 0.0, 1.0])), np.log([0.3, 0.2, 0.5]), rtol=1e-9)
        _close(d.entropy(), -(p * np.log(p) + (1 - p) * np.log1p(-p)), rtol=1e-9)
        _close(d.mean, p, rtol=1e-12)
        _close(d.variance, p * (1 - p), rtol=1e-12)
        _close(d.probs, p, rtol=1e-12)
        _close(d.logits, np.log(p / (1 - p)), rtol=1e-12)
    mode = D.Bernoulli(probs=t64(p)).mode.numpy()
    assert mode[:2].tolist() == [0.0, 1.0] and np.isnan(mode[2])

    probs = np.array([[0.2, 0.3, 0.5], [1.0, 6.0, 3.0]])  # unnormalized rows are normalized
    norm = probs / probs.sum(-1, keepdims=True)
    for d in (D.Categorical(probs=t64(probs)), D.Categorical(logits=t64(np.log(probs)))):
        _close(d.log_prob(tinytorch.tensor([2, 1])), np.log([0.5, 0.6]), rtol=1e-12)
        _close(d.entropy(), -(norm * np.log(norm)).sum(-1), rtol=1e-12)
        _close(d.probs, norm, rtol=1e-12)
        assert d.mode.tolist() == [2, 1]
        assert np.isnan(d.mean.numpy()).all() and d.mean.shape == (2,)
    # a zero-probability class: entropy stays finite, log_prob is -inf
    d = D.Categorical(probs=t64([0.0, 0.25, 0.75]))
    _close(d.entropy(), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))
    assert d.log_prob(tinytorch.tensor(0)).item() < -30

    oh = D.OneHotCategorical(probs=t64(probs))
    _close(oh.log_prob(t64([[0, 0, 1], [0, 1, 0]])), np.log([0.5, 0.6]), rtol=1e-12)
    _close(oh.entropy(), -(norm * np.log(norm)).sum(-1), rtol=1e-12)
    _close(oh.mean, norm, rtol=1e-12)
    _close(oh.variance, norm * (1 - norm), rtol=1e-12)
    _close(oh.mode, [[0, 0, 1], [0, 1, 0]])


def test_poisson_and_binomial_match_the_closed_forms():
    rate, k = np.array([0.5, 4.0, 0.0]), np.array([0.0, 3.0, 0.0])
    d = D.Poisson(t64(rate))
    _close(d.log_prob(t64(k)), [-0.5, 3 * math.log(4) - 4 - math.log(6), 0.0])  # rate 0: all mass at 0
    _close(d.mean, rate)
    _close(d.variance, rate)
    _close(d.mode, np.floor(rate))

    n, p, k = np.array([5.0, 10.0]), np.array([0.3, 0.8]), np.array([2.0, 10.0])
    log_choose = _lgamma(n + 1) - _lgamma(k + 1) - _lgamma(n - k + 1)
    for b in (D.Binomial(t64(n), probs=t64(p)), D.Binomial(t64(n), logits=t64(np.log(p / (1 - p))))):
        _close(b.log_prob(t64(k)), log_choose + k * np.log(p) + (n - k) * np.log1p(-p), rtol=1e-9)
        _close(b.mean, n * p, rtol=1e-12)
        _close(b.variance, n * p * (1 - p), rtol=1e-12)
        _close(b.mode, np.minimum(np.floor((n + 1) * p), n))
    b = D.Binomial(4, probs=t64([0.3, 0.6]))
    ks = np.arange(5.0)[:, None]
    pmf = np.exp(_lgamma(5) - _lgamma(ks + 1) - _lgamma(5 - ks) + ks * np.log([0.3, 0.6])
                 + (4 - ks) * np.log([0.7, 0.4]))
    _close(b.entropy(), -(pmf * np.log(pmf)).sum(0), rtol=1e-9)
    _close(b.enumerate_support(), np.broadcast_to(ks, (5, 2)))
    assert b.enumerate_support(expand=False).shape == (5, 1)
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
        D.Binomial(t64([3.0, 4.0]), probs=t64([0.3, 0.6])).entropy()


def test_lognormal_and_independent_match_the_closed_forms():
    mu, s, x = np.array([0.0, 1.0]), np.array([1.0, 0.5]), np.array([0.3, 2.0])
    d = D.LogNormal(t64(mu), t64(s))
    _close(d.log_prob(t64(x)), -(np.log(x) - mu) ** 2 / (2 * s ** 2) - np.log(s * x) - 0.5 * math.log(2 * math.pi))
    _close(d.mean, np.exp(mu + s ** 2 / 2))
    _close(d.variance, np.expm1(s ** 2) * np.exp(2 * mu + s ** 2))
    _close(d.mode, np.exp(mu - s ** 2))
    _close(d.entropy(), mu + 0.5 + 0.5 * np.log(2 * math.pi * s ** 2))
    _close(d.cdf(t64(x)), 0.5 * (1 + _erf((np.log(x) - mu) / (s * math.sqrt(2)))))
    _close(d.loc, mu)
    _close(d.scale, s)
    assert d.support is constraints.positive and d.has_rsample

    base = D.Normal(t64(np.zeros((2, 3))), t64(np.ones((2, 3))))
    ind = D.Independent(base, 1)
    assert ind.batch_shape == (2,) and ind.event_shape == (3,)
    v = np.linspace(-1, 1, 6).reshape(2, 3)
    _close(ind.log_prob(t64(v)), (-v ** 2 / 2 - 0.5 * math.log(2 * math.pi)).sum(-1))
    _close(ind.entropy(), np.full(2, 3 * (0.5 + 0.5 * math.log(2 * math.pi))))
    assert D.Independent(base, 2).batch_shape == () and D.Independent(base, 2).event_shape == (2, 3)
    assert repr(ind).startswith("Independent(Normal(") and ind.has_rsample
    assert not ind.has_enumerate_support
    with pytest.raises(ValueError, match=r"Expected reinterpreted_batch_ndims <= len\(base_distribution.batch_sh"):
        D.Independent(base, 3)


def _mvn_logpdf(x, mu, cov):
    k = mu.shape[-1]
    diff = x - mu
    maha = np.einsum("...i,...ij,...j->...", diff, np.linalg.inv(cov), diff)
    return -0.5 * (k * math.log(2 * math.pi) + np.linalg.slogdet(cov)[1] + maha)


def test_multivariate_normal_matches_the_closed_forms_for_every_parameterization():
    mu = np.array([[0.0, 1.0, -1.0], [0.5, 0.0, 2.0]])
    A = np.array([[1.0, 0.0, 0.0], [0.4, 0.8, 0.0], [-0.3, 0.2, 1.5]])
    cov = A @ A.T
    x = np.array([[0.3, -0.2, 1.0], [1.0, 1.0, 1.0]])
    want = _mvn_logpdf(x, mu, cov)
    for kw in ({"scale_tril": t64(A)}, {"covariance_matrix": t64(cov)}, {"precision_matrix": t64(np.linalg.inv(cov))}):
        d = D.MultivariateNormal(t64(mu), **kw)
        assert d.batch_shape == (2,) and d.event_shape == (3,)
        _close(d.log_prob(t64(x)), want, rtol=1e-9)
        _close(d.entropy(), np.full(2, 0.5 * np.linalg.slogdet(2 * math.pi * math.e * cov)[1]), rtol=1e-9)
        _close(d.covariance_matrix, np.broadcast_to(cov, (2, 3, 3)), rtol=1e-9)
        _close(d.precision_matrix, np.broadcast_to(np.linalg.inv(cov), (2, 3, 3)), rtol=1e-9, atol=1e-12)
        _close(d.scale_tril, np.broadcast_to(np.linalg.cholesky(cov), (2, 3, 3)), rtol=1e-9, atol=1e-12)
        _close(d.variance, np.broadcast_to(np.diag(cov), (2, 3)), rtol=1e-9)
        _close(d.mean, mu)
        _close(d.mode, mu)
    # batch dims broadcast between loc, the matrix and the value
    d = D.MultivariateNormal(t64(mu[0]), scale_tril=t64(np.stack([A, 2 * A])))
    assert d.batch_shape == (2,)
    _close(d.log_prob(t64(x[0])), [_mvn_logpdf(x[0], mu[0], cov), _mvn_logpdf(x[0], mu[0], 4 * cov)], rtol=1e-9)
    v = t64(np.zeros((5, 1, 3)))
    assert d.log_prob(v).shape == (5, 2)


def test_multivariate_normal_errors():
    loc = t64([0.0, 0.0])
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        D.MultivariateNormal(loc)
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(loc, covariance_matrix=t64(np.eye(2)), scale_tril=t64(np.eye(2)))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional."):
        D.MultivariateNormal(t64(0.0), covariance_matrix=t64(np.eye(2)))
    with pytest.raises(ValueError, match="scale_tril matrix must be at least two-dimensional"):
        D.MultivariateNormal(loc, scale_tril=t64([1.0, 1.0]))
    with pytest.raises(ValueError, match="to satisfy the constraint PositiveDefinite()"):
        D.MultivariateNormal(loc, covariance_matrix=t64([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="to satisfy the constraint LowerCholesky()"):
        D.MultivariateNormal(loc, scale_tril=t64([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(RuntimeError, match="not positive-definite"):
        D.MultivariateNormal(loc, covariance_matrix=t64([[1.0, 2.0], [2.0, 1.0]]), validate_args=False)


# ------------------------------------------------------------------ shapes, sampling, reproducibility

def test_shapes_of_samples_and_of_expanded_distributions():
    d = D.Normal(tinytorch.zeros(2, 3), tinytorch.ones(3))
    assert d.batch_shape == (2, 3) and d.event_shape == ()
    assert d.sample().shape == (2, 3)
    assert d.sample((4,)).shape == (4, 2, 3)
    assert d.rsample((4, 5)).shape == (4, 5, 2, 3)
    assert d.sample().dtype == tinytorch.float32
    assert D.Normal(0.0, 1.0).batch_shape == () and D.Normal(0.0, 1.0).sample((3,)).shape == (3,)
    assert D.Normal(0.0, 1.0).loc.dtype == tinytorch.get_default_dtype()
    e = d.expand((7, 2, 3))
    assert e.batch_shape == (7, 2, 3) and e.sample().shape == (7, 2, 3) and type(e) is D.Normal
    assert e.log_prob(tinytorch.zeros(2, 3)).shape == (7, 2, 3)

    c = D.Categorical(tinytorch.ones(4, 5))
    assert c.batch_shape == (4,) and c.sample().shape == (4,) and c.sample((3, 2)).shape == (3, 2, 4)
    assert c.sample().dtype == tinytorch.int64
    assert c.expand((6, 4)).sample().shape == (6, 4)
    assert D.Categorical(tinytorch.ones(5)).sample((3,)).shape == (3,)
    assert c.enumerate_support().shape == (5, 4) and c.enumerate_support(False).shape == (5, 1)
    assert c.enumerate_support()[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert c.log_prob(tinytorch.tensor([[0], [1]])).shape == (2, 4)  # value broadcasts against the batch
    oh = D.OneHotCategorical(tinytorch.ones(4, 5))
    s = oh.sample((3,))
    assert s.shape == (3, 4, 5) and s.sum(-1).eq(1).all() and s.dtype == tinytorch.float32
    assert oh.enumerate_support().shape == (5, 4, 5) and oh.enumerate_support(False).shape == (5, 1, 5)

    di = D.Dirichlet(tinytorch.ones(2, 3))
    assert di.batch_shape == (2,) and di.event_shape == (3,) and di.sample((4,)).shape == (4, 2, 3)
    assert D.Beta(tinytorch.ones(3), 2.0).sample((2,)).shape == (2, 3)
    mvn = D.MultivariateNormal(tinytorch.zeros(2, 3), tinytorch.eye(3))
    assert mvn.sample((5,)).shape == (5, 2, 3) and mvn.expand((4, 2)).sample().shape == (4, 2, 3)
    assert D.Bernoulli(0.3).sample((6,)).shape == (6,)
    assert D.Bernoulli(tinytorch.tensor([0.3, 0.6])).enumerate_support().tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert D.Poisson(tinytorch.ones(2)).sample((3,)).shape == (3, 2)
    assert D.Binomial(5, tinytorch.ones(2) * 0.5).sample((3,)).shape == (3, 2)
    assert D.Gamma(tinytorch.ones(2), 1.0).rsample((3,)).shape == (3, 2)
    assert D.Laplace(0.0, 1.0).rsample((3,)).shape == (3,)
    assert D.Exponential(tinytorch.ones(2)).rsample((3,)).shape == (3, 2)
    assert D.Uniform(0.0, tinytorch.ones(2)).rsample((3,)).shape == (3, 2)
    assert D.LogNormal(0.0, 1.0).expand((4,)).sample().shape == (4,)
    assert D.Normal(t64(0.0), 1.0).sample().dtype == F64  # numbers take the tensor argument's dtype
    with pytest.raises(TypeError):
        d.sample(5)  # sample_shape is a shape, as in PyTorch


def test_manual_seed_makes_sampling_reproducible():
    for make in (lambda: D.Normal(0.0, 1.0), lambda: D.Gamma(t64([0.5, 2.0]), 1.0),
                 lambda: D.Categorical(t64([0.2, 0.8])), lambda: D.Poisson(t64([3.0])),
                 lambda: D.Binomial(10, t64([0.4])), lambda: D.Dirichlet(t64([1.0, 2.0]))):
        tinytorch.manual_seed(123)
        a = make().sample((5,))
        tinytorch.manual_seed(123)
        b = make().sample((5,))
        assert tinytorch.equal(a, b)


def test_sample_moments_with_a_fixed_seed():
    tinytorch.manual_seed(0)
    n = 20000

    def moments(d, *shape):
        s = d.sample((n,)).double()
        return s.mean(0).numpy(), s.var(0).numpy()

    m, v = moments(D.Normal(t64([1.0, -2.0]), t64([0.5, 2.0])))
    np.testing.assert_allclose(m, [1.0, -2.0], atol=0.06)
    np.testing.assert_allclose(v, [0.25, 4.0], rtol=0.05)
    m, v = moments(D.Uniform(t64(-1.0), t64(3.0)))
    np.testing.assert_allclose([m, v], [1.0, 16 / 12], rtol=0.05)
    m, v = moments(D.Exponential(t64(2.0)))
    np.testing.assert_allclose([m, v], [0.5, 0.25], rtol=0.06)
    m, v = moments(D.Laplace(t64(1.0), t64(0.5)))
    np.testing.assert_allclose([m, v], [1.0, 0.5], rtol=0.06)
    m, v = moments(D.Gamma(t64([0.5, 4.0]), t64([1.0, 2.0])))
    np.testing.assert_allclose(m, [0.5, 2.0], rtol=0.05)
    np.testing.assert_allclose(v, [0.5, 1.0], rtol=0.08)
    m, v = moments(D.Beta(t64(2.0), t64(3.0)))
    np.testing.assert_allclose([m, v], [0.4, 0.04], rtol=0.05)
    m, _ = moments(D.Dirichlet(t64([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(m, [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    m, v = moments(D.Poisson(t64([0.5, 6.0])))
    np.testing.assert_allclose(m, [0.5, 6.0], rtol=0.05)
    np.testing.assert_allclose(v, [0.5, 6.0], rtol=0.07)
    m, v = moments(D.Binomial(10, t64(0.3)))
    np.testing.assert_allclose([m, v], [3.0, 2.1], rtol=0.05)
    m, _ = moments(D.Bernoulli(t64(0.3)))
    np.testing.assert_allclose(m, 0.3, atol=0.015)
    m, v = moments(D.LogNormal(t64(0.0), t64(0.5)))
    np.testing.assert_allclose([m, v], [math.exp(0.125), math.expm1(0.25) * math.exp(0.25)], rtol=0.06)
    freq = np.bincount(D.Categorical(t64([0.1, 0.0, 0.6, 0.3])).sample((n,)).numpy(), minlength=4) / n
    np.testing.assert_allclose(freq, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    assert freq[1] == 0  # a zero-probability class is never drawn
    A = np.array([[1.0, 0.0], [0.6, 0.8]])
    s = D.MultivariateNormal(t64([1.0, -1.0]), scale_tril=t64(A)).sample((n,)).numpy()
    np.testing.assert_allclose(s.mean(0), [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(np.cov(s.T), A @ A.T, atol=0.06)


def test_sample_is_outside_the_graph_and_rsample_inside():
    loc = t64([0.0, 1.0], requires_grad=True)
    d = D.Normal(loc, 1.0)
    assert not d.sample().requires_grad
    assert d.rsample().requires_grad
    assert not D.Gamma(loc.exp(), 1.0).sample().requires_grad
    for d, has in ((D.Normal(0.0, 1.0), True), (D.Uniform(0.0, 1.0), True), (D.Exponential(1.0), True),
                   (D.Laplace(0.0, 1.0), True), (D.Gamma(1.0, 1.0), True), (D.Beta(1.0, 1.0), True),
                   (D.Dirichlet(tinytorch.ones(2)), True), (D.LogNormal(0.0, 1.0), True),
                   (D.MultivariateNormal(tinytorch.zeros(2), tinytorch.eye(2)), True),
                   (D.Bernoulli(0.5), False), (D.Categorical(tinytorch.ones(2)), False),
                   (D.Poisson(1.0), False), (D.Binomial(2, tinytorch.tensor(0.5)), False),
                   (D.OneHotCategorical(tinytorch.ones(2)), False)):
        assert d.has_rsample is has, type(d).__name__
    with pytest.raises(NotImplementedError):
        D.Bernoulli(0.5).rsample()


# ------------------------------------------------------------------ gradients

def test_rsample_gradients_by_gradcheck():
    loc, scale = t64([0.3, -1.0], requires_grad=True), t64([1.2, 0.5], requires_grad=True)
    high = t64([2.0, 1.0], requires_grad=True)
    assert gradcheck(_seeded(lambda m, s: D.Normal(m, s).rsample((3,))), (loc, scale))
    assert gradcheck(_seeded(lambda lo, hi: D.Uniform(lo, hi).rsample((3,))), (loc, high))
    assert gradcheck(_seeded(lambda m, s: D.LogNormal(m, s).rsample((3,))), (loc, scale))
    assert gradcheck(_seeded(lambda m, s: D.Laplace(m, s).rsample((3,))), (loc, scale))
    assert gradcheck(_seeded(lambda r: D.Exponential(r).rsample((3,))), (scale,))
    L = t64([[1.0, 0.0], [0.4, 0.8]], requires_grad=True)
    assert gradcheck(_seeded(lambda m, A: D.MultivariateNormal(m, scale_tril=A.tril()).rsample((3,))), (loc, L))
    tanh_normal = _seeded(lambda m, s: D.TransformedDistribution(
        D.Normal(m, s), [transforms.TanhTransform(), transforms.AffineTransform(1.0, 2.0)]).rsample((3,)))
    assert gradcheck(tanh_normal, (loc, scale))


def test_gamma_rsample_gradient_is_the_implicit_reparameterization():
    # E[x] = alpha / rate, so the mean of dx/dalpha over samples is 1 / rate; for Beta, d/da a/(a+b) = b/(a+b)^2
    tinytorch.manual_seed(0)
    a, r = t64([0.5, 3.0], requires_grad=True), t64([2.0, 1.0], requires_grad=True)
    D.Gamma(a, r).rsample((20000,)).mean(0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.5, 1.0], rtol=0.03)
    np.testing.assert_allclose(r.grad.numpy(), [-0.125, -3.0], rtol=0.03)
    a, b = t64([0.5, 3.0], requires_grad=True), t64([2.0, 1.0], requires_grad=True)
    D.Beta(a, b).rsample((20000,)).mean(0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [2 / 6.25, 1 / 16], rtol=0.05)
    np.testing.assert_allclose(b.grad.numpy(), [-0.5 / 6.25, -3 / 16], rtol=0.05)
    # at a fixed CDF value u, x(alpha) = P^-1(alpha, u): its finite difference is the gradient
    a = np.array([0.3, 1.0, 2.5, 30.0])
    x = np.array([0.05, 1.0, 4.0, 25.0])
    u = gammainc_array(a, x)

    def inverse(alpha):
        lo, hi = np.zeros_like(x), np.full_like(x, 200.0)
        for _ in range(64):
            mid = (lo + hi) / 2
            below = gammainc_array(alpha, mid) < u
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return (lo + hi) / 2
    h = 1e-4 * a
    np.testing.assert_allclose(standard_gamma_grad(x, a), (inverse(a + h) - inverse(a - h)) / (2 * h), rtol=1e-5)


def test_gammainc_matches_closed_forms():
    x = np.array([0.01, 0.5, 1.0, 3.0, 10.0, 40.0])
    np.testing.assert_allclose(gammainc_array(np.ones(6), x), -np.expm1(-x), rtol=1e-13)
    np.testing.assert_allclose(gammainc_array(np.full(6, 0.5), x), _erf(np.sqrt(x)), rtol=1e-12)
    three = 1 - np.exp(-x) * (1 + x + x ** 2 / 2)
    np.testing.assert_allclose(gammainc_array(np.full(6, 3.0), x), three, rtol=1e-10, atol=1e-15)
    assert gammainc_array(np.array([2.0]), np.array([0.0]))[0] == 0.0
    assert gammainc_array(np.array([2.0]), np.array([np.inf]))[0] == 1.0


def test_log_prob_gradients_by_gradcheck():
    a, b = t64([0.7, 2.5], requires_grad=True), t64([1.5, 0.8], requires_grad=True)
    x = t64([0.3, 0.6])
    assert gradcheck(lambda m, s: D.Normal(m, s).log_prob(x), (a, b))
    assert gradgradcheck(lambda m, s: D.Normal(m, s).log_prob(x), (a, b))
    assert gradcheck(lambda m, s: D.Normal(m, s).cdf(x), (a, b))
    assert gradcheck(lambda m, s: D.Laplace(m, s).log_prob(x), (a, b))
    assert gradcheck(lambda r: D.Exponential(r).log_prob(x), (a,))
    assert gradcheck(lambda m, s: D.LogNormal(m, s).log_prob(x), (a, b))
    assert gradcheck(lambda c1, c0: D.Beta(c1, c0).log_prob(x), (a, b))
    assert gradcheck(lambda c, r: D.Gamma(c, r).log_prob(x), (a, b))
    assert gradcheck(lambda c, r: D.Gamma(c, r).cdf(x), (a, b))
    assert gradcheck(lambda c, r: D.Gamma(c, r).entropy(), (a, b))
    assert gradcheck(lambda c: D.Dirichlet(c).log_prob(t64([0.2, 0.8])), (a,))
    assert gradcheck(lambda r: D.Poisson(r).log_prob(t64([0.0, 3.0])), (a,))
    p = t64([0.3, 0.6], requires_grad=True)
    assert gradcheck(lambda q: D.Bernoulli(probs=q).log_prob(t64([1.0, 0.0])), (p,))
    assert gradcheck(lambda q: D.Bernoulli(logits=q).entropy(), (a,))
    assert gradcheck(lambda q: D.Binomial(6, probs=q).log_prob(t64([2.0, 5.0])), (p,))
    logits = t64([[0.1, -0.3, 1.2], [0.0, 0.5, -1.0]], requires_grad=True)
    assert gradcheck(lambda z: D.Categorical(logits=z).log_prob(tinytorch.tensor([2, 0])), (logits,))
    assert gradcheck(lambda z: D.Categorical(logits=z).entropy(), (logits,))
    assert gradcheck(lambda z: D.Categorical(probs=z.exp()).log_prob(tinytorch.tensor([1, 1])), (logits,))


def test_multivariate_normal_gradients_by_gradcheck():
    loc = t64([0.3, -1.0], requires_grad=True)
    v = t64([[0.1, 0.2], [1.0, -2.0]])
    L = t64([[1.0, 0.0], [0.4, 0.8]], requires_grad=True)
    C = t64([[2.0, 0.3], [0.3, 1.0]], requires_grad=True)
    assert gradcheck(lambda m, A: D.MultivariateNormal(m, scale_tril=A.tril()).log_prob(v), (loc, L))
    assert gradgradcheck(lambda m, A: D.MultivariateNormal(m, scale_tril=A.tril()).log_prob(v), (loc, L))
    assert gradcheck(lambda m, S: D.MultivariateNormal(m, covariance_matrix=(S + S.mT) / 2).log_prob(v), (loc, C))
    assert gradcheck(lambda m, S: D.MultivariateNormal(m, precision_matrix=(S + S.mT) / 2).log_prob(v), (loc, C))
    assert gradcheck(lambda m, A: D.MultivariateNormal(m, scale_tril=A.tril()).entropy(), (loc, L))


# ------------------------------------------------------------------ validation

def test_invalid_parameters_raise_pytorchs_value_error():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution "
                                         r"Normal\(loc: (tiny)?torch.Size\(\[2\]\), scale: (tiny)?torch.Size\(\[2\]\)\) "
                                         r"to satisfy the constraint GreaterThan\(lower_bound=0.0\), but found "
                                         r"invalid values:\ntensor"):
        D.Normal(tinytorch.zeros(2), tinytorch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="constraint Interval\\(lower_bound=0.0, upper_bound=1.0\\)"):
        D.Bernoulli(probs=tinytorch.tensor([1.5]))
    with pytest.raises(ValueError, match="constraint Simplex\\(\\)"):
        D.Categorical(probs=tinytorch.tensor([-0.5, 1.0]))
    with pytest.raises(ValueError, match="constraint IntegerGreaterThan\\(lower_bound=0\\)"):
        D.Binomial(tinytorch.tensor([2.5]), probs=tinytorch.tensor([0.5]))
    with pytest.raises(ValueError, match=r"parameter low .* constraint LessThan\(upper_bound=tensor\(\[0.\]\)\)"):
        D.Uniform(tinytorch.tensor([1.0]), tinytorch.tensor([0.0]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli(probs=0.5, logits=0.0)
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Categorical()
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional."):
        D.Categorical(probs=tinytorch.tensor(1.0))
    with pytest.raises(ValueError, match="`concentration` parameter must be at least one-dimensional."):
        D.Dirichlet(tinytorch.tensor(1.0))
    with pytest.raises(ValueError, match="Input arguments must all be instances of Number"):
        D.Normal("a", 1.0)
    D.Normal(tinytorch.zeros(2), tinytorch.tensor([1.0, -1.0]), validate_args=False)  # no check


def test_invalid_values_raise_pytorchs_value_error():
    d = D.Normal(tinytorch.zeros(3), tinytorch.ones(3))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        d.log_prob(0.5)
    with pytest.raises(ValueError, match=r"Value is not broadcastable with batch_shape\+event_shape: "
                                         r"(tiny)?torch.Size\(\[2\]\) vs (tiny)?torch.Size\(\[3\]\)."):
        d.log_prob(tinytorch.zeros(2))
    mvn = D.MultivariateNormal(tinytorch.zeros(3), tinytorch.eye(3))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        mvn.log_prob(tinytorch.zeros(2))
    with pytest.raises(ValueError, match=r"Expected value argument \(Tensor of shape \(2,\)\) to be within the "
                                         r"support \(GreaterThanEq\(lower_bound=0.0\)\) of the distribution "
                                         r"Exponential\(rate: (tiny)?torch.Size\(\[2\]\)\), but found invalid values"):
        D.Exponential(tinytorch.ones(2)).log_prob(tinytorch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="IntegerInterval\\(lower_bound=0, upper_bound=2\\)"):
        D.Categorical(tinytorch.ones(3)).log_prob(tinytorch.tensor(3))
    with pytest.raises(ValueError, match="support \\(Boolean\\(\\)\\)"):
        D.Bernoulli(0.5).log_prob(tinytorch.tensor(0.5))
    assert D.Bernoulli(0.5, validate_args=False).log_prob(tinytorch.tensor(0.5)).shape == ()


def test_set_default_validate_args():
    try:
        D.Distribution.set_default_validate_args(False)
        d = D.Normal(tinytorch.zeros(1), tinytorch.tensor([-1.0]))
        assert d.scale.item() == -1.0
        assert D.Normal(0.0, 1.0, validate_args=True)._validate_args
        with pytest.raises(ValueError):
            D.Normal(0.0, -1.0, validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")
    d = D.Normal(tinytorch.zeros(2), tinytorch.ones(2), validate_args=False)
    assert not d.expand((3, 2))._validate_args  # expand keeps the setting


def test_lazy_probs_and_logits():
    d = D.Categorical(logits=tinytorch.tensor([0.0, 0.0]))
    assert "probs" not in d.__dict__
    np.testing.assert_allclose(d.probs.numpy(), [0.5, 0.5])
    assert "probs" in d.__dict__  # computed once, then stored
    # Size prints as PyTorch's (torch.Size) or under tinytorch's own name, depending on the Size repr in use
    assert repr(d).replace("tinytorch.", "torch.") == "Categorical(probs: torch.Size([2]), logits: torch.Size([2]))"
    b = D.Bernoulli(logits=tinytorch.tensor([0.2, -0.1], requires_grad=True))
    with tinytorch.no_grad():
        probs = b.probs
    assert probs.requires_grad  # lazy parameters are computed with grad enabled, as in PyTorch


def test_straight_through_one_hot_passes_gradients_to_probs():
    p = t64([0.2, 0.3, 0.5], requires_grad=True)
    d = D.OneHotCategoricalStraightThrough(probs=p)
    s = d.rsample((4,))
    assert s.shape == (4, 3) and ((s.detach() == 0) | (s.detach() == 1)).all()
    (s * t64([1.0, 2.0, 3.0])).sum().backward()
    assert p.grad is not None and np.abs(p.grad.numpy()).sum() > 0


def test_utils():
    from tinytorch.distributions import utils
    a, b = utils.broadcast_all(1.0, t64([[0.0], [1.0]]))
    assert a.shape == b.shape == (2, 1) and a.dtype == F64
    assert utils.broadcast_all(1.0, 2.0)[0].dtype == tinytorch.get_default_dtype()
    np.testing.assert_allclose(utils.clamp_probs(tinytorch.tensor([0.0, 0.5, 1.0])).numpy(),
                               [np.finfo(np.float32).eps, 0.5, 1 - np.finfo(np.float32).eps], rtol=0)
    np.testing.assert_allclose(utils.probs_to_logits(t64([0.2, 0.8]), is_binary=True).numpy(),
                               np.log([0.25, 4.0]), rtol=1e-12)
    np.testing.assert_allclose(utils.logits_to_probs(t64([0.0, math.log(3.0)])).numpy(), [0.25, 0.75], rtol=1e-12)
    m = t64(np.arange(9.0).reshape(3, 3))
    assert utils.tril_matrix_to_vec(m).tolist() == [0.0, 3.0, 4.0, 6.0, 7.0, 8.0]
    assert utils.tril_matrix_to_vec(m, -1).tolist() == [3.0, 6.0, 7.0]
    np.testing.assert_array_equal(utils.vec_to_tril_matrix(t64([[1.0, 2.0, 3.0]])).numpy(),
                                  [[[1.0, 0.0], [2.0, 3.0]]])
    np.testing.assert_array_equal(utils.vec_to_tril_matrix(t64([1.0, 2.0, 3.0]), -1).numpy(),
                                  [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 3.0, 0.0]])
    with pytest.raises(ValueError, match="cannot be expressed as the lower triangular part"):
        utils.vec_to_tril_matrix(t64([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"diag \(3\) provided is outside \[-3, 2\]"):
        utils.tril_matrix_to_vec(m, 3)
    with pytest.warns(FutureWarning, match="sample_n"):
        assert D.Normal(0.0, 1.0).sample_n(4).shape == (4,)


# ------------------------------------------------------------------ transforms and constraints

def test_transforms_invert_and_give_log_det_jacobians():
    x = t64([-2.0, -0.3, 0.0, 0.7, 3.0])
    for t, deriv in ((transforms.ExpTransform(), np.exp), (transforms.SigmoidTransform(),
                     lambda v: np.exp(-v) / (1 + np.exp(-v)) ** 2),
                     (transforms.TanhTransform(), lambda v: 1 - np.tanh(v) ** 2),
                     (transforms.AffineTransform(1.0, -2.5), lambda v: np.full_like(v, 2.5)),
                     (transforms.AffineTransform(t64(0.5), t64([1.0, 2.0, 3.0, 4.0, 5.0])),
                      lambda v: np.array([1.0, 2.0, 3.0, 4.0, 5.0]))):
        y = t(x)
        _close(t.inv(y), x.numpy(), rtol=1e-9, atol=1e-12)
        _close(t.log_abs_det_jacobian(x, y), np.log(deriv(x.numpy())), rtol=1e-9)
        _close(t.inv.log_abs_det_jacobian(y, x), -np.log(deriv(x.numpy())), rtol=1e-9)
        assert t.inv.inv is t and t.bijective
    assert transforms.ExpTransform() == transforms.ExpTransform() and transforms.ExpTransform().sign == 1
    assert transforms.AffineTransform(0.0, -2.0).sign == -1
    assert transforms.AffineTransform(0.0, 2.0) == transforms.AffineTransform(0.0, 2.0)
    assert transforms.AffineTransform(0.0, 2.0) != transforms.AffineTransform(0.0, 3.0)
    assert transforms.AffineTransform(0.0, t64([1.0, 2.0]), event_dim=1).log_abs_det_jacobian(
        t64([[0.0, 0.0]]), None).numpy().tolist() == [math.log(2.0)]
    cached = transforms.ExpTransform(cache_size=1)
    y = cached(x)
    assert cached.inv(y) is x  # the cached input, exactly
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        transforms.ExpTransform(cache_size=2)
    compose = transforms.ComposeTransform([transforms.ExpTransform(), transforms.AffineTransform(1.0, 2.0)])
    _close(compose(x), 1 + 2 * np.exp(x.numpy()))
    _close(compose.inv(compose(x)), x.numpy(), rtol=1e-9, atol=1e-12)
    _close(compose.log_abs_det_jacobian(x, compose(x)), x.numpy() + math.log(2.0))
    assert transforms.identity_transform(x) is x


def test_transformed_distribution_changes_variables():
    base = D.Normal(t64([0.0, 1.0]), t64([1.0, 2.0]))
    # an affine map of a normal is a normal
    d = D.TransformedDistribution(base, [transforms.AffineTransform(3.0, -2.0)])
    want = D.Normal(t64([3.0, 1.0]), t64([2.0, 4.0]))
    v = t64([0.5, -1.0])
    _close(d.log_prob(v), want.log_prob(v).numpy())
    # a decreasing map flips the cdf
    _close(d.cdf(v), want.cdf(v).numpy())
    assert d.batch_shape == (2,) and d.event_shape == () and d.has_rsample
    # tanh-squashed normal: log p(y) = log N(atanh y) - log(1 - y^2)
    sq = D.TransformedDistribution(base, transforms.TanhTransform())
    y = np.array([0.3, -0.9])
    z = np.arctanh(y)
    want = -(z - [0.0, 1.0]) ** 2 / (2 * np.array([1.0, 4.0])) - np.log([1.0, 2.0]) - 0.5 * math.log(2 * math.pi)
    _close(sq.log_prob(t64(y)), want - np.log1p(-y ** 2), rtol=1e-9)
    assert sq.sample((3,)).abs().max() < 1
    assert sq.expand((4, 2)).sample().shape == (4, 2)
    with pytest.raises(ValueError, match="transforms must be a Transform or list"):
        D.TransformedDistribution(base, "exp")


def test_constraints_check_values():
    v = tinytorch.tensor([-1.0, 0.0, 0.5, 1.0, float("nan")])
    assert constraints.real.check(v).tolist() == [True, True, True, True, False]
    assert constraints.positive.check(v).tolist() == [False, False, True, True, False]
    assert constraints.nonnegative.check(v).tolist() == [False, True, True, True, False]
    assert constraints.unit_interval.check(v).tolist() == [False, True, True, True, False]
    assert constraints.boolean.check(v).tolist() == [False, True, False, True, False]
    assert constraints.greater_than(0.5).check(v).tolist() == [False, False, False, True, False]
    assert constraints.interval(-1.0, 0.0).check(v).tolist() == [True, True, False, False, False]
    assert constraints.half_open_interval(-1.0, 1.0).check(v).tolist() == [True, True, True, False, False]
    assert constraints.less_than(0.5).check(v).tolist() == [True, True, False, False, False]
    assert constraints.nonnegative_integer.check(tinytorch.tensor([0.0, 2.0, 1.5, -1.0])).tolist() == \
        [True, True, False, False]
    assert constraints.positive_integer.check(tinytorch.tensor([0.0, 2.0])).tolist() == [False, True]
    assert constraints.integer_interval(0, 3).check(tinytorch.tensor([0, 3, 4])).tolist() == [True, True, False]
    assert constraints.simplex.check(tinytorch.tensor([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]])).tolist() == \
        [True, False, False]
    assert constraints.one_hot.check(tinytorch.tensor([[0.0, 1.0], [1.0, 1.0]])).tolist() == [True, False]
    assert constraints.real_vector.check(tinytorch.tensor([[0.0, float("nan")], [1.0, 2.0]])).tolist() == \
        [False, True]
    m = tinytorch.tensor([[[1.0, 0.0], [2.0, 3.0]], [[1.0, 1.0], [0.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]]])
    assert constraints.lower_triangular.check(m).tolist() == [True, False, True]
    assert constraints.lower_cholesky.check(m).tolist() == [True, False, False]
    spd = tinytorch.tensor([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]]])
    assert constraints.positive_definite.check(spd).tolist() == [True, False]
    assert constraints.positive_semidefinite.check(tinytorch.tensor([[1.0, 1.0], [1.0, 1.0]])).item()
    assert constraints.symmetric.check(spd).tolist() == [True, True]
    assert constraints.square.check(tinytorch.zeros(2, 3)).item() is False
    assert constraints.independent(constraints.positive, 1).check(tinytorch.tensor([[1.0, 2.0], [1.0, 0.0]])) \
        .tolist() == [True, False]
    assert constraints.cat([constraints.positive, constraints.real], lengths=[1, 1]).check(
        tinytorch.tensor([-1.0, -1.0])).tolist() == [False, True]
    assert constraints.stack([constraints.positive, constraints.real]).check(
        tinytorch.tensor([-1.0, -1.0])).tolist() == [False, True]
    assert repr(constraints.positive) == "GreaterThan(lower_bound=0.0)"
    assert repr(constraints.independent(constraints.real, 1)) == "IndependentConstraint(Real(), 1)"
    assert constraints.simplex.event_dim == 1 and constraints.positive_definite.event_dim == 2
    assert constraints.boolean.is_discrete and not constraints.real.is_discrete
    assert constraints.is_dependent(constraints.dependent) and not constraints.is_dependent(constraints.real)
    assert constraints.is_dependent(D.Uniform.support)  # a dependent property on the class
    assert repr(D.Uniform(0.0, 2.0).support) == "Interval(lower_bound=0.0, upper_bound=2.0)"
    with pytest.raises(ValueError, match="Cannot determine validity of dependent constraint"):
        constraints.dependent.check(v)


# ------------------------------------------------------------------ KL divergence

def test_kl_divergences_match_the_closed_forms():
    m1, s1, m2, s2 = np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([0.5, 0.0]), np.array([2.0, 1.0])
    kl = D.kl_divergence(D.Normal(t64(m1), t64(s1)), D.Normal(t64(m2), t64(s2)))
    _close(kl, np.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5)
    ind = D.kl_divergence(D.Independent(D.Normal(t64(m1), t64(s1)), 1), D.Independent(D.Normal(t64(m2), t64(s2)), 1))
    _close(ind, (np.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5).sum())
    ln = D.kl_divergence(D.LogNormal(t64(m1), t64(s1)), D.LogNormal(t64(m2), t64(s2)))
    _close(ln, kl.numpy())  # KL is invariant under the shared bijection

    p, q = np.array([[0.2, 0.3, 0.5], [0.0, 0.5, 0.5]]), np.array([[0.4, 0.4, 0.2], [0.2, 0.0, 0.8]])
    want = [(p[0] * np.log(p[0] / q[0])).sum(), math.inf]  # q has a zero where p has mass
    _close(D.kl_divergence(D.Categorical(t64(p)), D.Categorical(t64(q))), want)
    _close(D.kl_divergence(D.OneHotCategorical(t64(p)), D.OneHotCategorical(t64(q))), want)

    bp, bq = np.array([0.2, 0.0, 1.0]), np.array([0.4, 0.3, 0.5])
    bern = bp * np.log(np.where(bp > 0, bp, 1) / bq) + (1 - bp) * np.log(np.where(bp < 1, 1 - bp, 1) / (1 - bq))
    _close(D.kl_divergence(D.Bernoulli(t64(bp)), D.Bernoulli(t64(bq))), bern, rtol=1e-9)

    _close(D.kl_divergence(D.Uniform(t64([0.0, 0.0]), t64([1.0, 2.0])), D.Uniform(t64([-1.0, 0.5]), t64([2.0, 3.0]))),
           [math.log(3.0), math.inf])
    r1, r2 = np.array([0.5, 2.0]), np.array([1.0, 0.1])
    _close(D.kl_divergence(D.Exponential(t64(r1)), D.Exponential(t64(r2))), np.log(r1 / r2) + r2 / r1 - 1)
    d = np.abs(m1 - m2)
    _close(D.kl_divergence(D.Laplace(t64(m1), t64(s1)), D.Laplace(t64(m2), t64(s2))),
           np.log(s2 / s1) + d / s2 + s1 / s2 * np.exp(-d / s1) - 1)

    A = np.array([[1.0, 0.0], [0.4, 0.8]])
    B = np.array([[2.0, 0.0], [-0.3, 0.5]])
    c1, c2 = A @ A.T, B @ B.T
    mu1, mu2 = np.array([0.0, 1.0]), np.array([1.0, -1.0])
    inv2 = np.linalg.inv(c2)
    want = 0.5 * (np.trace(inv2 @ c1) + (mu2 - mu1) @ inv2 @ (mu2 - mu1) - 2
                  + np.linalg.slogdet(c2)[1] - np.linalg.slogdet(c1)[1])
    got = D.kl_divergence(D.MultivariateNormal(t64(mu1), covariance_matrix=t64(c1)),
                          D.MultivariateNormal(t64(mu2), scale_tril=t64(B)))
    _close(got, want, rtol=1e-9)
    with pytest.raises(ValueError, match="different event shapes"):
        D.kl_divergence(D.MultivariateNormal(t64(mu1), t64(c1)), D.MultivariateNormal(t64([0.0]), t64([[1.0]])))


def test_kl_divergences_with_gamma_functions_match_the_closed_forms():
    a1, b1, a2, b2 = np.array([0.5, 2.0]), np.array([1.0, 3.0]), np.array([1.5, 1.0]), np.array([2.0, 0.3])
    want = ((a1 - a2) * _digamma(a1) - _lgamma(a1) + _lgamma(a2) + a2 * (np.log(b1) - np.log(b2))
            + a1 * (b2 - b1) / b1)
    _close(D.kl_divergence(D.Gamma(t64(a1), t64(b1)), D.Gamma(t64(a2), t64(b2))), want, rtol=1e-8)

    def dirichlet_kl(p, q):
        p0 = p.sum(-1)
        return (_lgamma(p0) - _lgamma(q.sum(-1)) - (_lgamma(p) - _lgamma(q)).sum(-1)
                + ((p - q) * (_digamma(p) - _digamma(p0)[..., None])).sum(-1))
    p, q = np.array([[0.5, 2.0, 1.0]]), np.array([[1.5, 1.0, 3.0]])
    _close(D.kl_divergence(D.Dirichlet(t64(p)), D.Dirichlet(t64(q))), dirichlet_kl(p, q), rtol=1e-8)
    _close(D.kl_divergence(D.Beta(t64(a1), t64(b1)), D.Beta(t64(a2), t64(b2))),
           dirichlet_kl(np.stack([a1, b1], -1), np.stack([a2, b2], -1)), rtol=1e-8)
    pr, qr = np.array([0.5, 2.0]), np.array([1.0, 0.1])
    _close(D.kl_divergence(D.Poisson(t64(pr)), D.Poisson(t64(qr))), pr * np.log(pr / qr) - pr + qr)
    a, b = t64([0.7, 2.5], requires_grad=True), t64([1.5, 0.8], requires_grad=True)
    assert gradcheck(lambda x, y: D.kl_divergence(D.Gamma(x, y), D.Gamma(y, x)), (a, b))
    assert gradcheck(lambda x, y: D.kl_divergence(D.Beta(x, y), D.Beta(y, x)), (a, b))


def test_register_kl_and_dispatch():
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and "
                                                  "q type Categorical"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(tinytorch.ones(2)))

    class MyNormal(D.Normal):
        pass

    # a subclass uses its parent's rule until it registers its own
    _close(D.kl_divergence(MyNormal(t64(0.0), t64(1.0)), D.Normal(t64(1.0), t64(1.0))), 0.5)

    @D.register_kl(MyNormal, D.Normal)
    def _kl_mine(p, q):
        return tinytorch.tensor(42.0)

    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0)).item() == 42.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), MyNormal(1.0, 1.0)).item() == 0.5
    # exponential families of one type without a registered rule use the Bregman divergence
    with pytest.raises(NotImplementedError, match="cross KL-divergence between different exponential families"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(1.0))
    # a registered cross-family pair whose supports do not nest
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Exponential(1.0)).item() == math.inf


# ------------------------------------------------------------------ PyTorch comparison

def _cases(m, dt):
    """(name, distribution, value to score) built the same way in tinytorch and in torch."""
    Dm = m.distributions

    def T(x, dtype=None):
        return m.tensor(np.asarray(x), dtype=getattr(m, dtype or dt))
    trans = Dm.transforms
    return [
        ("Normal", Dm.Normal(T([0.0, 1.0]), T([1.0, 2.0])), T([0.3, -1.0])),
        ("Uniform", Dm.Uniform(T([0.0, 1.0]), T([1.0, 3.0])), T([0.3, 2.0])),
        ("Exponential", Dm.Exponential(T([0.5, 2.0])), T([0.3, 2.0])),
        ("Laplace", Dm.Laplace(T([0.0, 1.0]), T([1.0, 2.0])), T([0.3, -1.0])),
        ("Gamma", Dm.Gamma(T([0.5, 2.0]), T([1.0, 3.0])), T([0.3, 2.0])),
        ("Beta", Dm.Beta(T([0.5, 2.0]), T([1.5, 3.0])), T([0.3, 0.9])),
        ("Dirichlet", Dm.Dirichlet(T([[0.5, 2.0, 1.0], [1.0, 1.0, 3.0]])), T([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])),
        ("Bernoulli", Dm.Bernoulli(probs=T([0.3, 0.8])), T([1.0, 0.0])),
        ("BernoulliLogits", Dm.Bernoulli(logits=T([-0.3, 1.8])), T([1.0, 0.0])),
        ("Categorical", Dm.Categorical(probs=T([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]])), T([2, 1], "int64")),
        ("CategoricalLogits", Dm.Categorical(logits=T([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]])), T([2, 1], "int64")),
        ("OneHot", Dm.OneHotCategorical(probs=T([[0.2, 0.3, 0.5]])), T([[0.0, 0.0, 1.0]])),
        ("Poisson", Dm.Poisson(T([0.5, 4.0])), T([0.0, 3.0])),
        ("Binomial", Dm.Binomial(T([5.0, 5.0]), probs=T([0.3, 0.8])), T([2.0, 5.0])),
        ("BinomialLogits", Dm.Binomial(10, logits=T([0.3, -0.8])), T([2.0, 5.0])),
        ("LogNormal", Dm.LogNormal(T([0.0, 1.0]), T([1.0, 0.5])), T([0.3, 2.0])),
        ("Independent", Dm.Independent(Dm.Normal(T([[0.0, 1.0]]), T([[1.0, 2.0]])), 1), T([[0.3, -1.0]])),
        ("MVNScaleTril", Dm.MultivariateNormal(T([0.0, 1.0]), scale_tril=T([[1.0, 0.0], [0.5, 2.0]])),
         T([0.3, -1.0])),
        ("MVNCovariance", Dm.MultivariateNormal(T([0.0, 1.0]), covariance_matrix=T([[2.0, 0.5], [0.5, 1.0]])),
         T([[0.3, -1.0], [1.0, 1.0]])),
        ("MVNPrecision", Dm.MultivariateNormal(T([[0.0, 1.0], [1.0, 1.0]]), precision_matrix=T([[2.0, 0.5],
                                                                                               [0.5, 1.0]])),
         T([0.3, -1.0])),
        ("TanhAffine", Dm.TransformedDistribution(Dm.Normal(T([0.0, 1.0]), T([1.0, 2.0])),
                                                  [trans.TanhTransform(), trans.AffineTransform(1.0, 2.0)]),
         T([0.3, 2.5])),
        ("Sigmoid", Dm.TransformedDistribution(Dm.Normal(T([0.0, 1.0]), T([1.0, 2.0])),
                                               trans.SigmoidTransform()), T([0.3, 0.9])),
    ]


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


@torch_only
@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_distributions_match_pytorch(dt):
    import torch
    tol = 1e-9 if dt == "float64" else 2e-5
    for (name, a, v), (_, b, w) in zip(_cases(tinytorch, dt), _cases(torch, dt)):
        assert tuple(a.batch_shape) == tuple(b.batch_shape) and tuple(a.event_shape) == tuple(b.event_shape), name
        assert a.has_rsample == b.has_rsample and a.has_enumerate_support == b.has_enumerate_support, name
        got, want = a.log_prob(v), b.log_prob(w)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], name
        np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol, err_msg=name)
        for attr in ("mean", "variance", "stddev", "mode"):
            try:
                want = getattr(b, attr)
            except NotImplementedError:
                continue
            np.testing.assert_allclose(_np(getattr(a, attr)), _np(want), rtol=tol, atol=tol, err_msg=name + attr)
        try:
            want = b.entropy()
        except NotImplementedError:
            want = None
        if want is not None:
            np.testing.assert_allclose(_np(a.entropy()), _np(want), rtol=tol, atol=tol, err_msg=name + " entropy")
        for fn, arg in (("cdf", v), ("icdf", None)):
            try:
                probe = (w if fn == "cdf" else torch.full_like(w, 0.3, dtype=w.dtype if w.is_floating_point()
                                                                 else torch.float64))
                want = getattr(b, fn)(probe)
            except NotImplementedError:
                continue
            mine = v if fn == "cdf" else tinytorch.tensor(probe.numpy())
            np.testing.assert_allclose(_np(getattr(a, fn)(mine)), _np(want), rtol=tol, atol=tol, err_msg=name + fn)
        if b.has_enumerate_support:
            for expand in (True, False):
                np.testing.assert_allclose(_np(a.enumerate_support(expand)), _np(b.enumerate_support(expand)))
        s, t = a.sample((3,)), b.sample((3,))
        assert tuple(s.shape) == tuple(t.shape) and str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], name
        e, f = a.expand((4,) + tuple(a.batch_shape)), b.expand((4,) + tuple(b.batch_shape))
        assert tuple(e.batch_shape) == tuple(f.batch_shape)
        if name != "MVNCovariance":  # its value has a batch dim of its own
            np.testing.assert_allclose(_np(e.log_prob(v)), _np(f.log_prob(w)), rtol=tol, atol=tol, err_msg=name)
        assert repr(a).replace("tinytorch", "torch") == repr(b), name


@torch_only
def test_log_prob_gradients_match_pytorch():
    import torch
    rng = np.random.default_rng(1)
    specs = [
        ("Normal", 2, lambda m, p, q: m.distributions.Normal(p, q.exp()), [0.3, -1.0]),
        ("Gamma", 2, lambda m, p, q: m.distributions.Gamma(p.exp(), q.exp()), [0.3, 2.0]),
        ("Beta", 2, lambda m, p, q: m.distributions.Beta(p.exp(), q.exp()), [0.3, 0.9]),
        ("Laplace", 2, lambda m, p, q: m.distributions.Laplace(p, q.exp()), [0.3, -1.0]),
        ("Binomial", 2, lambda m, p, q: m.distributions.Binomial(7, logits=p + q), [2.0, 5.0]),
        ("Poisson", 2, lambda m, p, q: m.distributions.Poisson((p * q).exp()), [0.0, 3.0]),
        ("MVN", 2, lambda m, p, q: m.distributions.MultivariateNormal(
            p, covariance_matrix=m.eye(2, dtype=m.float64) + q.unsqueeze(-1) * q), [0.3, -1.0]),
    ]
    for name, n, make, value in specs:
        p0, q0 = rng.standard_normal(n), rng.standard_normal(n) * 0.3
        grads = []
        for m in (tinytorch, torch):
            p = m.tensor(p0, dtype=m.float64, requires_grad=True)
            q = m.tensor(q0, dtype=m.float64, requires_grad=True)
            d = make(m, p, q)
            (d.log_prob(m.tensor(value, dtype=m.float64)).sum() + d.entropy().sum()
             if name not in ("Binomial", "Poisson") else d.log_prob(m.tensor(value, dtype=m.float64)).sum()).backward()
            grads.append((p.grad.numpy(), q.grad.numpy()))
        np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-9, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-9, atol=1e-12, err_msg=name)


@torch_only
def test_kl_divergences_match_pytorch():
    import torch

    def pairs(m):
        Dm = m.distributions

        def T(x):
            return m.tensor(np.asarray(x), dtype=m.float64)
        return [
            (Dm.Normal(T([0.0, 1.0]), T([1.0, 2.0])), Dm.Normal(T([0.5, 0.0]), T([2.0, 1.0]))),
            (Dm.Categorical(T([[0.2, 0.3, 0.5], [0.0, 0.5, 0.5]])),
             Dm.Categorical(T([[0.4, 0.4, 0.2], [0.2, 0.0, 0.8]]))),
            (Dm.OneHotCategorical(T([[0.2, 0.3, 0.5]])), Dm.OneHotCategorical(T([[0.4, 0.4, 0.2]]))),
            (Dm.Bernoulli(T([0.2, 0.0, 1.0, 0.5])), Dm.Bernoulli(T([0.4, 0.3, 0.5, 1.0]))),
            (Dm.Uniform(T([0.0, 0.0]), T([1.0, 2.0])), Dm.Uniform(T([-1.0, 0.5]), T([2.0, 3.0]))),
            (Dm.Beta(T([0.5, 2.0]), T([1.0, 3.0])), Dm.Beta(T([1.5, 1.0]), T([2.0, 0.3]))),
            (Dm.Gamma(T([0.5, 2.0]), T([1.0, 3.0])), Dm.Gamma(T([1.5, 1.0]), T([2.0, 0.3]))),
            (Dm.Dirichlet(T([[0.5, 2.0, 1.0]])), Dm.Dirichlet(T([[1.5, 1.0, 3.0]]))),
            (Dm.MultivariateNormal(T([[0.0, 1.0], [1.0, 0.0]]), covariance_matrix=T([[2.0, 0.5], [0.5, 1.0]])),
             Dm.MultivariateNormal(T([1.0, 1.0]), scale_tril=T([[1.0, 0.0], [0.3, 0.7]]))),
            (Dm.Independent(Dm.Normal(T([[0.0, 1.0]]), T([[1.0, 2.0]])), 1),
             Dm.Independent(Dm.Normal(T([[1.0, 1.0]]), T([[2.0, 2.0]])), 1)),
            (Dm.Exponential(T([0.5, 2.0])), Dm.Exponential(T([1.0, 0.1]))),
            (Dm.Laplace(T([0.0, 1.0]), T([1.0, 2.0])), Dm.Laplace(T([0.5, 0.0]), T([2.0, 1.0]))),
            (Dm.Poisson(T([0.5, 2.0])), Dm.Poisson(T([1.0, 0.1]))),
            (Dm.Binomial(T([5.0, 6.0]), T([0.3, 0.4])), Dm.Binomial(T([5.0, 5.0]), T([0.5, 0.4]))),
            (Dm.LogNormal(T([0.0, 1.0]), T([1.0, 2.0])), Dm.LogNormal(T([0.5, 0.0]), T([2.0, 1.0]))),
        ]
    for (p, q), (pt, qt) in zip(pairs(tinytorch), pairs(torch)):
        got, want = D.kl_divergence(p, q), torch.distributions.kl_divergence(pt, qt)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, err_msg=type(p).__name__)
        if isinstance(p, D.ExponentialFamily) and not isinstance(p, (D.Bernoulli, D.Dirichlet)):
            np.testing.assert_allclose(_np(D.kl._kl_expfamily_expfamily(p, q)),
                                       _np(torch.distributions.kl._kl_expfamily_expfamily(pt, qt)), rtol=1e-8)


@torch_only
def test_gamma_reparameterization_gradient_matches_pytorch():
    import torch
    rng = np.random.default_rng(1)
    a = np.concatenate([rng.uniform(0.05, 0.5, 50), rng.uniform(0.5, 5, 50), rng.uniform(5, 200, 50)])
    x = rng.standard_gamma(a)
    want = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    np.testing.assert_allclose(standard_gamma_grad(x, a), want, rtol=2e-3)
    np.testing.assert_allclose(gammainc_array(a, x), torch.special.gammainc(torch.tensor(a), torch.tensor(x)).numpy(),
                               rtol=1e-8, atol=1e-9)
