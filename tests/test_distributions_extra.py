"""The distributions beyond the basic set (Cauchy ... VonMises), the transforms they are built from, and the
cross-family KL divergences: closed forms in float64 NumPy/math, Monte Carlo moments under a fixed seed, gradcheck
of log_prob/entropy/rsample, PyTorch's validation messages, and PyTorch's values when it is importable."""
import math

import numpy as np
import pytest

import tinytorch
from tinytorch import distributions as D
from tinytorch.autograd import gradcheck
from tinytorch.distributions import constraints, transforms

F64 = tinytorch.float64
EULER = 0.57721566490153286060
_lgamma = np.vectorize(math.lgamma)


def t64(x, requires_grad=False):
    return tinytorch.tensor(np.asarray(x, dtype=np.float64), dtype=F64, requires_grad=requires_grad)


def _close(got, want, rtol=1e-9, atol=1e-12):
    np.testing.assert_allclose(got.detach().numpy(), np.asarray(want, dtype=np.float64), rtol=rtol, atol=atol)


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


def _seeded(fn):
    def run(*args):
        tinytorch.manual_seed(0)
        return fn(*args)
    return run


X = np.array([0.3, 1.7, 4.0])


# ------------------------------------------------------------------ closed forms

def test_cauchy_and_half_cauchy_closed_forms():
    loc, scale = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.5, 3.0])
    d = D.Cauchy(t64(loc), t64(scale))
    z = (X - loc) / scale
    _close(d.log_prob(t64(X)), -np.log(np.pi * scale * (1 + z ** 2)))
    _close(d.cdf(t64(X)), np.arctan(z) / np.pi + 0.5)
    _close(d.icdf(d.cdf(t64(X))), X)
    _close(d.entropy(), np.log(4 * np.pi * scale))
    assert np.isnan(d.mean.numpy()).all() and np.isinf(d.variance.numpy()).all()
    h = D.HalfCauchy(t64(scale))
    _close(h.log_prob(t64(X)), np.log(2 / (np.pi * scale * (1 + (X / scale) ** 2))))
    _close(h.cdf(t64(X)), 2 / np.pi * np.arctan(X / scale))
    outside = D.HalfCauchy(t64(scale), validate_args=False).log_prob(t64([-1.0, -1.0, -1.0]))
    assert outside.numpy().tolist() == [-math.inf] * 3
    _close(h.entropy(), np.log(2 * np.pi * scale))


def test_half_normal_chi2_inverse_gamma_closed_forms():
    scale = np.array([1.0, 0.5, 3.0])
    h = D.HalfNormal(t64(scale))
    _close(h.log_prob(t64(X)), 0.5 * np.log(2 / np.pi) - np.log(scale) - X ** 2 / (2 * scale ** 2))
    _close(h.mean, scale * np.sqrt(2 / np.pi))
    _close(h.variance, scale ** 2 * (1 - 2 / np.pi))
    _close(h.entropy(), 0.5 * np.log(np.pi * scale ** 2 / 2) + 0.5)
    _close(h.icdf(h.cdf(t64(X))), X)
    df = np.array([1.0, 3.0, 7.5])
    c = D.Chi2(t64(df))
    k = df / 2
    _close(c.log_prob(t64(X)), (k - 1) * np.log(X) - X / 2 - k * np.log(2) - _lgamma(k))
    _close(c.df, df)
    _close(c.mean, df)
    _close(c.variance, 2 * df)
    a, b = np.array([0.5, 1.5, 3.0]), np.array([1.0, 2.0, 0.5])
    ig = D.InverseGamma(t64(a), t64(b))
    _close(ig.log_prob(t64(X)), a * np.log(b) - _lgamma(a) - (a + 1) * np.log(X) - b / X)
    _close(ig.mean, np.where(a > 1, b / (a - 1), np.inf))
    _close(ig.mode, b / (a + 1))
    _close(ig.variance, np.where(a > 2, b ** 2 / ((a - 1) ** 2 * (a - 2)), np.inf))
    _close(ig.entropy(), a + np.log(b * np.exp(_lgamma(a))) - (1 + a) * _digamma(a), rtol=1e-8)


def test_student_t_and_fisher_snedecor_closed_forms():
    df, loc, scale = np.array([0.8, 1.5, 5.0]), np.array([0.0, 1.0, -1.0]), np.array([1.0, 2.0, 0.5])
    d = D.StudentT(t64(df), t64(loc), t64(scale))
    y = (X - loc) / scale
    want = (_lgamma((df + 1) / 2) - _lgamma(df / 2) - 0.5 * np.log(df * np.pi) - np.log(scale)
            - (df + 1) / 2 * np.log1p(y ** 2 / df))
    _close(d.log_prob(t64(X)), want)
    mean = d.mean.numpy()
    assert np.isnan(mean[0]) and mean[1:].tolist() == [1.0, -1.0]
    var = d.variance.numpy()
    assert np.isnan(var[0]) and np.isinf(var[1]) and var[2] == pytest.approx(0.25 * 5 / 3)
    lbeta = _lgamma(df / 2) + math.lgamma(0.5) - _lgamma((df + 1) / 2)
    _close(d.entropy(), np.log(scale) + (df + 1) / 2 * (_digamma((df + 1) / 2) - _digamma(df / 2))
           + 0.5 * np.log(df) + lbeta, rtol=1e-8)
    d1, d2 = np.array([1.0, 3.0, 6.0]), np.array([1.5, 4.5, 6.0])
    f = D.FisherSnedecor(t64(d1), t64(d2))
    lbeta = _lgamma(d1 / 2) + _lgamma(d2 / 2) - _lgamma((d1 + d2) / 2)
    want = (0.5 * d1 * np.log(d1 / d2) + (d1 / 2 - 1) * np.log(X) - (d1 + d2) / 2 * np.log1p(d1 * X / d2) - lbeta)
    _close(f.log_prob(t64(X)), want)
    m = f.mean.numpy()
    assert np.isnan(m[0]) and m[1:] == pytest.approx(d2[1:] / (d2[1:] - 2))
    v = f.variance.numpy()
    want = 2 * d2 ** 2 * (d1 + d2 - 2) / (d1 * (d2 - 2) ** 2 * (d2 - 4))
    assert np.isnan(v[0]) and v[1:] == pytest.approx(want[1:])


def test_gumbel_weibull_pareto_kumaraswamy_closed_forms():
    loc, scale = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.5, 3.0])
    g = D.Gumbel(t64(loc), t64(scale))
    z = (X - loc) / scale
    _close(g.log_prob(t64(X)), -np.log(scale) - z - np.exp(-z))
    _close(g.cdf(t64(X)), np.exp(-np.exp(-z)))
    _close(g.mean, loc + scale * EULER)
    _close(g.variance, np.pi ** 2 / 6 * scale ** 2)
    _close(g.entropy(), np.log(scale) + EULER + 1)
    k = np.array([0.7, 1.5, 3.0])
    w = D.Weibull(t64(scale), t64(k))
    _close(w.log_prob(t64(X)), np.log(k / scale) + (k - 1) * np.log(X / scale) - (X / scale) ** k)
    _close(w.cdf(t64(X)), 1 - np.exp(-(X / scale) ** k))
    _close(w.mean, scale * np.exp(_lgamma(1 + 1 / k)))
    _close(w.variance, scale ** 2 * (np.exp(_lgamma(1 + 2 / k)) - np.exp(2 * _lgamma(1 + 1 / k))))
    _close(w.entropy(), EULER * (1 - 1 / k) + np.log(scale / k) + 1)
    alpha, xm = np.array([0.5, 1.5, 3.0]), np.array([0.2, 1.0, 0.1])
    p = D.Pareto(t64(xm), t64(alpha))
    _close(p.log_prob(t64(X)), np.log(alpha) + alpha * np.log(xm) - (alpha + 1) * np.log(X))
    _close(p.cdf(t64(X)), 1 - (xm / X) ** alpha)
    m = p.mean.numpy()
    assert np.isinf(m[0]) and m[1:] == pytest.approx(alpha[1:] * xm[1:] / (alpha[1:] - 1))
    _close(p.entropy(), np.log(xm / alpha) + 1 / alpha + 1)
    assert isinstance(p.support, type(constraints.greater_than_eq(0.0)))
    a, b = np.array([0.5, 2.0, 3.0]), np.array([2.0, 0.7, 3.0])
    u = np.array([0.2, 0.5, 0.9])
    kd = D.Kumaraswamy(t64(a), t64(b))
    _close(kd.log_prob(t64(u)), np.log(a * b) + (a - 1) * np.log(u) + (b - 1) * np.log1p(-u ** a))
    _close(kd.mean, b * np.exp(_lgamma(1 + 1 / a) + _lgamma(b) - _lgamma(1 + 1 / a + b)))
    _close(kd.entropy(), (1 - 1 / b) + (1 - 1 / a) * (_digamma(b + 1) + EULER) - np.log(a * b), rtol=1e-8)
    mode = kd.mode.numpy()
    assert np.isnan(mode[:2]).all() and mode[2] == pytest.approx((2 / 8) ** (1 / 3))


def test_discrete_closed_forms():
    p = np.array([0.2, 0.5, 1.0])
    k = np.array([0.0, 3.0, 0.0])
    g = D.Geometric(t64(p))
    # certain success: zero failures have probability one
    _close(g.log_prob(t64(k)), [math.log(0.2), 3 * math.log(0.5) + math.log(0.5), 0.0])
    _close(g.mean, 1 / p - 1)
    _close(g.variance, (1 / p - 1) / p)
    q = np.array([0.2, 0.5])
    _close(D.Geometric(t64(q)).entropy(), -(q * np.log(q) + (1 - q) * np.log1p(-q)) / q, rtol=1e-7)
    r, pr = np.array([2.0, 3.5]), np.array([0.3, 0.6])
    nb = D.NegativeBinomial(t64(r), t64(pr))
    kk = np.array([0.0, 4.0])
    want = _lgamma(kk + r) - _lgamma(kk + 1) - _lgamma(r) + r * np.log1p(-pr) + kk * np.log(pr)
    _close(nb.log_prob(t64(kk)), want)
    _close(nb.mean, r * pr / (1 - pr))
    _close(nb.variance, r * pr / (1 - pr) ** 2)
    probs = np.array([0.2, 0.3, 0.5])
    m = D.Multinomial(6, t64(probs))
    x = np.array([1.0, 2.0, 3.0])
    _close(m.log_prob(t64(x)), math.lgamma(7) - _lgamma(x + 1).sum() + (x * np.log(probs)).sum())
    _close(m.mean, 6 * probs)
    _close(m.variance, 6 * probs * (1 - probs))
    # the entropy by summing over every count vector of the support
    total = 0.0
    for a in range(7):
        for b in range(7 - a):
            c = 6 - a - b
            lp = math.lgamma(7) - math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(c + 1) + \
                a * math.log(0.2) + b * math.log(0.3) + c * math.log(0.5)
            total -= math.exp(lp) * lp
    _close(m.entropy(), total, rtol=1e-9)
    # a category of probability zero that is never drawn does not make the log-probability nan
    _close(D.Multinomial(3, t64([0.0, 1.0])).log_prob(t64([0.0, 3.0])), 0.0)


def test_continuous_bernoulli_closed_forms_and_taylor_region():
    lam = np.array([0.2, 0.4995, 0.8])
    d = D.ContinuousBernoulli(t64(lam))
    x = np.array([0.1, 0.5, 0.9])
    logc = np.log(2 * np.arctanh(1 - 2 * lam) / (1 - 2 * lam))
    _close(d.log_prob(t64(x)), logc + x * np.log(lam) + (1 - x) * np.log1p(-lam), rtol=1e-6)
    mean = lam / (2 * lam - 1) + 1 / (2 * np.arctanh(1 - 2 * lam))
    _close(d.mean, mean, rtol=1e-5)
    # the density integrates to one and its mean is the integral of x p(x) (midpoint rule)
    grid = (np.arange(20000) + 0.5) / 20000
    dens = np.exp(D.ContinuousBernoulli(t64(lam[:, None])).log_prob(t64(grid)).numpy())
    np.testing.assert_allclose(dens.mean(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose((grid * dens).mean(-1), d.mean.numpy(), rtol=1e-5)
    np.testing.assert_allclose(((grid - d.mean.numpy()[:, None]) ** 2 * dens).mean(-1), d.variance.numpy(), rtol=1e-4)
    ent = -(dens * np.log(dens)).mean(-1)
    np.testing.assert_allclose(d.entropy().numpy(), ent, rtol=1e-5, atol=1e-7)
    _close(d.icdf(d.cdf(t64(x))), x, rtol=1e-7)


def test_von_mises_closed_forms_and_sampler():
    loc, kappa = np.array([0.5, -1.0, 2.0]), np.array([0.3, 2.0, 20.0])
    d = D.VonMises(t64(loc), t64(kappa))
    th = np.array([0.1, -0.5, 3.0])
    i0 = np.array([np.i0(k) for k in kappa])
    _close(d.log_prob(t64(th)), kappa * np.cos(th - loc) - np.log(2 * np.pi * i0))
    grid = np.linspace(-np.pi, np.pi, 20001)[:-1]
    dens = np.exp(D.VonMises(t64(loc[:, None]), t64(kappa[:, None])).log_prob(t64(grid)).numpy())
    circ_var = 1 - np.abs((dens * np.exp(1j * grid)).mean(-1) * 2 * np.pi)
    np.testing.assert_allclose(d.variance.numpy(), circ_var, rtol=1e-6)
    tinytorch.manual_seed(3)
    s = d.sample((40000,)).numpy()
    assert s.shape == (40000, 3) and (s >= -np.pi).all() and (s < np.pi).all()
    resultant = np.exp(1j * s).mean(0)
    np.testing.assert_allclose(np.angle(resultant[1:]), loc[1:], atol=0.03)
    np.testing.assert_allclose(1 - np.abs(resultant), circ_var, atol=0.02)


def test_low_rank_multivariate_normal_matches_the_dense_one():
    rng = np.random.default_rng(0)
    loc = rng.normal(size=(2, 4))
    W = rng.normal(size=(4, 2))
    diag = rng.uniform(0.5, 1.5, 4)
    d = D.LowRankMultivariateNormal(t64(loc), t64(W), t64(diag))
    cov = W @ W.T + np.diag(diag)
    full = D.MultivariateNormal(t64(loc), covariance_matrix=t64(cov))
    x = t64(rng.normal(size=(3, 2, 4)))
    _close(d.log_prob(x), full.log_prob(x).numpy())
    _close(d.entropy(), full.entropy().numpy())
    _close(d.covariance_matrix, np.broadcast_to(cov, (2, 4, 4)))
    _close(d.precision_matrix, np.broadcast_to(np.linalg.inv(cov), (2, 4, 4)), rtol=1e-8)
    _close(d.scale_tril, np.broadcast_to(np.linalg.cholesky(cov), (2, 4, 4)))
    _close(d.variance, np.broadcast_to(np.diag(cov), (2, 4)))
    q = D.LowRankMultivariateNormal(t64(loc[::-1].copy()), t64(W * 0.5), t64(diag + 1))
    fq = D.MultivariateNormal(q.loc, covariance_matrix=q.covariance_matrix)
    for a, b in ((d, q), (full, q), (d, fq)):
        _close(D.kl_divergence(a, b), D.kl_divergence(full, fq).numpy(), rtol=1e-8)
    assert d.sample((5,)).shape == (5, 2, 4)
    with pytest.raises(ValueError, match="cov_factor must be a batch of matrices with shape 4 x m"):
        D.LowRankMultivariateNormal(t64(loc), t64(W[:3]), t64(diag))
    with pytest.raises(ValueError, match="Incompatible batch shapes"):
        D.LowRankMultivariateNormal(t64(loc), t64(np.ones((3, 4, 1))), t64(diag))


def test_mixture_same_family():
    rng = np.random.default_rng(1)
    w = rng.uniform(0.1, 1, (2, 3))
    mu, sd = rng.normal(size=(2, 3)), rng.uniform(0.5, 1, (2, 3))
    mix = D.MixtureSameFamily(D.Categorical(t64(w)), D.Normal(t64(mu), t64(sd)))
    p = w / w.sum(-1, keepdims=True)
    x = rng.normal(size=(5, 2))
    comp = -((x[..., None] - mu) ** 2) / (2 * sd ** 2) - np.log(sd) - 0.5 * np.log(2 * np.pi)
    _close(mix.log_prob(t64(x)), np.log((p * np.exp(comp)).sum(-1)))
    mean = (p * mu).sum(-1)
    _close(mix.mean, mean)
    _close(mix.variance, (p * (sd ** 2 + mu ** 2)).sum(-1) - mean ** 2)
    assert mix.batch_shape == (2,) and mix.sample((7,)).shape == (7, 2)
    assert mix.expand((4, 2)).sample().shape == (4, 2)
    assert repr(mix.support) == "MixtureSameFamilyConstraint(Real())"
    mvn = D.MixtureSameFamily(D.Categorical(t64(w)), D.Independent(D.Normal(t64(rng.normal(size=(2, 3, 4))),
                                                                            t64(np.ones((2, 3, 4)))), 1))
    assert mvn.event_shape == (4,) and mvn.sample((6,)).shape == (6, 2, 4) and mvn.mean.shape == (2, 4)
    with pytest.raises(ValueError, match="`mixture_distribution component` \\(3\\) does not equal"):
        D.MixtureSameFamily(D.Categorical(t64(w)), D.Normal(t64(np.zeros((2, 4))), 1.0))
    with pytest.raises(ValueError, match="needs to be an  instance of torch.distributions.Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(t64(mu), 1.0))


def test_relaxed_distributions_and_logistic_normal():
    temp = t64(0.5)
    probs = np.array([0.2, 0.7])
    rb = D.RelaxedBernoulli(temp, t64(probs))
    y = np.array([0.3, 0.9])
    logit = np.log(probs / (1 - probs))
    # density of sigmoid((logit + logistic noise) / T)
    z = np.log(y / (1 - y))
    d = logit - 0.5 * z
    want = np.log(0.5) + d - 2 * np.log1p(np.exp(d)) - np.log(y * (1 - y))
    _close(rb.log_prob(t64(y)), want)
    tinytorch.manual_seed(0)
    s = rb.sample((20000,)).numpy()
    assert ((s > 0) & (s < 1)).all()
    # as the temperature goes to zero, samples round to Bernoulli(probs) draws
    cold = D.RelaxedBernoulli(t64(0.01), t64(probs)).sample((20000,)).numpy()
    np.testing.assert_allclose((cold > 0.5).mean(0), probs, atol=0.02)
    rc = D.RelaxedOneHotCategorical(temp, t64([[0.2, 0.3, 0.5]]))
    s = rc.rsample((4,))
    assert s.shape == (4, 1, 3)
    _close(s.sum(-1), np.ones((4, 1)))
    assert np.isfinite(rc.log_prob(s).detach().numpy()).all()
    ln = D.LogisticNormal(t64([[0.1, -0.2]]), t64([[1.0, 0.5]]))
    s = ln.sample((5,))
    assert s.shape == (5, 1, 3) and ln.event_shape == (3,)
    _close(s.sum(-1), np.ones((5, 1)))
    # change of variables: log p(y) = log N(x) - log|det dy/dx| with x the stick-breaking preimage
    x = transforms.StickBreakingTransform().inv(s)
    base = D.Independent(D.Normal(t64([[0.1, -0.2]]), t64([[1.0, 0.5]])), 1)
    jac = transforms.StickBreakingTransform().log_abs_det_jacobian(x, s)
    _close(ln.log_prob(s), (base.log_prob(x) - jac).numpy())


# ------------------------------------------------------------------ transforms

def test_new_transforms_invert_and_have_log_det_jacobians():
    rng = np.random.default_rng(2)
    x = t64(rng.normal(size=(3, 4)))
    xp = x.abs() + 0.1
    for t, v in ((transforms.PowerTransform(t64(2.5)), xp), (transforms.SoftplusTransform(), x),
                 (transforms.StickBreakingTransform(), x),
                 (transforms.LowerCholeskyTransform(), t64(np.tril(rng.normal(size=(2, 3, 3))))),
                 (transforms.ReshapeTransform((4,), (2, 2)), x)):
        y = t(v)
        _close(t.inv(y), v.numpy(), rtol=1e-9)
    # one-dimensional log-dets against the derivative
    for t, v in ((transforms.PowerTransform(t64(2.5)), xp), (transforms.SoftplusTransform(), x)):
        h = 1e-6
        num = (t(v + h) - t(v - h)) / (2 * h)
        _close(t.log_abs_det_jacobian(v, t(v)), np.log(np.abs(num.numpy())), rtol=1e-6)
    # stick breaking: log|det J| of the map onto the first K-1 coordinates, by finite differences
    sb = transforms.StickBreakingTransform()
    v = t64(rng.normal(size=4))
    J = np.stack([((sb(v + t64(np.eye(4)[i] * 1e-6)) - sb(v - t64(np.eye(4)[i] * 1e-6))) / 2e-6).numpy()[:4]
                  for i in range(4)], -1)
    _close(sb.log_abs_det_jacobian(v, sb(v)), np.log(abs(np.linalg.det(J))), rtol=1e-6)
    assert sb.forward_shape((2, 4)) == (2, 5) and sb.inverse_shape((2, 5)) == (2, 4)
    assert transforms.AbsTransform()(t64([-2.0, 3.0])).numpy().tolist() == [2.0, 3.0]
    assert transforms.SoftmaxTransform()(x).sum(-1).numpy() == pytest.approx(np.ones(3))
    with pytest.raises(ValueError, match="different numbers of elements"):
        transforms.ReshapeTransform((4,), (3,))
    cdf = transforms.CumulativeDistributionTransform(D.Normal(t64(0.0), t64(1.0)))
    _close(cdf.inv(cdf(x)), x.numpy(), rtol=1e-9)
    assert transforms.PowerTransform(-1.0).sign == -1


# ------------------------------------------------------------------ validation

@pytest.mark.parametrize("make", [
    lambda: D.Cauchy(t64([0.0]), t64([-1.0])),
    lambda: D.HalfNormal(t64([0.0])),
    lambda: D.StudentT(t64([-1.0])),
    lambda: D.Weibull(t64([1.0]), t64([0.0])),
    lambda: D.Pareto(t64([1.0]), t64([-1.0])),
    lambda: D.NegativeBinomial(t64([1.0]), t64([1.0])),
    lambda: D.Kumaraswamy(t64([1.0]), t64([-1.0])),
    lambda: D.VonMises(t64([0.0]), t64([0.0])),
    lambda: D.FisherSnedecor(t64([0.0]), t64([1.0])),
])
def test_invalid_parameters_raise_value_error(make):
    with pytest.raises(ValueError, match="to satisfy the constraint"):
        make()


def test_invalid_samples_and_geometric_zero_probability():
    with pytest.raises(ValueError, match="to be positive but found invalid values"):
        D.Geometric(t64([0.0]), validate_args=True)
    with pytest.raises(ValueError, match="within the support"):
        D.Pareto(1.0, 2.0, validate_args=True).log_prob(t64([0.5]))
    with pytest.raises(ValueError, match="within the support"):
        D.Geometric(0.3, validate_args=True).log_prob(t64([1.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.NegativeBinomial(1.0)
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        D.Multinomial(t64(3.0), t64([0.5, 0.5]))


# ------------------------------------------------------------------ sampling

MOMENT_CASES = [
    lambda: D.HalfNormal(t64([1.0, 2.0])),
    lambda: D.StudentT(t64([5.0, 9.0]), t64([0.5, -1.0]), t64([1.0, 2.0])),
    lambda: D.Chi2(t64([2.0, 5.0])),
    lambda: D.Gumbel(t64([0.5, -1.0]), t64([1.0, 2.0])),
    lambda: D.Weibull(t64([1.0, 2.0]), t64([1.5, 3.0])),
    lambda: D.Pareto(t64([1.0, 0.5]), t64([5.0, 6.0])),
    lambda: D.Geometric(t64([0.3, 0.7])),
    lambda: D.NegativeBinomial(t64([2.0, 5.0]), t64([0.3, 0.6])),
    lambda: D.ContinuousBernoulli(t64([0.2, 0.9])),
    lambda: D.FisherSnedecor(t64([5.0, 8.0]), t64([9.0, 12.0])),
    lambda: D.Kumaraswamy(t64([2.0, 0.7]), t64([3.0, 1.5])),
    lambda: D.InverseGamma(t64([5.0, 6.0]), t64([1.0, 2.0])),
    lambda: D.Multinomial(7, t64([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])),
    lambda: D.LowRankMultivariateNormal(t64([0.5, -1.0]), t64([[1.0], [0.5]]), t64([0.5, 1.0])),
    lambda: D.MixtureSameFamily(D.Categorical(t64([0.3, 0.7])), D.Normal(t64([-1.0, 2.0]), t64([0.5, 1.0]))),
]


@pytest.mark.parametrize("make", MOMENT_CASES)
def test_sample_moments_with_a_fixed_seed(make):
    tinytorch.manual_seed(7)
    d = make()
    n = 40000
    s = d.sample((n,))
    assert s.shape == (n,) + tuple(d.batch_shape) + tuple(d.event_shape)
    assert bool(d.support.check(s).all())
    sd = d.stddev.numpy()
    np.testing.assert_array_less(np.abs(s.numpy().mean(0) - d.mean.numpy()), 5 * sd / math.sqrt(n) + 1e-12)
    # the variance estimate has a heavier spread: a looser band
    np.testing.assert_allclose(s.numpy().var(0), d.variance.numpy(), rtol=0.1)


def test_cauchy_sample_quartiles():
    tinytorch.manual_seed(0)
    s = D.Cauchy(t64(1.0), t64(2.0)).sample((40000,)).numpy()
    np.testing.assert_allclose(np.percentile(s, [25, 50, 75]), [-1.0, 1.0, 3.0], atol=0.1)


# ------------------------------------------------------------------ gradients

def test_log_prob_and_entropy_gradients_by_gradcheck():
    a, b = t64([0.7, 2.5], requires_grad=True), t64([1.5, 3.8], requires_grad=True)
    x = t64([0.3, 0.6])
    assert gradcheck(lambda m, s: D.Cauchy(m, s).log_prob(x), (a, b))
    assert gradcheck(lambda df, s: D.StudentT(df, 0.2, s).log_prob(x), (a, b))
    assert gradcheck(lambda df, s: D.StudentT(df, 0.2, s).entropy(), (a, b))
    assert gradcheck(lambda m, s: D.Gumbel(m, s).log_prob(x), (a, b))
    assert gradcheck(lambda s, k: D.Weibull(s, k).log_prob(x), (a, b))
    assert gradcheck(lambda s, k: D.Weibull(s, k).entropy(), (a, b))
    assert gradcheck(lambda s, al: D.Pareto(s * 0.1, al).log_prob(x + 1), (a, b))
    assert gradcheck(lambda c1, c0: D.Kumaraswamy(c1, c0).log_prob(x), (a, b))
    assert gradcheck(lambda c1, c0: D.Kumaraswamy(c1, c0).mean, (a, b))
    assert gradcheck(lambda d1, d2: D.FisherSnedecor(d1, d2).log_prob(x), (a, b))
    assert gradcheck(lambda c, r: D.InverseGamma(c, r).log_prob(x), (a, b))
    assert gradcheck(lambda r, z: D.NegativeBinomial(r, logits=z).log_prob(t64([0.0, 3.0])), (a, b))
    assert gradcheck(lambda m, k: D.VonMises(m, k).log_prob(x), (a, b))
    assert gradcheck(lambda k: D.VonMises(t64(0.0), k).variance, (b,))
    assert gradcheck(lambda s: D.HalfNormal(s).log_prob(x), (a,))
    assert gradcheck(lambda s: D.HalfCauchy(s).log_prob(x), (a,))
    p = t64([0.3, 0.45], requires_grad=True)
    assert gradcheck(lambda q: D.Geometric(q).log_prob(t64([0.0, 3.0])), (p,))
    assert gradcheck(lambda q: D.Geometric(q).entropy(), (p,))
    assert gradcheck(lambda q: D.ContinuousBernoulli(q).log_prob(x), (p,))
    assert gradcheck(lambda q: D.ContinuousBernoulli(q).entropy(), (p,))
    logits = t64([[0.1, -0.3, 1.2]], requires_grad=True)
    assert gradcheck(lambda z: D.Multinomial(4, logits=z).log_prob(t64([[1.0, 0.0, 3.0]])), (logits,))
    w = t64([[0.5], [1.0], [-0.3]], requires_grad=True)
    diag = t64([0.5, 1.0, 2.0], requires_grad=True)
    v3 = t64([0.3, 0.4, 0.5])
    assert gradcheck(lambda f, dg: D.LowRankMultivariateNormal(t64([0.0, 1.0, 0.0]), f, dg).log_prob(v3), (w, diag))
    mix_logits = t64([0.2, -0.4], requires_grad=True)
    points = t64([[0.1], [0.7]])
    assert gradcheck(lambda z, m: D.MixtureSameFamily(D.Categorical(logits=z), D.Normal(m, 1.0)).log_prob(points),
                     (mix_logits, a))


def test_rsample_gradients_by_gradcheck():
    a, b = t64([0.7, 2.5], requires_grad=True), t64([1.5, 3.8], requires_grad=True)
    assert gradcheck(_seeded(lambda m, s: D.Cauchy(m, s).rsample((3,))), (a, b))
    assert gradcheck(_seeded(lambda m, s: D.Gumbel(m, s).rsample((3,))), (a, b))
    assert gradcheck(_seeded(lambda s, k: D.Weibull(s, k).rsample((3,))), (a, b))
    assert gradcheck(_seeded(lambda s, al: D.Pareto(s, al).rsample((3,))), (a, b))
    assert gradcheck(_seeded(lambda c1, c0: D.Kumaraswamy(c1, c0).rsample((3,))), (a, b))
    assert gradcheck(_seeded(lambda s: D.HalfNormal(s).rsample((3,))), (a,))
    assert gradcheck(_seeded(lambda m: D.StudentT(t64(4.0), m, 2.0).rsample((3,))), (a,))
    assert gradcheck(_seeded(lambda z: D.RelaxedBernoulli(t64(0.5), logits=z).rsample((3,))), (a,))
    logits = t64([[0.1, -0.3, 1.2]], requires_grad=True)
    assert gradcheck(_seeded(lambda z: D.RelaxedOneHotCategorical(t64(0.7), logits=z).rsample((2,))), (logits,))
    assert gradcheck(_seeded(lambda m: D.LogisticNormal(m, t64([1.0, 0.5])).rsample((2,))), (a,))
    assert gradcheck(_seeded(lambda q: D.ContinuousBernoulli(q).rsample((3,))), (t64([0.3, 0.8], requires_grad=True),))
    w = t64([[0.5], [1.0]], requires_grad=True)
    assert gradcheck(_seeded(lambda m, f: D.LowRankMultivariateNormal(m, f, t64([0.5, 1.0])).rsample((3,))), (a, w))


# ------------------------------------------------------------------ KL divergences

def test_cross_family_kl_divergences_match_monte_carlo():
    """KL(p || q) = E_p[log p - log q], estimated from 200k samples of p with a fixed seed."""
    pairs = [
        (D.Normal(t64(0.3), t64(1.2)), D.Laplace(t64(-0.2), t64(0.8))),
        (D.Normal(t64(0.3), t64(1.2)), D.Gumbel(t64(-0.2), t64(1.5))),
        (D.Laplace(t64(0.3), t64(1.2)), D.Normal(t64(-0.2), t64(2.0))),
        (D.Exponential(t64(1.5)), D.Gamma(t64(2.0), t64(1.3))),
        (D.Exponential(t64(1.5)), D.Gumbel(t64(0.2), t64(1.3))),
        (D.Exponential(t64(1.5)), D.Normal(t64(0.2), t64(1.3))),
        (D.Gamma(t64(2.0), t64(1.3)), D.Exponential(t64(0.7))),
        (D.Gamma(t64(2.0), t64(1.3)), D.Gumbel(t64(0.5), t64(2.0))),
        (D.Gamma(t64(2.0), t64(1.3)), D.Normal(t64(0.5), t64(2.0))),
        (D.Beta(t64(2.0), t64(3.0)), D.Gamma(t64(2.0), t64(1.3))),
        (D.Beta(t64(2.0), t64(3.0)), D.Normal(t64(0.5), t64(2.0))),
        (D.Beta(t64(2.0), t64(3.0)), D.Exponential(t64(0.5))),
        (D.Beta(t64(2.0), t64(3.0)), D.Uniform(t64(-0.5), t64(1.5))),
        (D.Beta(t64(2.0), t64(3.0)), D.ContinuousBernoulli(t64(0.3))),
        (D.Uniform(t64(0.2), t64(0.9)), D.Beta(t64(2.0), t64(3.0))),
        (D.Uniform(t64(0.2), t64(0.9)), D.Gamma(t64(2.0), t64(1.3))),
        (D.Uniform(t64(0.2), t64(0.9)), D.Gumbel(t64(0.5), t64(2.0))),
        (D.Uniform(t64(0.2), t64(0.9)), D.Pareto(t64(0.1), t64(2.0))),
        (D.Uniform(t64(0.2), t64(0.9)), D.ContinuousBernoulli(t64(0.7))),
        (D.Uniform(t64(0.2), t64(0.9)), D.Exponential(t64(0.7))),
        (D.Uniform(t64(0.2), t64(0.9)), D.Normal(t64(0.1), t64(0.7))),
        (D.Pareto(t64(1.0), t64(4.0)), D.Pareto(t64(0.5), t64(2.0))),
        (D.Pareto(t64(1.0), t64(4.0)), D.Exponential(t64(0.5))),
        (D.Pareto(t64(1.0), t64(4.0)), D.Gamma(t64(2.0), t64(1.3))),
        (D.Pareto(t64(1.0), t64(4.0)), D.Normal(t64(0.5), t64(2.0))),
        (D.Gumbel(t64(0.3), t64(1.2)), D.Gumbel(t64(-0.2), t64(0.8))),
        (D.Gumbel(t64(0.3), t64(1.2)), D.Normal(t64(-0.2), t64(2.0))),
        (D.Cauchy(t64(0.3), t64(1.2)), D.Cauchy(t64(-0.2), t64(0.8))),
        (D.ContinuousBernoulli(t64(0.2)), D.ContinuousBernoulli(t64(0.7))),
        (D.ContinuousBernoulli(t64(0.2)), D.Normal(t64(0.1), t64(0.7))),
        (D.ContinuousBernoulli(t64(0.2)), D.Exponential(t64(0.7))),
        (D.ContinuousBernoulli(t64(0.2)), D.Uniform(t64(-0.1), t64(1.7))),
        (D.HalfNormal(t64(1.2)), D.HalfNormal(t64(0.8))),
        (D.Geometric(t64(0.3)), D.Geometric(t64(0.6))),
        (D.Bernoulli(t64(0.3)), D.Poisson(t64(0.6))),
    ]
    for p, q in pairs:
        tinytorch.manual_seed(11)
        s = p.sample((200000,))
        diff = (p.log_prob(s) - q.log_prob(s)).numpy()
        got = D.kl_divergence(p, q).item()
        tol = 5 * diff.std() / math.sqrt(len(diff)) + 1e-9
        assert abs(diff.mean() - got) < tol, (type(p).__name__, type(q).__name__, diff.mean(), got)


def test_kl_divergences_with_disjoint_supports_are_infinite():
    inf_pairs = [
        (D.Normal(t64([0.0, 1.0]), 1.0), D.Exponential(t64(1.0))),
        (D.Normal(t64([0.0, 1.0]), 1.0), D.Beta(t64(1.0), t64(1.0))),
        (D.Laplace(t64([0.0, 1.0]), 1.0), D.Pareto(t64(1.0), t64(1.0))),
        (D.Gamma(t64([1.0, 2.0]), 1.0), D.Uniform(t64(0.0), t64(1.0))),
        (D.Gumbel(t64([1.0, 2.0]), 1.0), D.Gamma(t64(1.0), t64(1.0))),
        (D.Exponential(t64([1.0, 2.0])), D.ContinuousBernoulli(t64(0.3))),
        (D.Poisson(t64([1.0, 2.0])), D.Bernoulli(t64(0.3))),
        (D.Pareto(t64([1.0, 2.0]), 1.0), D.Uniform(t64(0.0), t64(1.0))),
    ]
    for p, q in inf_pairs:
        out = D.kl_divergence(p, q)
        assert out.shape == (2,) and np.isinf(out.numpy()).all()
    # supports nest only partly: infinite where they do not
    out = D.kl_divergence(D.Uniform(t64([0.2, -0.2]), t64([0.9, 0.9])), D.Beta(t64(2.0), t64(3.0))).numpy()
    assert np.isfinite(out[0]) and np.isinf(out[1])
    out = D.kl_divergence(D.Pareto(t64([1.0, 0.2]), t64(3.0)), D.Pareto(t64(0.5), t64(2.0))).numpy()
    assert np.isfinite(out[0]) and np.isinf(out[1])
    out = D.kl_divergence(D.Pareto(t64(1.0), t64([3.0, 0.8])), D.Exponential(t64(0.5))).numpy()
    assert np.isfinite(out[0]) and np.isinf(out[1])


# ------------------------------------------------------------------ PyTorch comparison

def _pt_cases(m):
    Dm = m.distributions

    def T(x):
        return m.tensor(np.asarray(x, dtype=np.float64))
    return [
        ("Cauchy", Dm.Cauchy(T([0.1, -1.0]), T([1.0, 2.0])), T([0.3, 1.0])),
        ("HalfCauchy", Dm.HalfCauchy(T([1.0, 2.0])), T([0.3, 1.0])),
        ("HalfNormal", Dm.HalfNormal(T([1.0, 2.0])), T([0.3, 1.0])),
        ("Geometric", Dm.Geometric(T([0.3, 0.8])), T([0.0, 3.0])),
        ("GeometricLogits", Dm.Geometric(logits=T([0.3, -0.8])), T([0.0, 3.0])),
        ("Multinomial", Dm.Multinomial(5, T([[0.2, 0.3, 0.5]])), T([[1.0, 1.0, 3.0]])),
        ("StudentT", Dm.StudentT(T([0.8, 1.5, 5.0]), T([0.0, 1.0, -1.0]), T([1.0, 2.0, 0.5])), T([0.3, 1.0, 2.0])),
        ("Chi2", Dm.Chi2(T([1.0, 4.5])), T([0.3, 1.0])),
        ("Gumbel", Dm.Gumbel(T([0.1, -1.0]), T([1.0, 2.0])), T([0.3, 1.0])),
        ("Weibull", Dm.Weibull(T([1.0, 2.0]), T([0.7, 3.0])), T([0.3, 1.0])),
        ("Pareto", Dm.Pareto(T([0.2, 1.0]), T([0.5, 3.0])), T([0.3, 1.5])),
        ("NegativeBinomial", Dm.NegativeBinomial(T([2.0, 3.5]), T([0.3, 0.6])), T([0.0, 4.0])),
        ("LowRankMVN", Dm.LowRankMultivariateNormal(T([[0.0, 1.0, 0.5]]), T([[1.0], [0.5], [-0.2]]),
                                                    T([0.5, 1.0, 2.0])), T([0.3, 0.1, -1.0])),
        ("RelaxedBernoulli", Dm.RelaxedBernoulli(T(0.5), T([0.3, 0.6])), T([0.2, 0.9])),
        ("RelaxedOneHot", Dm.RelaxedOneHotCategorical(T(0.5), T([[0.2, 0.3, 0.5]])), T([[0.1, 0.2, 0.7]])),
        ("ContinuousBernoulli", Dm.ContinuousBernoulli(T([0.2, 0.4995, 0.8])), T([0.1, 0.5, 0.9])),
        ("FisherSnedecor", Dm.FisherSnedecor(T([1.0, 3.0, 6.0]), T([1.5, 4.5, 6.0])), T([0.3, 1.0, 2.0])),
        ("Kumaraswamy", Dm.Kumaraswamy(T([0.5, 2.0]), T([2.0, 0.7])), T([0.3, 0.6])),
        ("LogisticNormal", Dm.LogisticNormal(T([0.1, -0.2]), T([1.0, 0.5])), T([0.2, 0.3, 0.5])),
        ("VonMises", Dm.VonMises(T([0.1, -1.0]), T([0.3, 20.0])), T([0.3, 1.0])),
        ("InverseGamma", Dm.InverseGamma(T([0.5, 3.0]), T([1.0, 2.0])), T([0.3, 1.0])),
        ("Mixture", Dm.MixtureSameFamily(Dm.Categorical(T([0.3, 0.7])), Dm.Normal(T([-1.0, 2.0]), T([0.5, 1.0]))),
         T([0.3, 1.0])),
    ]


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def test_distributions_match_pytorch():
    torch = pytest.importorskip("torch")
    for (name, mine, value), (_, ref, ref_value) in zip(_pt_cases(tinytorch), _pt_cases(torch)):
        assert tuple(mine.batch_shape) == tuple(ref.batch_shape), name
        assert tuple(mine.event_shape) == tuple(ref.event_shape), name
        assert mine.has_rsample == ref.has_rsample, name
        assert repr(mine.support).replace("tinytorch.", "").replace("torch.", "") == \
            repr(ref.support).replace("torch.", ""), name
        # PyTorch evaluates VonMises' log I0 by a polynomial fit good to ~1e-7; ours uses i0e
        rtol = 1e-5 if name == "VonMises" else 1e-9
        np.testing.assert_allclose(_np(mine.log_prob(value)), _np(ref.log_prob(ref_value)), rtol=rtol, atol=1e-12,
                                   err_msg=name)
        for attr in ("mean", "variance", "entropy", "mode"):
            try:
                want = getattr(ref, attr)
                want = want() if callable(want) else want
            except NotImplementedError:
                continue
            got = getattr(mine, attr)
            got = got() if callable(got) else got
            if name == "Kumaraswamy" and attr == "mode":
                continue  # PyTorch's mode is nan wherever it exists (reported upstream); ours is the closed form
            np.testing.assert_allclose(_np(got), _np(want), rtol=max(rtol, 1e-7), atol=1e-12,
                                       err_msg=f"{name}.{attr}")
        for shape in ((), (4,), (2, 3)):
            assert tuple(mine.sample(shape).shape) == tuple(ref.sample(shape).shape), name
            assert str(mine.sample(shape).dtype).split(".")[-1] == str(ref.sample(shape).dtype).split(".")[-1], name
        big = (5,) + tuple(ref.batch_shape)
        if name == "Mixture":
            value, ref_value = value[:, None], ref_value[:, None]
        np.testing.assert_allclose(_np(mine.expand(big).log_prob(value)), _np(ref.expand(big).log_prob(ref_value)),
                                   rtol=rtol, atol=1e-12, err_msg=name)


def test_kl_divergences_match_pytorch():
    torch = pytest.importorskip("torch")
    import torch.distributions.kl as tkl

    def cases(m):
        Dm = m.distributions

        def T(x):
            return m.tensor(np.asarray(x, dtype=np.float64))
        return {
            "Bernoulli": Dm.Bernoulli(T([0.3, 0.7])), "Poisson": Dm.Poisson(T([0.5, 2.0])),
            "Binomial": Dm.Binomial(5, T([0.3, 0.6])), "Beta": Dm.Beta(T([0.5, 2.0]), T([1.5, 0.8])),
            "ContinuousBernoulli": Dm.ContinuousBernoulli(T([0.2, 0.4995])),
            "Exponential": Dm.Exponential(T([0.5, 2.0])),
            "Gamma": Dm.Gamma(T([0.5, 2.0]), T([1.5, 0.8])), "Normal": Dm.Normal(T([0.1, -1.0]), T([1.0, 2.0])),
            "Pareto": Dm.Pareto(T([0.5, 1.0]), T([0.8, 3.0])), "Uniform": Dm.Uniform(T([0.1, -0.1]), T([0.6, 1.3])),
            "Gumbel": Dm.Gumbel(T([0.1, -1.0]), T([1.0, 2.0])), "Laplace": Dm.Laplace(T([0.1, -1.0]), T([1.0, 2.0])),
            "Cauchy": Dm.Cauchy(T([0.1, -1.0]), T([1.0, 2.0])), "Geometric": Dm.Geometric(T([0.3, 0.6])),
            "HalfNormal": Dm.HalfNormal(T([1.0, 2.0])),
            "LowRankMultivariateNormal": Dm.LowRankMultivariateNormal(T([[0.0, 1.0]]), T([[1.0], [0.5]]),
                                                                      T([0.5, 1.0])),
            "MultivariateNormal": Dm.MultivariateNormal(T([[0.5, 1.0]]), scale_tril=T([[1.0, 0.0], [0.3, 2.0]])),
        }
    mine, ref = cases(tinytorch), cases(torch)
    mine2 = {k: v.expand(v.batch_shape) for k, v in cases(tinytorch).items()}
    checked = 0
    for tp, tq in tkl._KL_REGISTRY:
        a, b = tp.__name__, tq.__name__
        if a not in ref or b not in ref:
            continue
        want = _np(torch.distributions.kl_divergence(ref[a], ref[b.replace(a, a)]))
        got = _np(D.kl_divergence(mine[a], mine2[b]))
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10, err_msg=f"KL({a} || {b})")
        checked += 1
    assert checked >= 70


def test_transforms_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3))
    for name, args, v in [("AbsTransform", (), x), ("PowerTransform", (2.5,), np.abs(x) + 0.1),
                          ("SoftplusTransform", (), x), ("SoftmaxTransform", (), x), ("StickBreakingTransform", (), x),
                          ("LowerCholeskyTransform", (), rng.normal(size=(2, 3, 3))),
                          ("ReshapeTransform", ((3,), (3, 1)), x)]:
        ref = getattr(torch.distributions.transforms, name)(*args)
        mine = getattr(transforms, name)(*args)
        rv, mv = torch.tensor(v), t64(v)
        np.testing.assert_allclose(_np(mine(mv)), _np(ref(rv)), rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(_np(mine.inv(mine(mv))), _np(ref.inv(ref(rv))), rtol=1e-10, err_msg=name)
        assert repr(mine.domain) == repr(ref.domain) and repr(mine.codomain) == repr(ref.codomain), name
        assert mine.bijective == ref.bijective, name
        try:
            want = _np(ref.log_abs_det_jacobian(rv, ref(rv)))
        except NotImplementedError:
            continue
        np.testing.assert_allclose(_np(mine.log_abs_det_jacobian(mv, mine(mv))), want, rtol=1e-10, err_msg=name)


# ------------------------------------------------------------------ matrix distributions, GeneralizedPareto

def _mvlgamma(a, p):
    return p * (p - 1) / 4 * math.log(math.pi) + sum(math.lgamma(a - j / 2) for j in range(p))


def test_wishart_closed_forms_and_moments():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(3, 3))
    S = A @ A.T + np.eye(3)
    df = 5.5
    X = S * 0.5 + np.eye(3)
    want = ((df - 4) / 2 * np.linalg.slogdet(X)[1] - np.trace(np.linalg.solve(S, X)) / 2 - df * 3 / 2 * math.log(2)
            - df / 2 * np.linalg.slogdet(S)[1] - _mvlgamma(df / 2, 3))
    for kw in (dict(covariance_matrix=t64(S)), dict(precision_matrix=t64(np.linalg.inv(S))),
               dict(scale_tril=t64(np.linalg.cholesky(S)))):
        w = D.Wishart(df, **kw)
        _close(w.log_prob(t64(X)), want, rtol=1e-9)
        _close(w.mean, df * S)
        _close(w.mode, (df - 4) * S)
        _close(w.variance, df * (S ** 2 + np.outer(np.diag(S), np.diag(S))))
        _close(w.covariance_matrix, S, rtol=1e-9)
        _close(w.precision_matrix, np.linalg.inv(S), rtol=1e-9)
    psi = sum(float(_digamma(df / 2 - j / 2)) for j in range(3))
    ent = (2 * np.linalg.slogdet(S)[1] + 6 * math.log(2) + _mvlgamma(df / 2, 3) - (df - 4) / 2 * psi + df * 1.5)
    _close(D.Wishart(df, covariance_matrix=t64(S)).entropy(), ent, rtol=1e-9)
    tinytorch.manual_seed(0)
    w = D.Wishart(t64([4.0, 6.0]), covariance_matrix=t64(S))
    s = w.sample((20000,))
    assert s.shape == (20000, 2, 3, 3) and bool(constraints.positive_definite.check(s).all())
    np.testing.assert_allclose(s.numpy().mean(0), w.mean.numpy(), rtol=0.03, atol=0.1)
    with pytest.raises(ValueError, match="expected to be greater than ndim - 1 = 2"):
        D.Wishart(t64([1.0]), covariance_matrix=t64(S))
    with pytest.raises(AssertionError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        D.Wishart(3.0)
    assert np.isnan(D.Wishart(3.5, covariance_matrix=t64(S)).mode.numpy()).all()


def test_lkj_cholesky_density_normalizes_and_samples_have_the_marginal():
    # dim 2: the one correlation r has density proportional to (1 - r^2)^(concentration - 1)
    for conc in (0.5, 1.0, 3.0):
        d = D.LKJCholesky(2, t64(conc))
        r = np.linspace(-0.999, 0.999, 4001)
        L = np.zeros((len(r), 2, 2))
        L[:, 0, 0], L[:, 1, 0], L[:, 1, 1] = 1, r, np.sqrt(1 - r ** 2)
        # the density of L in terms of r picks up |dL11/dr|-free Jacobian 1: L is parameterized by r alone
        dens = np.exp(d.log_prob(t64(L)).numpy())
        want = (1 - r ** 2) ** (conc - 1)
        ratio = dens / want
        np.testing.assert_allclose(ratio, ratio[len(r) // 2], rtol=1e-9)
    # marginal of each correlation in dim 3 with concentration 2: 2 * Beta(2.5, 2.5) - 1, variance 1/6 (the
    # marginals of PyTorch 2.13's sampler differ for the third row)
    tinytorch.manual_seed(1)
    L = D.LKJCholesky(3, 2.0).sample((20000,))
    assert bool(constraints.corr_cholesky.check(L).all())
    C = (L @ L.mT).numpy()
    np.testing.assert_allclose(np.diagonal(C, axis1=-2, axis2=-1), 1.0, rtol=1e-6)
    offdiag = np.stack([C[:, 1, 0], C[:, 2, 0], C[:, 2, 1]], -1)
    np.testing.assert_allclose(offdiag.mean(0), 0.0, atol=0.02)
    np.testing.assert_allclose(offdiag.var(0), 1 / 6, rtol=0.05)
    with pytest.raises(ValueError, match="Expected dim to be an integer greater than or equal to 2. Found dim=1."):
        D.LKJCholesky(1)


def test_generalized_pareto_closed_forms():
    loc, scale, xi = np.array([0.0, 1.0, 0.0]), np.array([1.0, 2.0, 1.0]), np.array([-0.5, 0.0, 0.3])
    d = D.GeneralizedPareto(t64(loc), t64(scale), t64(xi))
    x = np.array([0.5, 2.0, 3.0])
    z = (x - loc) / scale
    safe = np.where(xi == 0, 1.0, xi)
    logpdf = np.where(xi == 0, -np.log(scale) - z, -np.log(scale) - (1 / safe + 1) * np.log1p(safe * z))
    _close(d.log_prob(t64(x)), logpdf)
    cdf = np.where(xi == 0, 1 - np.exp(-z), 1 - (1 + safe * z) ** (-1 / safe))
    _close(d.cdf(t64(x)), cdf)
    _close(d.icdf(t64(cdf)), x, rtol=1e-9)
    _close(d.mean, loc + scale / (1 - xi))
    _close(d.variance, np.where(xi < 0.5, scale ** 2 / ((1 - xi) ** 2 * (1 - 2 * xi)), np.nan))
    _close(d.entropy(), np.log(scale) + xi + 1)
    assert d.support.upper_bound.numpy().tolist() == [2.0, math.inf, math.inf]
    tinytorch.manual_seed(0)
    s = D.GeneralizedPareto(t64(0.0), t64(1.0), t64(-0.2)).rsample((40000,)).numpy()
    assert (s >= 0).all() and (s <= 5).all()
    assert s.mean() == pytest.approx(1 / 1.2, rel=0.02)
    a = t64([0.3, 0.5], requires_grad=True)
    assert gradcheck(lambda c: D.GeneralizedPareto(t64(0.1), t64(1.5), c).log_prob(t64([0.4, 2.0])), (a,))
    assert gradcheck(_seeded(lambda c: D.GeneralizedPareto(t64(0.1), t64(1.5), c).rsample((3,))), (a,))


# ------------------------------------------------------------------ constraint registry

def test_biject_to_and_transform_to_map_onto_the_constraint():
    rng = np.random.default_rng(4)
    x = t64(rng.normal(size=(2, 3)))
    cases = [(constraints.real, x), (constraints.positive, x), (constraints.greater_than(2.0), x),
             (constraints.less_than(-1.0), x), (constraints.unit_interval, x), (constraints.interval(1.0, 3.0), x),
             (constraints.simplex, x), (constraints.real_vector, x),
             (constraints.independent(constraints.positive, 1), x),
             (constraints.corr_cholesky, x), (constraints.cat([constraints.real, constraints.positive], -1, [1, 2]), x),
             (constraints.stack([constraints.real, constraints.positive, constraints.unit_interval], -1), x)]
    for c, v in cases:
        for registry in (D.biject_to, D.transform_to):
            t = registry(c)
            y = t(v)
            assert bool(c.check(y).all()), (c, registry)
            if registry is D.biject_to:
                _close(t.inv(y), v.numpy(), rtol=1e-8, atol=1e-10)
    for c in (constraints.lower_cholesky, constraints.positive_definite):
        y = D.transform_to(c)(t64(rng.normal(size=(2, 3, 3))))
        assert bool(c.check(y).all())
    assert isinstance(D.biject_to(constraints.simplex), transforms.StickBreakingTransform)
    assert isinstance(D.transform_to(constraints.simplex), transforms.SoftmaxTransform)
    assert isinstance(D.biject_to(constraints.unit_interval), transforms.SigmoidTransform)
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        D.biject_to(constraints.boolean)
    with pytest.raises(NotImplementedError, match="Cannot transform _LowerCholesky constraints"):
        D.biject_to(constraints.lower_cholesky)


def test_corr_cholesky_cat_stack_transforms():
    rng = np.random.default_rng(5)
    t = transforms.CorrCholeskyTransform()
    v = t64(rng.normal(size=(2, 6)))
    y = t(v)
    assert y.shape == (2, 4, 4) and bool(constraints.corr_cholesky.check(y).all())
    _close(t.inv(y), v.numpy(), rtol=1e-8)
    # log|det J| of x -> the strictly-lower entries of y, by finite differences
    def lower(z):
        return transforms.tril_matrix_to_vec(t(z), diag=-1).numpy()
    v0 = t64(rng.normal(size=6))
    J = np.stack([(lower(v0 + t64(np.eye(6)[i] * 1e-6)) - lower(v0 - t64(np.eye(6)[i] * 1e-6))) / 2e-6
                  for i in range(6)], -1)
    _close(t.log_abs_det_jacobian(v0, t(v0)), np.log(abs(np.linalg.det(J))), rtol=1e-6)
    with pytest.raises(ValueError, match="Input is not a flattened lower-diagonal number"):
        t.forward_shape((5,))
    cat = transforms.CatTransform([transforms.ExpTransform(), transforms.AffineTransform(0.0, 2.0)], 1, [1, 2])
    x = t64(rng.normal(size=(2, 3)))
    want = np.concatenate([np.exp(x.numpy()[:, :1]), 2 * x.numpy()[:, 1:]], 1)
    _close(cat(x), want)
    _close(cat.inv(cat(x)), x.numpy())
    _close(cat.log_abs_det_jacobian(x, cat(x)), np.concatenate([x.numpy()[:, :1], np.full((2, 2), math.log(2))], 1))
    stack = transforms.StackTransform([transforms.ExpTransform(), transforms.AffineTransform(0.0, 2.0)], 0)
    _close(stack(x), np.stack([np.exp(x.numpy()[0]), 2 * x.numpy()[1]]))
    _close(stack.log_abs_det_jacobian(x, stack(x)), np.stack([x.numpy()[0], np.full(3, math.log(2))]))
    pd = transforms.PositiveDefiniteTransform()
    m = t64(rng.normal(size=(3, 3)))
    assert bool(constraints.positive_definite.check(pd(m)).all())
    _close(pd.inv(pd(m)), np.tril(m.numpy(), -1) + np.diag(np.diag(m.numpy())), rtol=1e-9)


def test_matrix_distributions_and_registry_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    A = rng.normal(size=(3, 3))
    S = A @ A.T + np.eye(3)
    X = np.stack([S * 0.5 + np.eye(3), S * 2])
    for m in (torch, tinytorch):
        m._w = m.distributions.Wishart(m.tensor([4.0, 5.5]), covariance_matrix=m.tensor(S))
    for attr in ("mean", "variance", "mode", "precision_matrix"):
        np.testing.assert_allclose(_np(getattr(tinytorch._w, attr)), _np(getattr(torch._w, attr)), rtol=1e-9)
    np.testing.assert_allclose(_np(tinytorch._w.log_prob(t64(X))), _np(torch._w.log_prob(torch.tensor(X))), rtol=1e-9)
    np.testing.assert_allclose(_np(tinytorch._w.entropy()), _np(torch._w.entropy()), rtol=1e-9)
    lkj_value = torch.distributions.LKJCholesky(4, torch.tensor(2.0, dtype=torch.float64)).sample((3,))
    np.testing.assert_allclose(_np(D.LKJCholesky(4, t64(2.0)).log_prob(t64(lkj_value.numpy()))),
                               _np(torch.distributions.LKJCholesky(4, torch.tensor(2.0, dtype=torch.float64))
                                   .log_prob(lkj_value)), rtol=1e-9)
    gp = [m.distributions.GeneralizedPareto(m.tensor([0.0, 1.0, 0.0]), m.tensor([1.0, 2.0, 1.0]),
                                            m.tensor([-0.5, 0.0, 0.3])) for m in (torch, tinytorch)]
    for f in (lambda d, m: d.log_prob(m.tensor([0.5, 2.0, 3.0])), lambda d, m: d.cdf(m.tensor([0.5, 2.0, 3.0])),
              lambda d, m: d.icdf(m.tensor([0.3, 0.3, 0.3])), lambda d, m: d.mean, lambda d, m: d.variance,
              lambda d, m: d.entropy()):
        np.testing.assert_allclose(_np(f(gp[1], tinytorch)), _np(f(gp[0], torch)), rtol=1e-6, equal_nan=True)
    C = torch.distributions.constraints
    for name in ("real", "positive", "nonnegative", "unit_interval", "simplex", "real_vector", "corr_cholesky"):
        for reg in ("biject_to", "transform_to"):
            assert repr(getattr(D, reg)(getattr(constraints, name))) == \
                repr(getattr(torch.distributions, reg)(getattr(C, name))), (reg, name)
