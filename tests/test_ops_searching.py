"""Searching and counting (searchsorted, bucketize, unique, unique_consecutive, isin, bincount, histc, histogram):
values against pure-Python/NumPy references, edge cases (empty, 0-d, dims, dtypes), PyTorch's errors, and
PyTorch's results when it is importable."""
import bisect
import collections
import importlib.util
import itertools

import numpy as np
import pytest

import tinytorch

RNG = np.random.default_rng(0)
NAN = float("nan")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def T(a, **kw):
    return tinytorch.tensor(a, **kw)


# ------------------------------------------------------------------ searchsorted, bucketize

SEQ = [1.0, 2.0, 2.0, 3.5, 7.0]
VALS = [[0.5, 2.0, 3.5], [7.0, 9.0, 2.5]]


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_1d_matches_bisect(right):
    find = bisect.bisect_right if right else bisect.bisect_left
    got = tinytorch.searchsorted(T(SEQ), T(VALS), right=right)
    assert got.dtype == tinytorch.int64 and got.shape == (2, 3)
    assert got.tolist() == [[find(SEQ, v) for v in row] for row in VALS]
    side = tinytorch.searchsorted(T(SEQ), T(VALS), side="right" if right else "left", out_int32=True)
    assert side.dtype == tinytorch.int32 and side.tolist() == got.tolist()


def test_searchsorted_batched_scalar_and_sorter():
    seq = np.sort(RNG.standard_normal((2, 3, 6)), axis=-1)
    vals = RNG.standard_normal((2, 3, 4))
    got = tinytorch.searchsorted(T(seq), T(vals))
    for i, j in itertools.product(range(2), range(3)):
        assert got[i, j].tolist() == [bisect.bisect_left(seq[i, j].tolist(), v) for v in vals[i, j]]
    s = tinytorch.searchsorted(T(SEQ), 2.0)
    assert s.shape == () and s.item() == 1
    assert tinytorch.searchsorted(T(SEQ), 2.0, right=True).item() == 3
    assert tinytorch.searchsorted(T([1, 2, 3]), 2.5).item() == 2  # an int sequence compares as float with 2.5
    assert tinytorch.searchsorted(T([1, 2, 3]), T([True])).tolist() == [0]
    unsorted = [3.0, 1.0, 2.0]
    order = T([1, 2, 0])
    assert tinytorch.searchsorted(T(unsorted), T([2.0, 0.0, 5.0]), sorter=order).tolist() == [1, 0, 3]
    assert tinytorch.searchsorted(T(unsorted), T([2.0]), sorter=order, side="right").tolist() == [2]
    assert tinytorch.searchsorted(T(SEQ), T([NAN, 1.0])).tolist() == [5, 0]  # NaN goes after everything
    assert tinytorch.searchsorted(T(SEQ), tinytorch.empty(0, 3)).shape == (0, 3)
    assert tinytorch.searchsorted(tinytorch.empty(0), T([1.0])).tolist() == [0]
    assert tinytorch.searchsorted(tinytorch.empty(2, 0), T([[1.0], [2.0]])).tolist() == [[0], [0]]
    assert not tinytorch.searchsorted(T(SEQ), T([1.0], requires_grad=True)).requires_grad


def test_searchsorted_errors():
    cases = [
        (lambda: tinytorch.searchsorted(T([[1.0, 2.0]]), 2.5), "input value can be a scalar only when boundaries "
                                                               r"tensor dimension is 1, but we got boundaries tensor "
                                                               r"dim\(2\)"),
        (lambda: tinytorch.searchsorted(T([[1.0, 2.0], [1.0, 2.0]]), T([[2.5], [1.0], [2.0]])),
         r"first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries "
         r"tensor \[2, 2\] and input value tensor \[3, 1\]"),
        (lambda: tinytorch.searchsorted(T([1.0]), T([2.0]), side="left", right=True),
         "side and right can't be set to opposites"),
        (lambda: tinytorch.searchsorted(T([1.0]), T([2.0]), side="lft"), "side can only be 'left' or 'right' but got "
                                                                         "lft"),
        (lambda: tinytorch.searchsorted(T([3.0, 1.0]), T([2.0]), sorter=T([1])),
         r"boundary and sorter must have the same size, but got boundary tensor \[2\]and got sorter tensor \[1\]"),
        (lambda: tinytorch.searchsorted(T([3.0, 1.0]), T([2.0]), sorter=T([1.0, 0.0])),
         "sorter must be a tensor of long dtype but got dtype Float"),
        (lambda: tinytorch.searchsorted(T([3.0, 1.0]), T([2.0]), sorter=T([1, 5])), "sorter index out of range"),
        (lambda: tinytorch.searchsorted(T(1.0), T([2.0])), "boundaries tensor should have positive dimension"),
        (lambda: tinytorch.bucketize(T([1.0]), T([[1.0, 2.0]])), r"boundaries tensor must be 1 dimension, but got "
                                                                 r"dim\(2\)"),
    ]
    for f, message in cases:
        with pytest.raises(RuntimeError, match=message):
            f()


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_matches_bisect(right):
    bounds = [1.0, 2.0, 3.0]
    x = [[0.0, 1.0, 1.5], [3.0, 5.0, 2.0]]
    find = bisect.bisect_right if right else bisect.bisect_left
    got = tinytorch.bucketize(T(x), T(bounds), right=right)
    assert got.tolist() == [[find(bounds, v) for v in row] for row in x]
    assert tinytorch.bucketize(2, T(bounds), right=right).item() == find(bounds, 2)
    assert tinytorch.bucketize(T([1, 5]), T(bounds), out_int32=True).dtype == tinytorch.int32


# ------------------------------------------------------------------ unique, unique_consecutive

def _unique_ref(flat):
    values = sorted(set(flat))
    return values, [values.index(v) for v in flat], [flat.count(v) for v in values]


def test_unique_sorts_and_counts():
    x = RNG.integers(-3, 4, (4, 6))
    values, inverse, counts = _unique_ref(x.ravel().tolist())
    out, inv, cnt = tinytorch.unique(T(x), return_inverse=True, return_counts=True)
    assert out.tolist() == values and cnt.tolist() == counts
    assert inv.shape == (4, 6) and inv.reshape(-1).tolist() == inverse
    assert inv.dtype == cnt.dtype == tinytorch.int64 and out.dtype == tinytorch.int64
    assert T(x).unique().tolist() == values
    assert tinytorch.unique(T(x), sorted=False).tolist() == values
    u, c = tinytorch.unique(T(x), return_counts=True)  # a pair when only counts are asked for
    assert c.tolist() == counts
    u, i = tinytorch.unique(T(x), return_inverse=True)
    assert i.reshape(-1).tolist() == inverse
    assert tinytorch.unique(T([True, False, True])).tolist() == [False, True]


def test_unique_nan_empty_and_0d():
    out, inv, cnt = tinytorch.unique(T([NAN, 1.0, NAN]), return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(out.numpy(), [1.0, NAN, NAN])  # every NaN is distinct
    assert inv.tolist() == [1, 0, 2] and cnt.tolist() == [1, 1, 1]
    out, inv, cnt = tinytorch.unique(tinytorch.empty(0, 3), return_inverse=True, return_counts=True)
    assert out.shape == (0,) and inv.shape == (0, 3) and cnt.shape == (0,)
    out, inv, cnt = tinytorch.unique(T(3.0), return_inverse=True, return_counts=True)
    assert out.tolist() == [3.0] and inv.shape == () and cnt.tolist() == [1]


def test_unique_along_a_dim_sorts_slices_lexicographically():
    x = RNG.integers(0, 2, (7, 3))
    rows = [tuple(r) for r in x.tolist()]
    want = sorted(set(rows))
    out, inv, cnt = tinytorch.unique(T(x), dim=0, return_inverse=True, return_counts=True)
    assert [tuple(r) for r in out.tolist()] == want
    assert inv.tolist() == [want.index(r) for r in rows] and cnt.tolist() == [rows.count(r) for r in want]
    out, inv, cnt = T(x.T.copy()).unique(dim=-1, return_inverse=True, return_counts=True)
    assert [tuple(c) for c in out.T.tolist()] == want and inv.tolist() == [want.index(r) for r in rows]
    out, inv, cnt = tinytorch.unique(tinytorch.empty(0, 3), dim=0, return_inverse=True, return_counts=True)
    assert out.shape == (0, 3) and inv.shape == (0,) and cnt.shape == (0,)
    assert tinytorch.unique(T([[NAN, 1.0], [NAN, 1.0]]), dim=0).shape == (2, 2)  # NaN rows never match
    with pytest.raises(RuntimeError, match="There are 0 sized dimensions, and they aren't selected"):
        tinytorch.unique(tinytorch.empty(0, 3), dim=1)
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        tinytorch.unique(T(3.0), dim=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.unique(T([1, 2]), dim=2)


def test_unique_consecutive_collapses_runs():
    x = [1, 1, 2, 2, 3, 1, 1, 2]
    runs = [(k, len(list(g))) for k, g in itertools.groupby(x)]
    out, inv, cnt = tinytorch.unique_consecutive(T(x), return_inverse=True, return_counts=True)
    assert out.tolist() == [k for k, _ in runs] and cnt.tolist() == [n for _, n in runs]
    assert inv.tolist() == [i for i, (_, n) in enumerate(runs) for _ in range(n)]
    assert T([[1, 1, 2], [1, 1, 2]]).unique_consecutive().tolist() == [1, 2, 1, 2]
    out, inv, cnt = tinytorch.unique_consecutive(T([[1, 1, 2], [1, 1, 3]]), dim=1, return_inverse=True,
                                                 return_counts=True)
    assert out.tolist() == [[1, 2], [1, 3]] and inv.tolist() == [0, 0, 1] and cnt.tolist() == [2, 1]
    assert tinytorch.unique_consecutive(T([[1, 2], [1, 2], [3, 4], [1, 2]]), dim=0).tolist() == [[1, 2], [3, 4],
                                                                                                  [1, 2]]
    out, cnt = tinytorch.unique_consecutive(T([NAN, NAN, 1.0]), return_counts=True)
    assert cnt.tolist() == [1, 1, 1]
    out, inv, cnt = tinytorch.unique_consecutive(T(2.0), return_inverse=True, return_counts=True)
    assert out.tolist() == [2.0] and inv.shape == () and cnt.tolist() == [1]
    out, inv, cnt = tinytorch.unique_consecutive(tinytorch.empty(0), return_inverse=True, return_counts=True)
    assert out.shape == inv.shape == cnt.shape == (0,)
    assert tinytorch.unique_consecutive(tinytorch.empty(2, 0), dim=1).shape == (2, 0)
    with pytest.raises(RuntimeError, match="There are 0 sized dimensions"):
        tinytorch.unique_consecutive(tinytorch.empty(2, 0), dim=0)


def test_unique_of_a_float_tensor_requiring_grad_has_no_derivative():
    x = T([1.0, 2.0, 1.0], requires_grad=True)
    u = tinytorch.unique(x)
    assert u.requires_grad
    with pytest.raises(NotImplementedError, match="the derivative for '_unique2' is not implemented"):
        u.sum().backward()
    with pytest.raises(NotImplementedError, match="the derivative for 'unique_consecutive' is not implemented"):
        tinytorch.unique_consecutive(x)[0].sum().backward()
    with pytest.raises(NotImplementedError, match="the derivative for 'unique_dim' is not implemented"):
        tinytorch.unique(x.reshape(1, 3), dim=1).sum().backward()
    _, inv, cnt = tinytorch.unique(x, return_inverse=True, return_counts=True)
    assert not inv.requires_grad and not cnt.requires_grad


# ------------------------------------------------------------------ isin

def test_isin_matches_python_membership():
    x = RNG.integers(0, 10, (3, 4))
    test = [2, 5, 7, 7]
    got = tinytorch.isin(T(x), T(test))
    assert got.dtype == tinytorch.bool and got.shape == (3, 4)
    assert got.tolist() == [[v in test for v in row] for row in x.tolist()]
    assert tinytorch.isin(T(x), T(test), invert=True).tolist() == [[v not in test for v in row] for row in x.tolist()]
    assert tinytorch.isin(T(np.unique(x)), T([2, 5, 7]), assume_unique=True).tolist() == \
        [v in test for v in np.unique(x).tolist()]
    assert tinytorch.isin(T([1, 2, 3]), 2).tolist() == [False, True, False]
    s = tinytorch.isin(2, T([1, 2, 3]))
    assert s.shape == () and s.item() is True
    assert tinytorch.isin(T([1.0, 2.0, 3.0]), T([2, 5])).tolist() == [False, True, False]
    assert tinytorch.isin(T([1.5, 2.0]), T([2, 5]), invert=True).tolist() == [True, False]
    assert tinytorch.isin(T([NAN, 2.0]), T([NAN, 5.0])).tolist() == [False, False]
    assert tinytorch.isin(tinytorch.empty(0), T([1.0])).shape == (0,)
    assert tinytorch.isin(T([1.0]), tinytorch.empty(0)).tolist() == [False]


def test_isin_errors():
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin\\(\\): Bool"):
        tinytorch.isin(T([1]), T([True]))
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin\\(\\): ComplexFloat"):
        tinytorch.isin(T([1 + 0j]), T([1]))
    with pytest.raises(TypeError, match="isin\\(\\) received an invalid combination of arguments"):
        tinytorch.isin(2, 3)


# ------------------------------------------------------------------ bincount

def test_bincount_counts_and_weights():
    x = RNG.integers(0, 6, 20)
    counts = collections.Counter(x.tolist())
    got = tinytorch.bincount(T(x))
    assert got.dtype == tinytorch.int64 and got.tolist() == [counts[i] for i in range(x.max() + 1)]
    assert T(x).bincount(minlength=10).tolist() == [counts[i] for i in range(10)]
    w = RNG.random(20)
    want = [sum(wi for xi, wi in zip(x.tolist(), w.tolist()) if xi == i) for i in range(x.max() + 1)]
    r = tinytorch.bincount(T(x), T(w))
    assert r.dtype == tinytorch.float64
    np.testing.assert_allclose(r.numpy(), want, rtol=1e-12)
    assert tinytorch.bincount(T(x), T(w, dtype=tinytorch.float32)).dtype == tinytorch.float32
    assert tinytorch.bincount(T([1, 1, 3]), T([1, 1, 2])).tolist() == [0.0, 2.0, 0.0, 2.0]  # int weights: double
    assert tinytorch.bincount(T([1, 1, 3]), T([1, 1, 2])).dtype == tinytorch.float64
    assert tinytorch.bincount(T([1, 1, 3], dtype=tinytorch.uint8)).tolist() == [0, 2, 0, 1]
    e = tinytorch.bincount(tinytorch.empty(0, dtype=tinytorch.int64), minlength=3)
    assert e.dtype == tinytorch.int64 and e.tolist() == [0, 0, 0]
    assert tinytorch.bincount(tinytorch.empty(0, dtype=tinytorch.int64), tinytorch.empty(0)).dtype == tinytorch.int64


def test_bincount_errors():
    for bad in (T([1, -1, 3]), T([[1]]), T(3)):
        with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
            tinytorch.bincount(bad)
    for bad, name in ((T([1.0]), "Float"), (T([True]), "Bool")):
        with pytest.raises(NotImplementedError, match=f"\"bincount_cpu\" not implemented for '{name}'"):
            tinytorch.bincount(bad)
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        tinytorch.bincount(T([1]), minlength=-1)
    for w in (T([1.0, 2.0]), T([[1.0]])):
        with pytest.raises(RuntimeError, match="weights should be 1-d and have the same length as input"):
            tinytorch.bincount(T([1]), w)
    out = tinytorch.bincount(T([1, 1]), T([0.5, 1.0], requires_grad=True))
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="derivative for aten::bincount is not implemented"):
        out.sum().backward()


# ------------------------------------------------------------------ histc, histogram

def _hist_ref(x, bins, lo, hi, weights=None):
    """Equal-width bins over [lo, hi], the last one closed, out-of-range and NaN left out (float64)."""
    counts = [0.0] * bins
    for i, v in enumerate(x):
        if not (lo <= v <= hi):
            continue
        b = min(int((v - lo) / (hi - lo) * bins), bins - 1)
        counts[b] += 1.0 if weights is None else weights[i]
    return counts


def test_histc_counts_in_equal_bins():
    x = RNG.standard_normal(200)
    got = tinytorch.histc(T(x), bins=7, min=-1.0, max=1.5)
    assert got.dtype == tinytorch.float64 and got.shape == (7,)
    assert got.tolist() == _hist_ref(x, 7, -1.0, 1.5)
    assert T(x).histc(5).tolist() == _hist_ref(x, 5, x.min(), x.max())  # min == max: the data's range
    assert tinytorch.histc(T([1.0, 2, 1, 4]), bins=4).tolist() == [2.0, 1.0, 0.0, 1.0]
    assert tinytorch.histc(T([1.0, 2, 1, NAN, float("inf")]), bins=4, min=0, max=3).tolist() == [0.0, 2.0, 1.0, 0.0]
    assert tinytorch.histc(T([1.0, 1.0]), bins=4).tolist() == [0.0, 0.0, 2.0, 0.0]  # a point range widens by 1
    assert tinytorch.histc(T([1.0, 1.0]), bins=4, min=2, max=2).tolist() == [0.0, 0.0, 2.0, 0.0]
    assert tinytorch.histc(tinytorch.empty(0), bins=3).tolist() == [0.0, 0.0, 0.0]
    assert tinytorch.histc(T([[1.0, 2.0], [3.0, 4.0]], dtype=tinytorch.float64), bins=3).tolist() == [1.0, 1.0, 2.0]
    h = tinytorch.histc(T([1.0, 2.0], dtype=tinytorch.float16), bins=3)
    assert h.dtype == tinytorch.float16 and h.tolist() == [1.0, 0.0, 1.0]
    assert not tinytorch.histc(T([1.0, 2.0], requires_grad=True)).requires_grad


def test_histc_errors():
    with pytest.raises(NotImplementedError, match="\"histogram_cpu\" not implemented for 'Long'"):
        tinytorch.histc(T([1, 2]))
    with pytest.raises(RuntimeError, match="bins must be > 0, but got 0 for dimension 0"):
        tinytorch.histc(T([1.0]), bins=0)
    with pytest.raises(RuntimeError, match="torch.histc: max must be larger than min"):
        tinytorch.histc(T([1.0]), bins=3, min=3, max=1)
    with pytest.raises(RuntimeError, match=r"torch.histc: range of \[1, inf\] is not finite"):
        tinytorch.histc(T([1.0, 2.0, float("inf")]), bins=3)
    with pytest.raises(RuntimeError, match="is not finite"):
        tinytorch.histc(T([1.0, NAN]), bins=3)


def test_histogram_with_int_bins():
    x = RNG.standard_normal(300)
    hist, edges = tinytorch.histogram(T(x), 9)
    want_h, want_e = np.histogram(x, 9)
    np.testing.assert_allclose(edges.numpy(), want_e, rtol=1e-12)
    assert hist.tolist() == want_h.astype(float).tolist()
    w = RNG.random(300)
    r = T(x).histogram(bins=6, range=(-1.0, 2.0), weight=T(w), density=True)
    want_h, want_e = np.histogram(x, 6, range=(-1.0, 2.0), weights=w, density=True)
    np.testing.assert_allclose(r.hist.numpy(), want_h, rtol=1e-12)
    np.testing.assert_allclose(r.bin_edges.numpy(), want_e, rtol=1e-12)
    np.testing.assert_allclose(tinytorch.histogram(T(x), 5, range=(-1, 1), weight=T(w)).hist.numpy(),
                               _hist_ref(x, 5, -1.0, 1.0, w), rtol=1e-12)
    hist, edges = tinytorch.histogram(tinytorch.empty(0), 3)  # no data: the range is [0, 1]
    assert hist.tolist() == [0.0, 0.0, 0.0] and edges.tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1])
    hist, edges = tinytorch.histogram(T([2.0, 2.0]), 2)  # a point range widens by 0.5 each way
    assert hist.tolist() == [0.0, 2.0] and edges.tolist() == [1.5, 2.0, 2.5]
    hist, edges = tinytorch.histogram(T([2.0, NAN]), 2, range=(0.0, 3.0))
    assert hist.tolist() == [0.0, 1.0]
    assert hist.dtype == edges.dtype == tinytorch.float32
    r = tinytorch.histogram(T([1.0, 2.0]), 2)
    assert type(r).__name__ == "histogram" and r.hist is r[0] and repr(r).startswith("torch.return_types.")


def test_histogram_with_bin_edges():
    x = RNG.standard_normal(100)
    edges = np.array([-3.0, -0.5, 0.0, 0.25, 2.0])
    hist, out_edges = tinytorch.histogram(T(x), T(edges))
    want, _ = np.histogram(x, edges)
    assert hist.tolist() == want.astype(float).tolist() and out_edges.tolist() == edges.tolist()
    hist, _ = tinytorch.histogram(T([1.0, 2, 1, 4]), bins=T([0.0, 1.5, 3, 10]), weight=T([1.0, 2, 3, 4]),
                                  density=True)
    np.testing.assert_allclose(hist.numpy(), [4 / 15, 2 / 15, 4 / 70], rtol=1e-6)


def test_histogram_errors():
    x = T([1.0, 2.0, 1.0, 4.0])
    cases = [
        (lambda: tinytorch.histogram(x, 4, range=(3.0, 0.0)), RuntimeError,
         "min should not exceed max, but got min 3 max 0 for dimension 0"),
        (lambda: tinytorch.histogram(x, 4, range=(0.0, float("inf"))), RuntimeError,
         r"dimension 0's range \[0, inf\] is not finite"),
        (lambda: tinytorch.histogram(T([2.0, NAN]), 2), RuntimeError, r"range \[nan, nan\] is not finite"),
        (lambda: tinytorch.histogram(x, T([0, 1, 3])), RuntimeError,
         "input tensor and bins tensors should have the same dtype, but got input with dtype float and bins for "
         "dimension 0 with dtype long int"),
        (lambda: tinytorch.histogram(x, T([[0.0, 1.0]])), RuntimeError,
         "bins tensor should have one dimension, but got 2 dimensions"),
        (lambda: tinytorch.histogram(x, T([3.0])), RuntimeError, "bins must be > 0, but got 0 for dimension 0"),
        (lambda: tinytorch.histogram(x, 0), RuntimeError, "bins must be > 0, but got 0 for dimension 0"),
        (lambda: tinytorch.histogram(x, 3, weight=T([1.0, 2.0, 3.0])), RuntimeError,
         r"should have the same shape as the input tensor excluding its innermost dimension, but got input with "
         r"shape \[4, 1\] and weight with shape \[3\]"),
        (lambda: tinytorch.histogram(x, 3, weight=T([1, 2, 3, 4])), RuntimeError,
         r"input tensor and weight tensor should have the same dtype, but got input\(float\), and weight\(long int\)"),
        (lambda: tinytorch.histogram(x, 2, range=(0, 1, 2)), RuntimeError,
         "for a 1-dimensional histogram range should have 2 elements, but got 3"),
        (lambda: tinytorch.histogram(T([1, 2]), 3), NotImplementedError, "\"histogramdd\" not implemented for 'Long'"),
        (lambda: tinytorch.histogram(T([1.0], dtype=tinytorch.float16), 3), NotImplementedError,
         "not implemented for 'Half'"),
        (lambda: tinytorch.histogram(x, T([0.0, 1.0]), range=(0.0, 1.0)), TypeError, "range"),
    ]
    for f, error, message in cases:
        with pytest.raises(error, match=message):
            f()
    r = tinytorch.histogram(T([1.0, 2.0], requires_grad=True), 3)
    assert r.hist.requires_grad and r.bin_edges.requires_grad
    with pytest.raises(RuntimeError, match="derivative for aten::histogram is not implemented"):
        r.hist.sum().backward()


# ------------------------------------------------------------------ against PyTorch

def _same(got, want, exact: bool = True):
    got = tuple(got) if isinstance(got, tuple) else (got,)
    want = tuple(want) if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype.name == str(w.dtype).replace("torch.", ""), (g.dtype, w.dtype)
        assert tuple(g.shape) == tuple(w.shape), (g.shape, w.shape)
        if exact:
            np.testing.assert_array_equal(g.numpy(), w.numpy())
        else:
            scale = float(np.abs(w.numpy()).max()) if w.numel() else 0.0  # edges near 0 err by an ulp of the range
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.skipif(not HAS_TORCH, reason="compares with PyTorch")
def test_searching_matches_pytorch():
    import torch
    seq = np.sort(RNG.standard_normal((2, 3, 8)), axis=-1).astype(np.float32)
    vals = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    vals[0, 0, 0] = NAN
    ints = RNG.integers(0, 6, (5, 7))
    flt = np.round(RNG.standard_normal((4, 6)), 1)
    flt[1, 1] = NAN
    cases = [
        (lambda L: L.searchsorted(L.tensor(seq[0, 0]), L.tensor(vals))),
        (lambda L: L.searchsorted(L.tensor(seq), L.tensor(vals), right=True)),
        (lambda L: L.searchsorted(L.tensor(seq), L.tensor(vals), side="right", out_int32=True)),
        (lambda L: L.searchsorted(L.tensor(seq[1, 2]), 0.1)),
        (lambda L: L.searchsorted(L.tensor([1, 2, 3]), 2.5)),
        (lambda L: L.searchsorted(L.tensor([3.0, 1.0, 2.0]), L.tensor([[2.0, 0.5]]), sorter=L.tensor([1, 2, 0]))),
        (lambda L: L.bucketize(L.tensor(vals), L.tensor(seq[0, 1]), right=True)),
        (lambda L: L.bucketize(0.3, L.tensor(seq[0, 1]))),
        (lambda L: L.unique(L.tensor(ints), return_inverse=True, return_counts=True)),
        (lambda L: L.unique(L.tensor(flt), return_inverse=True, return_counts=True)),
        (lambda L: L.unique(L.tensor(ints[:, :2] % 2), dim=0, return_inverse=True, return_counts=True)),
        (lambda L: L.unique(L.tensor(ints % 2), dim=1, return_inverse=True, return_counts=True)),
        (lambda L: L.unique(L.tensor(ints) > 2, return_counts=True)),
        (lambda L: L.unique_consecutive(L.tensor(ints // 3), return_inverse=True, return_counts=True)),
        (lambda L: L.unique_consecutive(L.tensor(ints // 4), dim=1, return_inverse=True, return_counts=True)),
        (lambda L: L.unique_consecutive(L.tensor(flt > 0), return_counts=True)),
        (lambda L: L.isin(L.tensor(ints), L.tensor([1, 4]))),
        (lambda L: L.isin(L.tensor(flt), L.tensor([0.1, 0.5]).double(), invert=True)),
        (lambda L: L.isin(3, L.tensor(ints))),
        (lambda L: L.isin(L.tensor(ints), 3)),
        (lambda L: L.bincount(L.tensor(ints[0]))),
        (lambda L: L.bincount(L.tensor(ints[0]), minlength=9)),
        (lambda L: L.bincount(L.tensor(ints[0]).int(), L.tensor(flt[0, :1].repeat(7)), 3)),
        (lambda L: L.bincount(L.tensor(ints[1]), L.tensor(ints[2]))),
        (lambda L: L.histc(L.tensor(vals.ravel()[1:]), bins=13)),
        (lambda L: L.histc(L.tensor(flt), bins=5, min=-1, max=1)),
        (lambda L: L.histogram(L.tensor(vals.ravel()[1:]), 11)),
        (lambda L: L.histogram(L.tensor(flt), 4, range=(-1.0, 1.0), weight=L.tensor(np.abs(flt)), density=True)),
        (lambda L: L.histogram(L.tensor(flt), bins=L.tensor([-2.0, -0.5, 0.0, 0.7, 3.0], dtype=L.float64))),
    ]
    for i, f in enumerate(cases):
        _same(f(tinytorch), f(torch), exact=i < 24)
    # Bins are decided in float32, as PyTorch does. (PyTorch's vectorised linspace rounds some interior edges
    # differently from its scalar formula, which tinytorch follows, by an ulp.)
    x = RNG.standard_normal(5000).astype(np.float32) * 3
    _same(tinytorch.histc(tinytorch.tensor(x), 37), torch.histc(torch.tensor(x), 37))
    for f in (lambda L: L.histogram(L.tensor(x), 29), lambda L: L.histogram(L.tensor(x), 13),
              lambda L: L.histogram(L.tensor(x), 17, range=(-2.3, 4.1))):
        got, want = f(tinytorch), f(torch)
        _same(got.hist, want.hist)
        _same(got.bin_edges, want.bin_edges, exact=False)
