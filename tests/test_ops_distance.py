"""cdist, pdist and dist: values against NumPy float64 references for p in {0, 0.5, 1, 2, 3, inf}, gradients by
gradcheck/gradgradcheck in float64 (inputs without ties or zero distances), PyTorch's errors, and PyTorch's values,
dtypes, shapes and gradients when it is importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
X1 = RNG.standard_normal((2, 4, 3))
X2 = RNG.standard_normal((2, 5, 3))
PS = [0, 0.5, 1, 2, 3, math.inf]


def _norm_ref(d, p, axis=-1):
    d = np.abs(d)
    if p == math.inf:
        return d.max(axis=axis)
    if p == 0:
        return (d != 0).sum(axis=axis).astype(d.dtype)
    return (d ** p).sum(axis=axis) ** (1 / p)


def _cdist_ref(a, b, p):
    return _norm_ref(a[..., :, None, :] - b[..., None, :, :], p)


def _pdist_ref(x, p):
    i, j = np.triu_indices(len(x), 1)
    return _norm_ref(x[i] - x[j], p)


@pytest.mark.parametrize("p", PS)
def test_cdist_matches_the_formula(p):
    got = tinytorch.cdist(tinytorch.tensor(X1), tinytorch.tensor(X2), p)
    assert got.shape == (2, 4, 5) and got.dtype == tinytorch.float64
    np.testing.assert_allclose(got.numpy(), _cdist_ref(X1, X2, p), rtol=1e-12)
    # batch dims broadcast, and a missing batch dim counts as 1
    got = tinytorch.cdist(tinytorch.tensor(X1), tinytorch.tensor(X2[0]), p)
    np.testing.assert_allclose(got.numpy(), _cdist_ref(X1, X2[0][None], p), rtol=1e-12)


def test_cdist_euclidean_by_matrix_product():
    a, b = RNG.standard_normal((30, 3)), RNG.standard_normal((6, 3))
    want = _cdist_ref(a, b, 2)
    for mode in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        got = tinytorch.cdist(tinytorch.tensor(a), tinytorch.tensor(b), compute_mode=mode)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)
    same = tinytorch.cdist(tinytorch.tensor(a), tinytorch.tensor(a), compute_mode="use_mm_for_euclid_dist")
    assert (same.diagonal().numpy() < 1e-6).all()  # rounding below zero stays out of sqrt: no nan
    x = tinytorch.tensor(a, requires_grad=True)
    y = tinytorch.tensor(b, requires_grad=True)
    assert gradcheck(lambda u, v: tinytorch.cdist(u, v, compute_mode="use_mm_for_euclid_dist"), (x[:4], y))


def test_cdist_edge_shapes_and_dtypes():
    assert tinytorch.cdist(tinytorch.ones(0, 2), tinytorch.ones(4, 2)).shape == (0, 4)
    for p in (2, math.inf):
        empty_cols = tinytorch.cdist(tinytorch.ones(3, 0), tinytorch.ones(4, 0), p)
        assert empty_cols.shape == (3, 4) and not empty_cols.numpy().any()
    f32 = tinytorch.cdist(tinytorch.ones(2, 3), tinytorch.zeros(1, 3))
    assert f32.dtype == tinytorch.float32
    np.testing.assert_allclose(f32.numpy(), np.full((2, 1), math.sqrt(3)), rtol=1e-6)


def test_cdist_errors():
    a, b = tinytorch.tensor(X1[0]), tinytorch.tensor(X2[0])
    with pytest.raises(RuntimeError, match="cdist only supports non-negative p values"):
        tinytorch.cdist(a, b, -1)
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        tinytorch.cdist(a, b.float())
    with pytest.raises(RuntimeError, match="cdist only supports floating-point dtypes, X1 got: Long"):
        tinytorch.cdist(a.long(), b.long())
    with pytest.raises(RuntimeError, match="cdist only supports at least 2D tensors, X1 got: 1D"):
        tinytorch.cdist(a[0], b)
    with pytest.raises(RuntimeError, match="cdist only supports at least 2D tensors, X2 got: 1D"):
        tinytorch.cdist(a, b[0])
    with pytest.raises(RuntimeError, match="X1 and X2 must have the same number of columns. X1: 3 X2: 2"):
        tinytorch.cdist(a, b[:, :2])
    with pytest.raises(ValueError, match="foo is not a valid value for compute_mode"):
        tinytorch.cdist(a, b, compute_mode="foo")
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        tinytorch.cdist(tinytorch.ones(2, 3, 2), tinytorch.ones(3, 4, 2))


@pytest.mark.parametrize("p", PS)
def test_pdist_matches_the_formula(p):
    x = X1[0]
    got = tinytorch.pdist(tinytorch.tensor(x), p)
    assert got.shape == (6,)
    np.testing.assert_allclose(got.numpy(), _pdist_ref(x, p), rtol=1e-12)
    full = tinytorch.cdist(tinytorch.tensor(x), tinytorch.tensor(x), p).numpy()
    np.testing.assert_allclose(got.numpy(), full[np.triu_indices(4, 1)], rtol=1e-12)


def test_pdist_edge_cases_and_errors():
    assert tinytorch.pdist(tinytorch.ones(1, 3)).shape == (0,)
    assert tinytorch.pdist(tinytorch.ones(0, 3)).shape == (0,)
    assert tinytorch.pdist(tinytorch.ones(3, 0)).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="pdist only supports 2D tensors, got: 1D"):
        tinytorch.pdist(tinytorch.ones(3))
    with pytest.raises(RuntimeError, match="pdist only supports floating-point dtypes"):
        tinytorch.pdist(tinytorch.ones(3, 2, dtype=tinytorch.int64))
    with pytest.raises(RuntimeError, match="pdist only supports non-negative p values"):
        tinytorch.pdist(tinytorch.ones(3, 2), -1)


@pytest.mark.parametrize("p", PS + [-1, -math.inf])
def test_dist_matches_the_formula(p):
    a, b = X1[0], X2[0, :1]
    d = np.abs(a - b).ravel()
    want = d.min() if p == -math.inf else (d ** p).sum() ** (1 / p) if p == -1 else _norm_ref(d, p)
    got = tinytorch.dist(tinytorch.tensor(a), tinytorch.tensor(b), p)
    assert got.shape == () and got.dtype == tinytorch.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(tinytorch.tensor(a).dist(tinytorch.tensor(b), p=p).numpy(), want, rtol=1e-12)


def test_dist_dtypes_and_errors():
    mixed = tinytorch.dist(tinytorch.ones(3), tinytorch.zeros(3, dtype=tinytorch.float64), 1)
    assert mixed.dtype == tinytorch.float64 and mixed.item() == 3.0
    z = tinytorch.tensor([3 + 4j, 0j])
    np.testing.assert_allclose(tinytorch.dist(z, tinytorch.zeros(2, dtype=tinytorch.complex64)).numpy(), 5.0)
    with pytest.raises(RuntimeError, match="norm\\(\\): input dtype should be either floating point or complex. Got "
                                           "Long instead."):
        tinytorch.dist(tinytorch.tensor([1, 2]), tinytorch.tensor([0, 0]))
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        tinytorch.dist(tinytorch.ones(3), tinytorch.ones(2))


@pytest.mark.parametrize("p", [1, 2, 3, math.inf])
def test_gradients(p):
    # different rows everywhere: no zero distances, and no ties for the inf-norm's maximum
    a = tinytorch.tensor(RNG.standard_normal((2, 3, 3)), requires_grad=True)
    b = tinytorch.tensor(RNG.standard_normal((2, 4, 3)), requires_grad=True)
    assert gradcheck(lambda u, v: tinytorch.cdist(u, v, p), (a, b))
    assert gradcheck(lambda u: tinytorch.pdist(u, p), (a[0],))
    assert gradcheck(lambda u, v: tinytorch.dist(u, v, p), (a[0], b[0, :1]))
    if p != math.inf:  # the inf-norm's gradient is piecewise constant: nothing for a second derivative to see
        assert gradgradcheck(lambda u, v: tinytorch.cdist(u, v, p), (a[:1, :2], b[:1, :2]))
        assert gradgradcheck(lambda u: tinytorch.pdist(u, p), (a[0],))
        assert gradgradcheck(lambda u, v: tinytorch.dist(u, v, p), (a[0], b[0, :1]))


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")
@pytest.mark.parametrize("p", [0.5, 1, 2, 3, math.inf])
def test_matches_pytorch(p):
    import torch
    big1, big2 = RNG.standard_normal((30, 3)), RNG.standard_normal((4, 3))  # p = 2 takes the matrix product here
    calls = [
        (lambda L, u, v: L.cdist(u, v, p), [X1, X2[:1]]),
        (lambda L, u, v: L.cdist(u, v, p), [big1, big2]),
        (lambda L, u: L.pdist(u, p), [X1[1]]),
        (lambda L, u, v: L.dist(u, v, p), [X1[0], X2[0, :1]]),
        (lambda L, u, v: u.dist(v, p), [X1[0].astype(np.float32), X2[0, :1].astype(np.float32)]),
    ]
    for fn, arrays in calls:
        ours = [tinytorch.tensor(a, requires_grad=True) for a in arrays]
        theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
        got, want = fn(tinytorch, *ours), fn(torch, *theirs)
        assert tuple(got.shape) == tuple(want.shape) and str(got.dtype) == str(want.dtype)
        tol = 1e-5 if want.dtype == torch.float32 else 1e-10
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol)
        weights = np.random.default_rng(5).standard_normal(tuple(want.shape))
        (got * tinytorch.tensor(weights, dtype=got.dtype)).sum().backward()
        (want * torch.tensor(weights, dtype=want.dtype)).sum().backward()
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
