"""Indexing ops: values against NumPy and PyTorch, views vs copies, gradients (gradcheck in float64),
setitem's version counter and history rebase, and PyTorch's error messages."""
import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck
import tinytorch.nn.functional as F


def _np(t):
    return np.asarray(t.detach().cpu())


def _leaf(shape, device, seed=0):
    rng = np.random.default_rng(seed)
    return tinytorch.tensor(rng.standard_normal(shape), dtype=tinytorch.float64, device=device, requires_grad=True)


def _long(values, device):
    return tinytorch.tensor(values, dtype=tinytorch.int64, device=device)


# ------------------------------------------------------------------ getitem values

BASIC_KEYS = [
    1, -1, (1, 2), (slice(None), -1), (slice(1, None), slice(None, None, 2)), (slice(-3, -1),),
    (None, Ellipsis, 0), (Ellipsis, None), (0, slice(None), None), (slice(None, None, 3), slice(-2, None)),
    (slice(5, 10),),
]

ADVANCED_KEYS = [
    [0, 2], ([0, 2], [1, 3]), (slice(None), [3, 0, 0]), ([[0, 1], [2, 2]],), (1, [0, 2]),
    ([0, 1], slice(1, 3)), (Ellipsis, [1]), (np.array([2, 0]),), ([-1, 0], [-4, 3]),
]


@pytest.mark.parametrize("key", BASIC_KEYS)
def test_basic_indexing_matches_numpy_and_is_a_view(key, device):
    a = np.arange(12.0).reshape(3, 4)
    x = tinytorch.tensor(a, device=device)
    y = x[key]
    np.testing.assert_array_equal(_np(y), a[key])
    assert y._base is x
    if y.numel():
        before = x._version
        y[...] = -1.0
        flat = _np(x)
        assert (flat == -1.0).sum() == y.numel()
        assert x._version > before


@pytest.mark.parametrize("key", ADVANCED_KEYS)
def test_advanced_indexing_matches_numpy_and_copies(key, device):
    a = np.arange(12.0).reshape(3, 4)
    x = tinytorch.tensor(a, device=device)
    y = x[key]
    np.testing.assert_array_equal(_np(y), a[key])
    assert y._base is None
    y._data[...] = -5
    np.testing.assert_array_equal(_np(x), a)


def test_indexing_with_tensors(device):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = tinytorch.tensor(a, device=device)
    idx = _long([2, 0], device)
    np.testing.assert_array_equal(_np(x[:, idx]), a[:, [2, 0]])
    mask = x > 10
    np.testing.assert_array_equal(_np(x[mask]), a[a > 10])
    row_mask = tinytorch.tensor([True, False], device=device)
    np.testing.assert_array_equal(_np(x[row_mask]), a[[True, False]])
    np.testing.assert_array_equal(_np(x[0, tinytorch.tensor([True, False, True], device=device)]), a[0, [0, 2]])
    np.testing.assert_array_equal(_np(x[tinytorch.tensor(1, device=device)]), a[1])
    assert x[1, 2, 3].shape == ()
    assert float(x[1, 2, 3]) == 23.0


def test_indexing_matches_torch(device):
    torch = pytest.importorskip("torch")
    a = np.arange(60.0).reshape(3, 4, 5)
    x = tinytorch.tensor(a, device=device)
    tx = torch.tensor(a)
    keys = [
        (slice(None), [0, 3], slice(1, None)), ([0, 2], slice(None), [1, 4]), (Ellipsis, [4, 0]),
        (None, 1, [0, 0, 3]), ([[0], [2]], [1, 2]), (1, slice(None), [True, False, True, False, True]),
    ]
    for key in keys:
        np.testing.assert_array_equal(_np(x[key]), tx[key].numpy())


def test_integers_apply_before_advanced_indices(device):
    # PyTorch selects with integers first: x[1, :, mask] is (x[1])[:, mask], not NumPy's transposed layout.
    a = np.arange(60.0).reshape(3, 4, 5)
    x = tinytorch.tensor(a, device=device)
    mask = [True, False, True, False, True]
    np.testing.assert_array_equal(_np(x[1, :, mask]), a[1][:, mask])
    np.testing.assert_array_equal(_np(x[:, 2, [0, 4]]), a[:, 2][:, [0, 4]])
    x[1, :, [0, 4]] = -1.0
    a[1][:, [0, 4]] = -1.0
    np.testing.assert_array_equal(_np(x), a)
    g = _leaf((3, 4, 5), device)
    assert gradcheck(lambda t: t[1, :, [0, 4, 4]], (g,))


def test_index_errors():
    x = tinytorch.zeros(3, 4)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[5]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 1 with size 4"):
        x[0, -5]
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[tinytorch.tensor([0, 3])]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match=r"The shape of the mask \[2\] at index 0 does not match the shape of the "
                                         r"indexed tensor \[3, 4\] at index 0"):
        x[tinytorch.tensor([True, False])]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        x[tinytorch.tensor([0.0])]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(IndexError, match="only integers, slices"):
        x["a"]


# ------------------------------------------------------------------ getitem gradients


@pytest.mark.parametrize("key", [
    (1,), (slice(None), -1), (slice(None, None, 2), slice(1, 3)), (None, Ellipsis, 2),
    ([0, 0, 2],), (slice(None), [3, 1, 3]), ([0, 2], [1, 1]), ([[1, 1], [0, 2]], slice(1, None)),
])
def test_getitem_gradcheck(key, device):
    x = _leaf((3, 4), device)
    assert gradcheck(lambda a: a[key], (x,))
    assert gradgradcheck(lambda a: a[key], (x,))


def test_getitem_repeated_indices_accumulate(device):
    x = _leaf((4,), device)
    x[_long([1, 1, 3, 1], device)].sum().backward()
    np.testing.assert_array_equal(_np(x.grad), [0.0, 3.0, 0.0, 1.0])


def test_bool_mask_gradient(device):
    x = _leaf((3, 4), device)
    mask = x.detach() > 0
    assert gradcheck(lambda a: a[mask], (x,))
    x[mask].sum().backward()
    np.testing.assert_array_equal(_np(x.grad), _np(mask).astype(float))


# ------------------------------------------------------------------ setitem


def test_setitem_values(device):
    a = np.zeros((3, 4))
    x = tinytorch.tensor(a, device=device)
    x[0] = 1.0
    x[:, -1] = tinytorch.tensor([7.0, 8.0, 9.0], device=device)
    x[x > 7.5] = -1.0
    x[[1, 2], [0, 1]] = tinytorch.tensor([2.0, 3.0], device=device)
    a[0] = 1.0
    a[:, -1] = [7.0, 8.0, 9.0]
    a[a > 7.5] = -1.0
    a[[1, 2], [0, 1]] = [2.0, 3.0]
    np.testing.assert_array_equal(_np(x), a)
    assert x._version == 4


def test_setitem_casts_to_the_tensors_dtype(device):
    x = tinytorch.zeros(3, dtype=tinytorch.int64, device=device)
    x[1] = 2.7
    assert x.dtype == tinytorch.int64
    assert x.tolist() == [0, 2, 0]


def test_setitem_through_view_writes_the_base(device):
    x = tinytorch.zeros(3, 4, device=device)
    row = x[1]
    row[2] = 5.0
    assert float(x[1, 2]) == 5.0
    assert x._version == row._version == 1


def test_setitem_records_index_put(device):
    x = _leaf((3, 4), device)
    v = _leaf((2,), device, seed=1)

    def f(a, b):
        c = a * 1.0
        c[1, [0, 2]] = b
        return c
    assert gradcheck(f, (x, v))
    assert gradgradcheck(f, (x, v))
    c = x * 2.0
    c[0] = v.sum()
    assert c.grad_fn.name() == "IndexPutBackward0"
    c.sum().backward()
    expect = np.full((3, 4), 2.0)
    expect[0] = 0.0
    np.testing.assert_array_equal(_np(x.grad), expect)
    np.testing.assert_array_equal(_np(v.grad), [4.0, 4.0])


def test_setitem_broadcast_value_gradient(device):
    x = _leaf((3, 4), device)
    v = _leaf((1, 4), device, seed=2)

    def f(a, b):
        c = a.clone()
        c[:2] = b
        return c
    assert gradcheck(f, (x, v))


def test_setitem_on_leaf_requiring_grad_errors():
    x = tinytorch.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        x[0] = 1.0
    with tinytorch.no_grad():
        x[0] = 1.0
    assert x.tolist() == [1.0, 0.0, 0.0]


def test_setitem_on_view_of_leaf_errors():
    x = tinytorch.zeros(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0][1] = 2.0


def test_setitem_bumps_version_and_invalidates_saved_tensors():
    x = tinytorch.ones(3, requires_grad=True)
    y = x * 1.0
    z = y * y  # saves y
    y[0] = 3.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_setitem_shape_mismatch_errors():
    x = tinytorch.zeros(3, 4)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[0] = tinytorch.ones(3)


def test_index_put(device):
    x = _leaf((5,), device)
    idx = (_long([0, 0, 3], device),)
    v = _leaf((3,), device, seed=3)
    assert gradcheck(lambda a, b: a.index_put(idx, b, accumulate=True), (x, v))
    uniq = (_long([4, 0, 3], device),)
    assert gradcheck(lambda a, b: a.index_put(uniq, b), (x, v))
    y = tinytorch.zeros(5, device=device)
    y.index_put_(idx, tinytorch.ones(3, device=device), accumulate=True)
    assert y.tolist() == [2.0, 0.0, 0.0, 1.0, 0.0]


# ------------------------------------------------------------------ gather / scatter


def test_gather_values_and_grad(device):
    x = _leaf((3, 4), device)
    idx = _long([[0, 1, 1], [2, 0, 0]], device)
    ref = np.take_along_axis(_np(x)[:2, :], np.array([[0, 1, 1], [2, 0, 0]]), axis=1)
    np.testing.assert_array_equal(_np(x.gather(1, idx)), ref)
    assert gradcheck(lambda a: a.gather(1, idx), (x,))
    assert gradgradcheck(lambda a: a.gather(1, idx), (x,))
    idx0 = _long([[2, 0, 1, 1]], device)
    assert gradcheck(lambda a: tinytorch.gather(a, 0, idx0), (x,))


def test_gather_errors():
    x = tinytorch.zeros(3, 4)
    with pytest.raises(RuntimeError, match="gather\\(\\): Expected dtype int32/int64 for index"):
        x.gather(0, tinytorch.tensor([[1]], dtype=tinytorch.int16))
    for op in (lambda i: x.scatter(0, i, 1.0), lambda i: x.scatter_add(0, i, x[:1, :1])):
        with pytest.raises(RuntimeError, match="^scatter\\(\\): Expected dtype int32/int64 for index$"):
            op(tinytorch.tensor([[1]], dtype=tinytorch.uint8))
    # int32 indices (built from NumPy int32 arrays) work as int64 ones do, as in PyTorch
    i32 = tinytorch.tensor([[1, 0, 2, 2]], dtype=tinytorch.int32)
    y = tinytorch.arange(12.0).view(3, 4)
    assert y.gather(0, i32).tolist() == [[4.0, 1.0, 10.0, 11.0]]
    assert x.scatter(0, i32, 1.0).sum().item() == 4 and x.scatter_add(0, i32, y[:1]).tolist()[1] == [0.0, 0.0, 0.0, 0.0]
    assert x.scatter_add(0, i32, y[:1]).tolist()[0] == [0.0, 1.0, 0.0, 0.0]
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x.gather(0, tinytorch.tensor([[5]]))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions as input tensor"):
        x.gather(0, tinytorch.tensor([1]))


def test_scatter_and_scatter_add(device):
    x = _leaf((3, 4), device)
    idx = _long([[0, 1, 2, 0], [2, 0, 1, 1]], device)
    src = _leaf((2, 4), device, seed=4)
    big_src = _leaf((3, 5), device, seed=5)
    a, s = _np(x), _np(src)
    out = a.copy()
    for i in range(2):
        for j in range(4):
            out[_np(idx)[i, j], j] = s[i, j]
    np.testing.assert_array_equal(_np(x.scatter(0, idx, src)), out)
    out = a.copy()
    np.add.at(out, (_np(idx), np.arange(4)[None, :]), s)
    np.testing.assert_allclose(_np(x.scatter_add(0, idx, src)), out)
    uniq = _long([[0, 1, 2, 0], [1, 2, 0, 1]], device)
    assert gradcheck(lambda a, b: a.scatter(0, uniq, b), (x, src))
    assert gradcheck(lambda a, b: a.scatter_add(0, idx, b), (x, src))
    assert gradgradcheck(lambda a, b: a.scatter_add(0, idx, b), (x, src))
    assert gradcheck(lambda a, b: a.scatter_add(0, idx, b), (x, big_src))
    assert gradcheck(lambda a: a.scatter(1, idx[:, :2], 0.5), (x,))


def test_scatter_inplace(device):
    y = tinytorch.zeros(2, 3, device=device)
    idx = _long([[2, 0]], device)
    y.scatter_(1, idx, tinytorch.tensor([[5.0, 6.0]], device=device))
    assert y.tolist() == [[6.0, 0.0, 5.0], [0.0, 0.0, 0.0]]
    y.scatter_add_(1, idx, tinytorch.tensor([[1.0, 1.0]], device=device))
    assert y.tolist() == [[7.0, 0.0, 6.0], [0.0, 0.0, 0.0]]
    assert y._version == 2


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_reduce_argument():
    torch = pytest.importorskip("torch")
    a = np.arange(8.0).reshape(2, 4) + 1
    idx = np.array([[0, 1, 0, 1], [0, 0, 0, 0]])
    s = np.full((2, 4), 3.0)
    for reduce in ("add", "multiply"):
        got = tinytorch.tensor(a).scatter(0, tinytorch.tensor(idx), tinytorch.tensor(s), reduce=reduce)
        ref = torch.tensor(a).scatter(0, torch.tensor(idx), torch.tensor(s), reduce=reduce)
        np.testing.assert_array_equal(_np(got), ref.numpy())
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        tinytorch.tensor(a).scatter(0, tinytorch.tensor(idx), tinytorch.tensor(s), reduce="max")
    with pytest.raises(RuntimeError, match="the derivative for 'scatter' with a reduce argument is not implemented"):
        tinytorch.tensor(a, requires_grad=True).scatter(0, tinytorch.tensor(idx), tinytorch.tensor(s), reduce="add")


def test_scatter_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5))
    idx = rng.integers(0, 4, (3, 5))
    s = rng.standard_normal((3, 5))
    got = tinytorch.tensor(a).scatter_add(0, tinytorch.tensor(idx), tinytorch.tensor(s))
    np.testing.assert_allclose(_np(got), torch.tensor(a).scatter_add(0, torch.tensor(idx), torch.tensor(s)).numpy())
    got = tinytorch.tensor(a).gather(1, tinytorch.tensor(idx))
    np.testing.assert_array_equal(_np(got), torch.tensor(a).gather(1, torch.tensor(idx)).numpy())


# ------------------------------------------------------------------ index_* ops


def test_index_select(device):
    x = _leaf((3, 4), device)
    idx = _long([2, 0, 2], device)
    np.testing.assert_array_equal(_np(x.index_select(1, idx)), _np(x)[:, [2, 0, 2]])
    np.testing.assert_array_equal(_np(tinytorch.index_select(x, 0, idx)), _np(x)[[2, 0, 2]])
    assert gradcheck(lambda a: a.index_select(1, idx), (x,))
    assert gradgradcheck(lambda a: a.index_select(0, idx), (x,))
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_select(0, _long([3], device))


def test_index_add_copy_fill(device):
    x = _leaf((3, 4), device)
    idx = _long([2, 0, 2], device)
    src = _leaf((3, 3), device, seed=6)
    expect = _np(x).copy()
    np.add.at(expect, (slice(None), [2, 0, 2]), 2 * _np(src))
    np.testing.assert_allclose(_np(x.index_add(1, idx, src, alpha=2)), expect)
    assert gradcheck(lambda a, b: a.index_add(1, idx, b, alpha=2), (x, src))
    assert gradgradcheck(lambda a, b: a.index_add(1, idx, b), (x, src))
    cidx = _long([3, 0], device)
    csrc = _leaf((3, 2), device, seed=7)
    expect = _np(x).copy()
    expect[:, [3, 0]] = _np(csrc)
    np.testing.assert_array_equal(_np(x.index_copy(1, cidx, csrc)), expect)
    assert gradcheck(lambda a, b: a.index_copy(1, cidx, b), (x, csrc))
    expect = _np(x).copy()
    expect[[2, 0]] = -1.5
    np.testing.assert_array_equal(_np(x.index_fill(0, _long([2, 0], device), -1.5)), expect)
    assert gradcheck(lambda a: a.index_fill(0, idx, 1.5), (x,))
    val = _leaf((), device, seed=8)
    assert gradcheck(lambda a, v: a.index_fill(1, idx, v), (x, val))
    y = tinytorch.zeros(3, device=device)
    y.index_add_(0, _long([1, 1], device), tinytorch.ones(2, device=device))
    assert y.tolist() == [0.0, 2.0, 0.0]


def test_index_add_shape_error():
    x = tinytorch.zeros(3, 4)
    with pytest.raises(RuntimeError, match="index_add"):
        x.index_add(0, tinytorch.tensor([0]), tinytorch.ones(2, 4))


def test_masked_select_and_scatter(device):
    x = _leaf((3, 4), device)
    mask = tinytorch.tensor(np.random.default_rng(1).random((3, 4)) > 0.5, device=device)
    np.testing.assert_array_equal(_np(x.masked_select(mask)), _np(x)[_np(mask)])
    assert gradcheck(lambda a: a.masked_select(mask), (x,))
    row_mask = tinytorch.tensor([True, False, True, True], device=device)
    assert _np(tinytorch.masked_select(x, row_mask)).shape == (9,)
    assert gradcheck(lambda a: a.masked_select(row_mask), (x,))
    src = _leaf((12,), device, seed=9)
    out = _np(x).copy()
    n = int(_np(mask).sum())
    out[_np(mask)] = _np(src)[:n]
    np.testing.assert_array_equal(_np(x.masked_scatter(mask, src)), out)
    assert gradcheck(lambda a, s: a.masked_scatter(mask, s), (x, src))


def test_take_along_dim(device):
    x = _leaf((3, 4), device)
    idx = _long([[0], [3], [1]], device)
    np.testing.assert_array_equal(_np(tinytorch.take_along_dim(x, idx, 1)),
                                  np.take_along_axis(_np(x), np.array([[0], [3], [1]]), 1))
    assert gradcheck(lambda a: tinytorch.take_along_dim(a, idx, 1), (x,))
    flat = _long([11, 0, 5], device)
    np.testing.assert_array_equal(_np(x.take_along_dim(flat)), _np(x).reshape(-1)[[11, 0, 5]])
    bidx = _long([[1, 2]], device)  # broadcasts over the rows of x
    assert tinytorch.take_along_dim(x, bidx, 1).shape == (3, 2)
    assert gradcheck(lambda a: tinytorch.take_along_dim(a, bidx, 1), (x,))


def test_nonzero(device):
    a = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    x = tinytorch.tensor(a, device=device)
    nz = x.nonzero()
    assert nz.dtype == tinytorch.int64
    np.testing.assert_array_equal(_np(nz), np.argwhere(a))
    rows, cols = tinytorch.nonzero(x, as_tuple=True)
    np.testing.assert_array_equal(_np(rows), [0, 1, 1])
    np.testing.assert_array_equal(_np(cols), [1, 0, 2])
    assert tinytorch.zeros(0, 2).nonzero().shape == (0, 2)


# ------------------------------------------------------------------ embedding, one_hot


def test_embedding(device):
    w = _leaf((5, 3), device)
    idx = _long([[1, 2, 1], [0, 4, 1]], device)
    np.testing.assert_array_equal(_np(F.embedding(idx, w)), _np(w)[_np(idx)])
    assert gradcheck(lambda a: F.embedding(idx, a), (w,))
    assert gradgradcheck(lambda a: F.embedding(idx, a), (w,))
    F.embedding(idx, w, padding_idx=1).sum().backward()
    np.testing.assert_array_equal(_np(w.grad), [[1.0] * 3, [0.0] * 3, [1.0] * 3, [0.0] * 3, [1.0] * 3])
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(_long([5], device), w)


def test_embedding_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    wa = rng.standard_normal((6, 4))
    ia = np.array([[1, 2, 1, 5], [0, 1, 1, 3]])
    g = rng.standard_normal((2, 4, 4))
    for kw in ({}, {"padding_idx": 1}, {"scale_grad_by_freq": True}, {"padding_idx": -1, "scale_grad_by_freq": True}):
        w = tinytorch.tensor(wa, requires_grad=True)
        tw = torch.tensor(wa, requires_grad=True)
        F.embedding(tinytorch.tensor(ia), w, **kw).backward(tinytorch.tensor(g))
        torch.nn.functional.embedding(torch.tensor(ia), tw, **kw).backward(torch.tensor(g))
        np.testing.assert_allclose(_np(w.grad), tw.grad.numpy())
    w = tinytorch.tensor(wa)
    tw = torch.tensor(wa)
    F.embedding(tinytorch.tensor(ia), w, max_norm=1.0)
    torch.nn.functional.embedding(torch.tensor(ia), tw, max_norm=1.0)
    np.testing.assert_allclose(_np(w), tw.numpy(), rtol=1e-6)


def test_one_hot(device):
    t = _long([0, 2, 1], device)
    np.testing.assert_array_equal(_np(F.one_hot(t)), np.eye(3, dtype=np.int64)[[0, 2, 1]])
    oh = F.one_hot(_long([[1], [3]], device), num_classes=5)
    assert oh.shape == (2, 1, 5) and oh.dtype == tinytorch.int64
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
        F.one_hot(t, 2)
    with pytest.raises(RuntimeError, match="Class values must be non-negative."):
        F.one_hot(_long([-1], device))
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor"):
        F.one_hot(tinytorch.tensor([1.0]))


def test_inplace_indexing_ops_record_history(device):
    x = _leaf((3, 4), device)
    idx = _long([[0, 1, 2, 0], [2, 0, 1, 1]], device)
    src = _leaf((2, 4), device, seed=10)
    cols = _leaf((3, 2), device, seed=11)

    def f(a, s, c):
        b = a * 1.0
        b.scatter_add_(0, idx, s)
        b.index_fill_(1, _long([0], device), 0.0)
        b.index_copy_(1, _long([3, 2], device), c)
        b.index_put_((_long([1, 1], device),), s[0], accumulate=True)
        return b
    assert gradcheck(f, (x, src, cols))
    b = x * 1.0
    version = b._version
    b.scatter_(0, idx[:1], src[:1])
    assert b._version == version + 1 and b.grad_fn.name() == "ScatterBackward0"


def test_row_index_backward_accumulates_repeated_and_negative_rows():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((50, 3, 4))
    rows = np.array([3, -1, 3, 49, 0, -50, 7])
    x = tinytorch.tensor(a, requires_grad=True)
    g = rng.standard_normal((7, 3, 4))
    x[tinytorch.tensor(rows)].backward(tinytorch.tensor(g))
    want = np.zeros_like(a)
    np.add.at(want, rows, g)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-15, atol=1e-15)
    m = a[:, 0, 0] > 0
    y = tinytorch.tensor(a, requires_grad=True)
    (y[tinytorch.tensor(m)] * 3).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), np.where(m[:, None, None], 3.0, 0.0) * np.ones_like(a))
    z = tinytorch.zeros(5, 2)
    z.index_put_((tinytorch.tensor([1, 1, 4]),), tinytorch.tensor([1.0, 2.0]), accumulate=True)
    np.testing.assert_array_equal(z.numpy(), [[0, 0], [2, 4], [0, 0], [0, 0], [1, 2]])
    assert tinytorch.autograd.gradcheck(lambda t: t[tinytorch.tensor([2, 2, -1])], (tinytorch.tensor(
        a[:4, 0], requires_grad=True),))
