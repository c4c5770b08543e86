"""Order statistics and NaN-aware reductions (median, nanmedian, kthvalue, mode, quantile, nanquantile, nansum,
nanmean, aminmax, cummax, cummin, logcumsumexp, cov, corrcoef): values against NumPy float64 references, edge
cases, PyTorch's errors, gradients by gradcheck/gradgradcheck in float64, and PyTorch's results when it is
importable."""
import collections
import importlib.util
import math
import warnings

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 5))  # distinct values: no ties anywhere
NAN = float("nan")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def T(a, **kw):
    return tinytorch.tensor(a, **kw)


def leaf(a):
    return tinytorch.tensor(np.asarray(a, np.float64), requires_grad=True)


# ------------------------------------------------------------------ median, nanmedian, kthvalue, mode

def _lower_median(row, ignore_nan):
    row = np.asarray(row, np.float64)
    if ignore_nan:
        row = row[~np.isnan(row)]
        if row.size == 0:
            return NAN
    elif np.isnan(row).any():
        return NAN
    return np.sort(row)[(row.size - 1) // 2]


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_along_a_dim_is_the_lower_middle_value(dim, keepdim):
    values, indices = tinytorch.median(T(A), dim, keepdim)
    want = np.apply_along_axis(_lower_median, dim, A, False)
    if keepdim:
        want = np.expand_dims(want, dim)
    np.testing.assert_array_equal(values.numpy(), want)
    assert indices.dtype == tinytorch.int64 and values.shape == want.shape
    np.testing.assert_array_equal(np.take_along_axis(A, indices.numpy() if keepdim else
                                                     np.expand_dims(indices.numpy(), dim), dim),
                                  want if keepdim else np.expand_dims(want, dim))


def test_median_of_all_elements_and_even_counts():
    assert tinytorch.median(T([3.0, 1.0, 2.0, 4.0])).item() == 2.0  # lower middle, not 2.5
    assert tinytorch.median(T(A)).item() == _lower_median(A.ravel(), False)
    assert tinytorch.median(T([4, 1, 3, 2])).dtype == tinytorch.int64
    assert tinytorch.median(T([4, 1, 3, 2])).item() == 2
    assert math.isnan(tinytorch.median(T([3.0, NAN, 1.0])).item())
    assert math.isnan(tinytorch.median(tinytorch.empty(0)).item())
    assert tinytorch.median(T(5.0)).item() == 5.0
    r = tinytorch.median(T([[3.0, NAN, 2.0, NAN], [1.0, 4.0, 2.0, 3.0]]), 1)
    assert math.isnan(r.values[0].item()) and r.indices[0].item() == 1  # the first NaN
    assert r.values[1].item() == 2.0 and r.indices[1].item() == 2
    v, i = tinytorch.median(T(5.0), 0)
    assert v.item() == 5.0 and i.item() == 0 and i.shape == ()
    assert tinytorch.median(tinytorch.empty(0, 3), 1).values.shape == (0,)
    assert T(A).median(dim=1).values.shape == (3, 5)


def test_nanmedian_skips_nan():
    assert tinytorch.nanmedian(T([3.0, NAN, 1.0, 4.0])).item() == 3.0
    assert math.isnan(tinytorch.nanmedian(T([NAN, NAN])).item())
    x = np.array([[3.0, NAN, 2.0, NAN], [NAN, NAN, NAN, NAN], [1.0, 2.0, 3.0, 4.0]])
    v, i = tinytorch.nanmedian(T(x), 1)
    np.testing.assert_array_equal(v.numpy(), [2.0, NAN, 2.0])
    assert i[0].item() == 2 and i[2].item() == 1 and math.isnan(x[1, i[1].item()])
    np.testing.assert_array_equal(tinytorch.nanmedian(T(A), 2, True).values.numpy(),
                                  np.apply_along_axis(_lower_median, 2, A, True)[..., None])


@pytest.mark.parametrize("k", [1, 2, 4])
def test_kthvalue_is_the_kth_smallest(k):
    for dim in (1, -1):
        v, i = tinytorch.kthvalue(T(A), k, dim)
        np.testing.assert_array_equal(v.numpy(), np.take(np.sort(A, axis=dim), k - 1, axis=dim))
        np.testing.assert_array_equal(np.take_along_axis(A, np.expand_dims(i.numpy(), dim), dim).squeeze(dim),
                                      v.numpy())
    v, i = T(A).kthvalue(k, 1, keepdim=True)
    assert v.shape == (3, 1, 5) and i.shape == (3, 1, 5)
    assert tinytorch.kthvalue(T([3.0, NAN, 2.0]), 3).indices.item() == 1  # NaN is the largest
    assert tinytorch.kthvalue(T(7.0), 1).values.item() == 7.0
    assert tinytorch.kthvalue(T([[3, 1], [2, 2]]), 1).values.tolist() == [1, 2]


def _mode_ref(row):
    counts = collections.Counter(row.tolist())
    best = max(counts.values())
    value = min(v for v, c in counts.items() if c == best)
    return value, max(j for j, v in enumerate(row.tolist()) if v == value)


def test_mode_is_the_smallest_most_frequent_value_and_its_last_index():
    x = RNG.integers(0, 4, (6, 9))
    v, i = tinytorch.mode(T(x))
    for r in range(6):
        assert (v[r].item(), i[r].item()) == _mode_ref(x[r])
    v, i = tinytorch.mode(T(x), 0, keepdim=True)
    assert v.shape == (1, 9)
    for c in range(9):
        assert (v[0, c].item(), i[0, c].item()) == _mode_ref(x[:, c])
    assert tinytorch.mode(T([True, False, True])).values.item() is True
    assert tinytorch.mode(T(4.0)).values.item() == 4.0
    assert tinytorch.mode(tinytorch.empty(0, 3), 1).values.shape == (0,)
    assert T([1.0, 2.0, 2.0]).mode().values.item() == 2.0


def test_order_statistic_errors():
    with pytest.raises(RuntimeError, match="selected number k out of range for dimension 0"):
        tinytorch.kthvalue(T([1.0, 2.0]), 3)
    with pytest.raises(RuntimeError, match="selected number k out of range"):
        tinytorch.kthvalue(T([1.0, 2.0]), 0)
    with pytest.raises(RuntimeError, match="selected number k out of range"):
        tinytorch.kthvalue(T(1.0), 2)
    for f, name in ((lambda x: tinytorch.median(x, 0), "median"), (lambda x: tinytorch.kthvalue(x, 1, 0), "kthvalue"),
                    (lambda x: tinytorch.mode(x, 0), "mode"), (lambda x: tinytorch.nanmedian(x, 0), "nanmedian")):
        with pytest.raises(IndexError, match=rf"{name}\(\): Expected reduction dim 0 to have non-zero size"):
            f(tinytorch.empty(0, 3))
    with pytest.raises(NotImplementedError, match="\"median_cpu\" not implemented for 'Bool'"):
        tinytorch.median(T([True]))
    with pytest.raises(NotImplementedError, match="\"kthvalue_cpu\" not implemented for 'ComplexFloat'"):
        tinytorch.kthvalue(T([1 + 1j]), 1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.median(T(A), 3)
    with pytest.raises(TypeError, match="dim"):
        tinytorch.median(T(A), keepdim=True)


def test_order_statistic_gradients():
    x = leaf(A[0])
    assert gradcheck(lambda t: tinytorch.median(t), (x,))
    assert gradcheck(lambda t: tinytorch.median(t, 1).values, (x,))
    assert gradcheck(lambda t: tinytorch.median(t, 0, True).values, (x,))
    assert gradcheck(lambda t: tinytorch.nanmedian(t), (x,))
    assert gradcheck(lambda t: tinytorch.nanmedian(t, -1).values, (x,))
    assert gradcheck(lambda t: tinytorch.kthvalue(t, 3, 1).values, (x,))
    assert gradgradcheck(lambda t: tinytorch.median(t, 1).values, (x,))
    assert gradgradcheck(lambda t: tinytorch.median(t), (x,))
    # A mode is a repeated value, so finite differences can't see it: its gradient goes to the index it reports.
    xm = leaf([[1.0, 2.0, 2.0, 3.5], [0.5, 0.5, 4.0, 1.5]])
    v, i = tinytorch.mode(xm)
    (v * T([2.0, 3.0], dtype=tinytorch.float64)).sum().backward()
    np.testing.assert_array_equal(xm.grad.numpy(), [[0, 0, 2, 0], [0, 3, 0, 0]])
    assert i.tolist() == [2, 1]
    xn = leaf([[1.0, NAN, 3.0, 0.5], [2.0, 1.5, NAN, NAN]])
    out = tinytorch.nanmedian(xn, 1).values
    out.sum().backward()
    np.testing.assert_array_equal(xn.grad.numpy(), [[1, 0, 0, 0], [0, 1, 0, 0]])
    # The all-element median splits its gradient among equal values, as PyTorch's evenly_distribute_backward.
    xt = leaf([1.0, 2.0, 2.0, 3.0])
    tinytorch.median(xt).backward()
    np.testing.assert_array_equal(xt.grad.numpy(), [0, 0.5, 0.5, 0])
    assert not tinytorch.median(leaf([1.0, 2.0]), 0).indices.requires_grad


# ------------------------------------------------------------------ quantile, nanquantile

def _quantile_ref(x, q, axis, method, ignore_nan):
    fn = np.nanquantile if ignore_nan else np.quantile
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(x, q, axis=axis, method=method)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("dim", [None, 0, -1])
def test_quantile_matches_numpy(interpolation, dim):
    q = np.array([0.0, 0.1, 0.25, 0.5, 0.8, 1.0])
    got = tinytorch.quantile(T(A), T(q), dim, interpolation=interpolation)
    np.testing.assert_allclose(got.numpy(), _quantile_ref(A, q, dim, interpolation, False), rtol=1e-12)
    got = tinytorch.quantile(T(A), 0.3, dim, True, interpolation=interpolation)
    want = _quantile_ref(A, 0.3, dim, interpolation, False)
    want = np.reshape(want, (1, 1, 1)) if dim is None else np.expand_dims(want, dim)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    assert got.shape == want.shape


def test_quantile_shapes_dtypes_and_nan():
    x = T([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, NAN, 7.0]])
    assert math.isnan(tinytorch.quantile(x, 0.5).item())
    np.testing.assert_array_equal(tinytorch.quantile(x, 0.5, dim=1).numpy(), [1.5, NAN])
    np.testing.assert_array_equal(tinytorch.nanquantile(x, 0.5, dim=1).numpy(), [1.5, 5.0])
    assert math.isnan(tinytorch.nanquantile(T([NAN, NAN]), 0.5).item())
    assert tinytorch.quantile(x, T([0.25, 0.5]), dim=1, keepdim=True).shape == (2, 2, 1)
    assert tinytorch.quantile(x, T([0.25, 0.5]), keepdim=True).shape == (2, 1, 1)
    assert tinytorch.quantile(x, T(0.25), keepdim=True).shape == (1, 1)
    assert tinytorch.quantile(T([1.0, 2.0]), T([])).shape == (0,)
    assert tinytorch.quantile(T(3.0), 0.5, dim=0).item() == 3.0
    assert tinytorch.quantile(T([1.0, 2.0]), 1).item() == 2.0
    f32 = tinytorch.quantile(T([1.0, 2.0, 4.0]), 0.75)
    assert f32.dtype == tinytorch.float32 and f32.item() == 3.0
    # nearest rounds half to even: ranks 0.5, 1.5, 2.5 pick 0, 2, 2
    r = tinytorch.quantile(T([0.0, 1.0, 2.0, 3.0, 4.0]), T([0.125, 0.375, 0.625]), interpolation="nearest")
    assert r.tolist() == [0.0, 2.0, 2.0]
    np.testing.assert_allclose(T(A).nanquantile(0.4, 1).numpy(), np.quantile(A, 0.4, axis=1), rtol=1e-12)
    with_nan = A.copy()
    with_nan[0, 1, 2] = with_nan[2, 0, 0] = NAN
    q = T(np.array([0.2, 0.9]))
    for method in ("linear", "lower", "higher", "midpoint", "nearest"):
        np.testing.assert_allclose(tinytorch.nanquantile(T(with_nan), q, 2, interpolation=method).numpy(),
                                   _quantile_ref(with_nan, [0.2, 0.9], 2, method, True), rtol=1e-12)


def test_quantile_errors():
    x = T([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"q must be in the range \[0, 1\] but got 1.5"):
        tinytorch.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        tinytorch.quantile(x, T([0.5, 1.5]))
    with pytest.raises(RuntimeError, match="q must be a scalar or 1D tensor"):
        tinytorch.quantile(x, T([[0.5]]))
    with pytest.raises(RuntimeError, match="q tensor must be same dtype as the input tensor"):
        tinytorch.quantile(x, T([0.5], dtype=tinytorch.float64))
    with pytest.raises(RuntimeError, match="input tensor must be either float or double dtype"):
        tinytorch.quantile(T([1, 2]), 0.5)
    with pytest.raises(RuntimeError, match="input tensor must be non-empty"):
        tinytorch.nanquantile(tinytorch.empty(0, 3), 0.5, dim=1)
    with pytest.raises(RuntimeError, match="interpolation must be one of linear, lower, higher, midpoint or "
                                           "nearest, but got foo"):
        tinytorch.quantile(x, 0.5, interpolation="foo")
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.quantile(x, 0.5, dim=2)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_gradients(interpolation):
    x = leaf(A[0])
    q = T([0.15, 0.5, 0.9], dtype=tinytorch.float64)
    assert gradcheck(lambda t: tinytorch.quantile(t, q, 1, interpolation=interpolation), (x,))
    assert gradcheck(lambda t: tinytorch.quantile(t, 0.3, interpolation=interpolation), (x,))
    xn = leaf([[1.0, NAN, 3.0, 0.5, 2.0], [2.0, 1.5, NAN, NAN, -1.0]])
    assert gradcheck(lambda t: tinytorch.nanquantile(t, q, 1, True, interpolation=interpolation), (xn,))


def test_quantile_second_derivative_and_gradient_in_q():
    x = leaf(A[0])
    assert gradgradcheck(lambda t: tinytorch.quantile(t, 0.35, 0), (x,))
    q = tinytorch.tensor([0.2, 0.7], dtype=tinytorch.float64, requires_grad=True)
    assert gradcheck(lambda t, qq: tinytorch.quantile(t, qq, 1), (x, q))


# ------------------------------------------------------------------ nansum, nanmean, aminmax

WITH_NAN = np.where(RNG.random((3, 4)) < 0.3, NAN, RNG.standard_normal((3, 4)))


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_nansum_and_nanmean_match_numpy(dim, keepdim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_allclose(tinytorch.nansum(T(WITH_NAN), dim, keepdim).numpy(),
                                   np.nansum(WITH_NAN, axis=dim, keepdims=keepdim), rtol=1e-12)
        np.testing.assert_allclose(tinytorch.nanmean(T(WITH_NAN), dim, keepdim).numpy(),
                                   np.nanmean(WITH_NAN, axis=dim, keepdims=keepdim), rtol=1e-12)


def test_nansum_and_nanmean_dtypes_and_edges():
    s = tinytorch.nansum(T([1, 2], dtype=tinytorch.int32))
    assert s.dtype == tinytorch.int64 and s.item() == 3
    assert tinytorch.nansum(T([True, True])).item() == 2
    assert tinytorch.nansum(T([1.0, NAN], dtype=tinytorch.float32), dtype=tinytorch.float64).dtype == tinytorch.float64
    assert tinytorch.nansum(tinytorch.empty(0)).item() == 0.0
    assert T([NAN, 2.0]).nansum().item() == 2.0
    assert math.isnan(tinytorch.nanmean(tinytorch.empty(0)).item())
    np.testing.assert_array_equal(tinytorch.nanmean(T([[NAN, NAN], [2.0, 3.0]]), 1).numpy(), [NAN, 2.5])
    assert T([1.0, NAN, 3.0]).nanmean().item() == 2.0
    with pytest.raises(RuntimeError, match="nanmean\\(\\): expected input to have floating point or complex dtype "
                                           "but got Long"):
        tinytorch.nanmean(T([1, 2]))
    with pytest.raises(RuntimeError, match="nansum does not support complex inputs"):
        tinytorch.nansum(T([1 + 1j]))


def test_nansum_and_nanmean_gradients():
    x = leaf(WITH_NAN)
    for f in (lambda t: tinytorch.nansum(t), lambda t: tinytorch.nansum(t, 1, True),
              lambda t: tinytorch.nanmean(t, 0), lambda t: tinytorch.nanmean(t)):
        y = f(x)
        (g,) = tinytorch.autograd.grad(y.sum(), x)
        assert np.all(g.numpy()[np.isnan(WITH_NAN)] == 0)
    clean = leaf(A[0])
    assert gradcheck(lambda t: tinytorch.nansum(t, (0, 1)), (clean,))
    assert gradcheck(lambda t: tinytorch.nanmean(t, -1, True), (clean,))
    assert gradgradcheck(lambda t: tinytorch.nanmean(t, 0) ** 2, (clean,))
    z = leaf([1.0, NAN, 2.0])
    tinytorch.nansum(z, dtype=tinytorch.float32).backward()  # the float32 gradient comes back as float64
    assert z.grad.dtype == tinytorch.float64 and z.grad.tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("dim", [None, 0, -1])
def test_aminmax_matches_numpy(dim):
    for keepdim in (False, True):
        lo, hi = tinytorch.aminmax(T(A), dim=dim, keepdim=keepdim)
        np.testing.assert_array_equal(lo.numpy(), A.min(axis=dim, keepdims=keepdim))
        np.testing.assert_array_equal(hi.numpy(), A.max(axis=dim, keepdims=keepdim))
    r = T(A).aminmax(dim=dim)
    assert r.min.shape == r.max.shape == np.min(A, axis=dim).shape


def test_aminmax_edges_and_errors():
    assert [t.item() for t in tinytorch.aminmax(T([True, False]))] == [False, True]
    lo, hi = tinytorch.aminmax(T(3), dim=0, keepdim=True)
    assert lo.shape == () and lo.item() == hi.item() == 3
    lo, hi = tinytorch.aminmax(T([[0.0, NAN], [1.0, 2.0]]), dim=1)
    np.testing.assert_array_equal(lo.numpy(), [NAN, 1.0])
    assert tinytorch.aminmax(tinytorch.empty(0, 3), dim=1).min.shape == (0,)
    with pytest.raises(RuntimeError, match="cannot compute aminmax over an empty dimension"):
        tinytorch.aminmax(tinytorch.empty(0))
    with pytest.raises(IndexError, match="aminmax: Expected reduction dim 0 to have non-zero size"):
        tinytorch.aminmax(tinytorch.empty(0, 3), dim=0)
    with pytest.raises(TypeError):
        tinytorch.aminmax(T(A), 0)
    with pytest.raises(NotImplementedError, match="aminmax_cpu"):
        tinytorch.aminmax(T([1 + 1j]))


def test_aminmax_gradients():
    x = leaf(A[0])
    assert gradcheck(lambda t: tinytorch.aminmax(t, dim=1), (x,))
    assert gradcheck(lambda t: tinytorch.aminmax(t), (x,))
    xt = leaf([1.0, 3.0, 1.0, 3.0])
    lo, hi = tinytorch.aminmax(xt)
    (lo + 2 * hi).backward()
    np.testing.assert_array_equal(xt.grad.numpy(), [0.5, 1.0, 0.5, 1.0])  # ties share evenly


# ------------------------------------------------------------------ cummax, cummin, logcumsumexp

def _cum_ref(x, largest):
    """PyTorch's kernel, one step at a time: >= (or <=) moves the index; NaN always does and then sticks."""
    values, indices, out, idx = [], [], x[0], 0
    for i, v in enumerate(x):
        if math.isnan(v) or (not math.isnan(out) and (v >= out if largest else v <= out)):
            out, idx = v, i
        values.append(out)
        indices.append(idx)
    return values, indices


@pytest.mark.parametrize("largest", [True, False])
def test_cummax_cummin_follow_pytorchs_kernel(largest):
    f = tinytorch.cummax if largest else tinytorch.cummin
    rows = [[3.0, 1.0, 2.0, 1.0, NAN, 0.0, NAN, -1.0], [1.0, 3.0, 2.0, 3.0, 0.0, 5.0, 5.0, 1.0],
            RNG.integers(0, 3, 8).astype(float).tolist()]
    for row in rows:
        v, i = f(T(row), 0)
        want_v, want_i = _cum_ref(row, largest)
        np.testing.assert_array_equal(v.numpy(), want_v)
        assert i.tolist() == want_i
    v, i = f(T(A), 1)
    for a in range(3):
        for c in range(5):
            want_v, want_i = _cum_ref(A[a, :, c].tolist(), largest)
            np.testing.assert_array_equal(v.numpy()[a, :, c], want_v)
            assert i.numpy()[a, :, c].tolist() == want_i


def test_cummax_cummin_dtypes_and_edges():
    v, i = tinytorch.cummax(T([1, 3, 2, 3, 0, 5]), 0)
    assert v.dtype == tinytorch.int64 and v.tolist() == [1, 3, 3, 3, 3, 5] and i.tolist() == [0, 1, 1, 3, 3, 5]
    v, i = tinytorch.cummax(T([True, False, True]), 0)
    assert v.tolist() == [True, True, True] and i.tolist() == [0, 0, 2]
    v, i = tinytorch.cummin(T(2.0), 0)
    assert v.item() == 2.0 and i.item() == 0
    v, i = tinytorch.cummax(tinytorch.empty(0, 2), 0)
    assert v.shape == i.shape == (0, 2)
    assert T([[1.0, 3.0], [2.0, 1.0]]).cummin(dim=-1).indices.tolist() == [[0, 0], [0, 1]]
    with pytest.raises(NotImplementedError, match="cummax_cpu"):
        tinytorch.cummax(T([1 + 1j]), 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.cummax(T([1.0]), 1)


def test_cummax_cummin_gradients():
    x = leaf(A[0])
    for f in (tinytorch.cummax, tinytorch.cummin):
        assert gradcheck(lambda t: f(t, 1).values, (x,))
        assert gradcheck(lambda t: f(t, 0).values, (x,))
        assert gradgradcheck(lambda t: f(t, -1).values, (x,))
    xs = leaf(3.0)
    tinytorch.cummax(xs, 0).values.backward()
    assert xs.grad.item() == 1.0


def _logcumsumexp_ref(x, axis):
    return np.log(np.cumsum(np.exp(x), axis=axis))


def test_logcumsumexp_matches_numpy_and_is_stable():
    for dim in (0, 1, -1):
        np.testing.assert_allclose(tinytorch.logcumsumexp(T(A), dim).numpy(), _logcumsumexp_ref(A, dim), rtol=1e-12)
    big = np.array([1000.0, 1001.0, 999.0])
    np.testing.assert_allclose(tinytorch.logcumsumexp(T(big), 0).numpy(),
                               1000.0 + _logcumsumexp_ref(big - 1000.0, 0), rtol=1e-12)
    inf = float("inf")
    np.testing.assert_array_equal(tinytorch.logcumsumexp(T([-inf, -inf, 1.0]), 0).numpy(), [-inf, -inf, 1.0])
    np.testing.assert_array_equal(tinytorch.logcumsumexp(T([inf, -inf, 1.0, NAN, 2.0]), 0).numpy(),
                                  [inf, inf, inf, NAN, NAN])
    assert tinytorch.logcumsumexp(T(2.0), 0).item() == 2.0
    assert tinytorch.logcumsumexp(tinytorch.empty(0), 0).shape == (0,)
    h = tinytorch.logcumsumexp(T([1.0, 2.0], dtype=tinytorch.float16), 0)
    assert h.dtype == tinytorch.float16
    assert T([0.0, 0.0]).logcumsumexp(0).tolist() == pytest.approx([0.0, math.log(2)])
    with pytest.raises(NotImplementedError, match="\"logcumsumexp_out_cpu\" not implemented for 'Long'"):
        tinytorch.logcumsumexp(T([1, 2]), 0)


def test_logcumsumexp_gradients():
    x = leaf(A[0])
    assert gradcheck(lambda t: tinytorch.logcumsumexp(t, 1), (x,))
    assert gradcheck(lambda t: tinytorch.logcumsumexp(t, 0), (x,))
    assert gradgradcheck(lambda t: tinytorch.logcumsumexp(t, 1), (x,))
    big = leaf([1000.0, 1001.0, 999.0])
    g = tinytorch.ones(3, dtype=tinytorch.float64)
    (grad,) = tinytorch.autograd.grad(tinytorch.logcumsumexp(big, 0), big, g)
    assert np.all(np.isfinite(grad.numpy()))
    assert gradcheck(lambda t: tinytorch.logcumsumexp(t - 1000.0, 0), (big,))


# ------------------------------------------------------------------ cov, corrcoef

X = RNG.standard_normal((3, 6))
FW = np.array([1, 2, 1, 3, 1, 2])
AW = RNG.random(6) + 0.1


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_cov_matches_numpy(correction):
    np.testing.assert_allclose(tinytorch.cov(T(X), correction=correction).numpy(), np.cov(X, ddof=correction),
                               rtol=1e-12)
    np.testing.assert_allclose(tinytorch.cov(T(X), correction=correction, fweights=T(FW)).numpy(),
                               np.cov(X, ddof=correction, fweights=FW), rtol=1e-12)
    np.testing.assert_allclose(tinytorch.cov(T(X), correction=correction, aweights=T(AW)).numpy(),
                               np.cov(X, ddof=correction, aweights=AW), rtol=1e-12)
    np.testing.assert_allclose(T(X).cov(correction=correction, fweights=T(FW), aweights=T(AW)).numpy(),
                               np.cov(X, ddof=correction, fweights=FW, aweights=AW), rtol=1e-12)
    np.testing.assert_allclose(tinytorch.cov(T(X[0]), correction=correction).numpy(), np.cov(X[0], ddof=correction),
                               rtol=1e-12)


def test_cov_dtypes_and_edges():
    c = tinytorch.cov(T([0, 1, 2]))
    assert c.dtype == tinytorch.float32 and c.shape == () and c.item() == 1.0
    assert tinytorch.cov(T([[1, 2], [3, 5]])).tolist() == [[0.5, 1.0], [1.0, 2.0]]
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert math.isnan(tinytorch.cov(T([0.0])).item())
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert tinytorch.cov(tinytorch.empty(2, 0)).shape == (2, 2)
    cx = np.array([[1 + 1j, 2, 3 - 1j], [0, 1, 1j]])
    np.testing.assert_allclose(tinytorch.cov(T(cx)).numpy(), np.cov(cx), rtol=1e-12)


def test_cov_errors():
    x = T(X)
    cases = [({"fweights": T(FW.astype(float))}, "expected fweights to have integral dtype but got fweights with "
                                                  "Double dtype"),
             ({"fweights": T(-FW)}, "fweights cannot be negative"),
             ({"fweights": T(FW[:2])}, "same numel as there are observations in the input but got 2 != 6"),
             ({"fweights": T(FW[None])}, "expected fweights to have one or fewer dimensions"),
             ({"aweights": T(FW)}, "expected aweights to have floating point dtype but got aweights with Long"),
             ({"aweights": T(-AW)}, "aweights cannot be negative"),
             ({"aweights": T(np.zeros(6))}, "weights sum to zero, can't be normalized")]
    for kwargs, message in cases:
        with pytest.raises(RuntimeError, match=message):
            tinytorch.cov(x, **kwargs)
    with pytest.raises(RuntimeError, match="expected input to have two or fewer dimensions but got an input with 3"):
        tinytorch.cov(T(A))
    with pytest.raises(RuntimeError, match="bool dtype is not supported"):
        tinytorch.cov(T([True, False]))
    with pytest.raises(TypeError):
        tinytorch.cov(x, 1)


def test_corrcoef_matches_numpy():
    np.testing.assert_allclose(tinytorch.corrcoef(T(X)).numpy(), np.corrcoef(X), rtol=1e-12)
    assert tinytorch.corrcoef(T(X[0])).item() == 1.0
    assert math.isnan(tinytorch.corrcoef(T([1, 1, 1])).item())
    c = tinytorch.corrcoef(T([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5], [1.0, 1.0, 1.0]]))
    assert np.isnan(c.numpy()[2]).all() and abs(c[0, 1].item()) <= 1
    cx = np.array([[1 + 1j, 2, 3 - 1j], [0, 1, 1j]])
    np.testing.assert_allclose(T(cx).corrcoef().numpy(), np.corrcoef(cx), rtol=1e-12)
    with pytest.raises(RuntimeError, match="corrcoef\\(\\): expected input to have two or fewer dimensions"):
        tinytorch.corrcoef(T(A))


def test_cov_and_corrcoef_gradients():
    x = leaf(X)
    fw, aw = T(FW), T(AW)
    assert gradcheck(lambda t: tinytorch.cov(t), (x,))
    assert gradcheck(lambda t: tinytorch.cov(t, correction=0, fweights=fw, aweights=aw), (x,))
    assert gradcheck(lambda t: tinytorch.corrcoef(t), (x,))
    assert gradgradcheck(lambda t: tinytorch.cov(t, aweights=aw), (x,))
    assert gradgradcheck(lambda t: tinytorch.corrcoef(t), (x,))
    w = tinytorch.tensor(AW, requires_grad=True)
    assert gradcheck(lambda t, ww: tinytorch.cov(t, aweights=ww), (x, w))


def test_integer_and_index_outputs_never_require_grad():
    x = leaf(A[0])
    for r in (tinytorch.median(x, 1), tinytorch.kthvalue(x, 1), tinytorch.mode(x), tinytorch.cummax(x, 0),
              tinytorch.cummin(x, 1), tinytorch.nanmedian(x, 0)):
        assert r.values.requires_grad and not r.indices.requires_grad
    assert repr(tinytorch.median(T([1.0]), 0)).startswith("torch.return_types.median(")
    assert "min=" in repr(tinytorch.aminmax(T([1.0])))


# ------------------------------------------------------------------ against PyTorch

@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_statistics_match_pytorch():
    import torch
    x = A.copy()
    x[0, 1, 2] = x[2, 3, 0] = NAN
    ints = RNG.integers(0, 5, (4, 7))
    cases = [
        (lambda L, t: L.median(t), A), (lambda L, t: L.median(t, 1), A), (lambda L, t: L.median(t, -1, True), x),
        (lambda L, t: L.median(t), x), (lambda L, t: L.nanmedian(t), x), (lambda L, t: L.nanmedian(t, 2), x),
        (lambda L, t: L.median(t), ints), (lambda L, t: L.kthvalue(t, 2, 0, True), A),
        (lambda L, t: L.kthvalue(t, 3), ints), (lambda L, t: L.mode(t, 0), ints), (lambda L, t: L.mode(t), ints),
        (lambda L, t: L.quantile(t, 0.3), A), (lambda L, t: L.quantile(t, 0.7, 1, True), x),
        (lambda L, t: L.quantile(t, L.tensor([0.1, 0.5, 1.0], dtype=L.float64), -1, interpolation="midpoint"), A),
        (lambda L, t: L.nanquantile(t, L.tensor([0.3, 0.6], dtype=L.float64), 2, interpolation="nearest"), x),
        (lambda L, t: L.nanquantile(t, 0.45, interpolation="higher"), x),
        (lambda L, t: L.quantile(t.float(), 0.41, 1, interpolation="lower"), A),
        (lambda L, t: L.quantile(t.float(), 0.123, 0), A),
        (lambda L, t: L.nansum(t), x), (lambda L, t: L.nansum(t, (0, 2), True), x), (lambda L, t: L.nansum(t), ints),
        (lambda L, t: L.nansum(t.int(), 1), ints), (lambda L, t: L.nansum(t.float(), 1, dtype=L.float64), x),
        (lambda L, t: L.nanmean(t, 1), x), (lambda L, t: L.nanmean(t.float()), x),
        (lambda L, t: L.aminmax(t), A), (lambda L, t: L.aminmax(t, dim=1, keepdim=True), x),
        (lambda L, t: L.aminmax(t > 2), ints),
        (lambda L, t: L.cummax(t, 1), x), (lambda L, t: L.cummin(t, 0), ints), (lambda L, t: L.cummin(t, -1), x),
        (lambda L, t: L.logcumsumexp(t, 1), x), (lambda L, t: L.logcumsumexp(t.float(), 2), A),
        (lambda L, t: L.cov(t[0]), A), (lambda L, t: L.cov(t), ints), (lambda L, t: L.cov(t[0].float()), A),
        (lambda L, t: L.cov(t[0], correction=0, fweights=L.tensor(FW[:5]), aweights=L.tensor(AW[:5])), A),
        (lambda L, t: L.cov(t[0].float(), aweights=L.tensor(AW[:5])), A),
        (lambda L, t: L.corrcoef(t[1]), A), (lambda L, t: L.corrcoef(t.float()), ints),
    ]
    for i, (f, data) in enumerate(cases):
        got, want = f(tinytorch, tinytorch.tensor(data)), f(torch, torch.tensor(data))
        got = tuple(got) if isinstance(got, tuple) else (got,)
        want = tuple(want) if isinstance(want, tuple) else (want,)
        assert len(got) == len(want), i
        for g, w in zip(got, want):
            assert g.dtype.name == str(w.dtype).replace("torch.", ""), (i, g.dtype, w.dtype)
            assert tuple(g.shape) == tuple(w.shape), (i, g.shape, w.shape)
            if g.dtype == tinytorch.int64 and w.dtype == torch.int64 and len(got) == 2 and g is got[1]:
                continue  # index picks among ties are the kernel's choice: checked below where values are distinct
            np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64),
                                       rtol=1e-6 if g.dtype == tinytorch.float32 else 1e-12, err_msg=str(i))
    for f in (lambda L, t: L.median(t, 1), lambda L, t: L.kthvalue(t, 2, 0), lambda L, t: L.cummax(t, 2),
              lambda L, t: L.cummin(t, 1), lambda L, t: L.nanmedian(t, 0), lambda L, t: L.mode(t.round(), 0),
              lambda L, t: L.aminmax(t)):
        got, want = f(tinytorch, tinytorch.tensor(A)), f(torch, torch.tensor(A))
        assert type(got).__name__ == type(want).__name__
        for field in got._fields:
            assert np.array_equal(getattr(got, field).numpy(), getattr(want, field).numpy())


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_statistics_gradients_match_pytorch():
    import torch
    x = A[0].copy()
    x[1, 2] = NAN
    fns = [lambda L, t: L.median(t), lambda L, t: L.median(t, 1).values, lambda L, t: L.nanmedian(t),
           lambda L, t: L.nanmedian(t, 0, True).values, lambda L, t: L.kthvalue(t, 2).values,
           lambda L, t: L.nanquantile(t, 0.4, 1), lambda L, t: L.nansum(t, 0), lambda L, t: L.nanmean(t),
           lambda L, t: L.cummax(t.nan_to_num(), 1).values, lambda L, t: L.cummin(t.nan_to_num(), 0).values,
           lambda L, t: L.logcumsumexp(t.nan_to_num(), 1), lambda L, t: L.cov(t.nan_to_num()),
           lambda L, t: L.corrcoef(t.nan_to_num()), lambda L, t: sum(L.aminmax(t.nan_to_num(), dim=0)),
           lambda L, t: L.quantile(t.nan_to_num(), L.tensor([0.2, 0.75], dtype=L.float64), 0,
                                   interpolation="midpoint")]
    go = RNG.standard_normal(64)
    for i, f in enumerate(fns):
        a, b = tinytorch.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = f(tinytorch, a), f(torch, b)
        g = go[:ya.numel()].reshape(tuple(ya.shape))
        ya.backward(tinytorch.tensor(g))
        yb.backward(torch.tensor(g))
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=str(i))
