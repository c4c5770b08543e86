"""The remaining Tensor methods: in-place forms, strided views, storage queries, random fills."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch
from tinytorch._ops.tensor_methods import strided

HAS_TORCH = importlib.util.find_spec("torch") is not None
gradcheck, gradgradcheck = tinytorch.autograd.gradcheck, tinytorch.autograd.gradgradcheck


def f64(a, requires_grad=False):
    return tinytorch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# ------------------------------------------------------------------ in-place forms

UNARY = [("absolute_", np.abs), ("acos_", np.arccos), ("arccos_", np.arccos), ("asin_", np.arcsin),
         ("arcsin_", np.arcsin), ("atan_", np.arctan), ("arctan_", np.arctan), ("cosh_", np.cosh),
         ("sinh_", np.sinh), ("tan_", np.tan), ("expm1_", np.expm1), ("exp2_", np.exp2), ("log10_", np.log10),
         ("log1p_", np.log1p), ("log2_", np.log2), ("frac_", lambda v: v - np.trunc(v)), ("sgn_", np.sign),
         ("negative_", np.negative), ("conj_physical_", np.conj)]


@pytest.mark.parametrize("name,ref", UNARY)
def test_unary_inplace_values_and_version(name, ref):
    v = np.array([0.1, 0.5, 0.9])
    x = f64(v)
    y = getattr(x, name)()
    assert y is x and x._version == 1
    np.testing.assert_allclose(x.numpy(), ref(v), rtol=1e-12)


@pytest.mark.parametrize("name,_", UNARY[:-3])
def test_unary_inplace_leaf_error_and_grad(name, _):
    a = f64([0.2, 0.4], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        getattr(a, name)()
    assert gradcheck(lambda t: getattr(t * 1, name)(), (f64([0.2, 0.4], True),))


def test_binary_and_dim_inplace():
    v, w = np.array([1.5, -2.5, 3.0]), np.array([1.0, 2.0, 0.5])
    x = f64(v); x.atan2_(f64(w)); np.testing.assert_allclose(x.numpy(), np.arctan2(v, w))
    x = f64(v); x.arctan2_(f64(w)); np.testing.assert_allclose(x.numpy(), np.arctan2(v, w))
    x = f64(v); x.fmod_(2.0); np.testing.assert_allclose(x.numpy(), np.fmod(v, 2.0))
    x = f64(v); x.true_divide_(f64(w)); np.testing.assert_allclose(x.numpy(), v / w)
    x = f64(v); x.cumsum_(0); np.testing.assert_allclose(x.numpy(), np.cumsum(v))
    x = f64(v); x.cumprod_(-1); np.testing.assert_allclose(x.numpy(), np.cumprod(v))
    x = f64(v); x.ldexp_(f64([1.0, 2.0, -1.0])); np.testing.assert_allclose(x.numpy(), v * [2, 4, 0.5])
    i = tinytorch.tensor([1, 2], dtype=tinytorch.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.true_divide_(2)
    # a tensor argument requiring grad makes the op recorded even on a plain self
    s = f64([0.5, 1.0]); o = f64([2.0, 3.0], True)
    s.atan2_(o)
    assert s.grad_fn is not None
    s.sum().backward()
    np.testing.assert_allclose(o.grad.numpy(), -np.array([0.5, 1.0]) / (np.array([0.5, 1.0]) ** 2 + [4, 9]))


def test_addmm_baddbmm_inplace():
    rng = np.random.default_rng(0)
    c, a, b = rng.standard_normal((2, 4)), rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    x = f64(c); x.addmm_(f64(a), f64(b), beta=0.5, alpha=2)
    np.testing.assert_allclose(x.numpy(), 0.5 * c + 2 * a @ b)
    C, A, B = rng.standard_normal((2, 2, 4)), rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 3, 4))
    x = f64(C); x.baddbmm_(f64(A), f64(B))
    np.testing.assert_allclose(x.numpy(), C + A @ B)
    assert gradcheck(lambda c_, a_: (c_ * 1).addmm_(a_, f64(b)), (f64(c, True), f64(a, True)))


CMP = [("eq_", np.equal), ("ne_", np.not_equal), ("not_equal_", np.not_equal), ("lt_", np.less),
       ("less_", np.less), ("le_", np.less_equal), ("less_equal_", np.less_equal), ("gt_", np.greater),
       ("greater_", np.greater), ("ge_", np.greater_equal), ("greater_equal_", np.greater_equal),
       ("logical_and_", np.logical_and), ("logical_or_", np.logical_or), ("logical_xor_", np.logical_xor)]


@pytest.mark.parametrize("name,ref", CMP)
def test_comparison_inplace(name, ref):
    v, w = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    x = f64(v)
    getattr(x, name)(f64(w))
    assert x.dtype == tinytorch.float64 and x._version == 1
    np.testing.assert_array_equal(x.numpy(), ref(v, w).astype(np.float64))
    # under autograd the gradient through a comparison is zero, not the old history's
    a = f64(v, True)
    y = a * 3
    getattr(y, name)(f64(w))
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(3))


def test_logical_not_and_bitwise_not_inplace():
    x = tinytorch.tensor([0.0, 2.0]); x.logical_not_()
    np.testing.assert_array_equal(x.numpy(), [1.0, 0.0])
    i = tinytorch.tensor([0, 5]); i.bitwise_not_()
    np.testing.assert_array_equal(i.numpy(), [-1, -6])
    b = tinytorch.tensor([True, False]); b.bitwise_not_()
    np.testing.assert_array_equal(b.numpy(), [False, True])


def test_shape_inplace():
    x = tinytorch.zeros(2, 1, 3)
    assert x.squeeze_(1) is x and x.shape == (2, 3) and x._version == 1
    x.unsqueeze_(0); assert x.shape == (1, 2, 3)
    x.squeeze_(); assert x.shape == (2, 3)
    x.t_(); assert x.shape == (3, 2)
    y = tinytorch.zeros(2, 3, 4)
    y.transpose_(0, 2); assert y.shape == (4, 3, 2)
    y.swapaxes_(0, 1); assert y.shape == (3, 4, 2)
    y.swapdims_(1, 2); assert y.shape == (3, 2, 4)
    a = f64(np.arange(6.0).reshape(2, 3), True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        a.t_()
    b = a * 1
    b.t_()
    assert b.shape == (3, 2)
    (b * f64(np.arange(6.0).reshape(3, 2))).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.arange(6.0).reshape(3, 2).T)


# ------------------------------------------------------------------ metadata and storage

def test_metadata():
    x = tinytorch.arange(10.0)
    assert x.itemsize == 4 and x.nbytes == 40
    assert tinytorch.zeros(3, dtype=tinytorch.float64).itemsize == 8
    assert tinytorch.zeros(0, 2).nbytes == 0
    assert x.storage_offset() == 0 and x[3:].storage_offset() == 3
    assert x.view(2, 5)[1, 2:].storage_offset() == 7
    assert x.layout is strided and repr(strided) == "torch.strided"
    assert x.positive() is x
    with pytest.raises(RuntimeError, match="on a bool tensor is not supported"):
        tinytorch.tensor([True]).positive()
    assert tinytorch.tensor([1]).is_signed() and not tinytorch.tensor([1], dtype=tinytorch.uint8).is_signed()
    assert tinytorch.tensor([0.5]).is_nonzero() and not tinytorch.tensor([[0]]).is_nonzero()
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        x.is_nonzero()
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        tinytorch.zeros(0).is_nonzero()
    assert x.is_same_size(tinytorch.ones(10)) and not x.is_same_size(tinytorch.ones(2, 5))


def test_H():
    m = np.array([[1 + 2j, 3j], [4.0, 5 - 1j], [0, 1]])
    np.testing.assert_array_equal(tinytorch.tensor(m).H.numpy(), m.conj().T)
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        tinytorch.zeros(3).H
    assert gradcheck(lambda a: a.H, (f64(np.ones((2, 3)), True),))


# ------------------------------------------------------------------ strided views

def test_as_strided_values_view_and_errors():
    x = tinytorch.arange(10.0)
    y = x.as_strided((3, 3), (1, 1), 2)
    np.testing.assert_array_equal(y.numpy(), np.arange(2, 5)[None] + np.arange(3)[:, None])
    y[0, 0] = 100.0  # a view: writes reach x
    assert x[2].item() == 100.0
    z = x[4:].as_strided((2, 2), (2, 1))  # storage_offset None: the tensor's own offset
    np.testing.assert_array_equal(z.numpy(), [[4, 5], [6, 7]])
    assert z.storage_offset() == 4
    assert x.as_strided((0, 3), (1, 1)).shape == (0, 3)
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        x.as_strided((4, 4), (3, 1))
    with pytest.raises(RuntimeError, match="mismatch in length"):
        x.as_strided((2, 2), (1,))


def test_as_strided_grad():
    a = f64(np.arange(6.0), True)
    assert gradcheck(lambda t: t.as_strided((2, 2), (2, 1), 1), (a,))
    assert gradgradcheck(lambda t: t.as_strided((2, 2), (1, 2), 1), (a,))
    assert gradcheck(lambda t: t.as_strided((2, 2), (1, 1)), (a,))  # overlapping output: gradients add
    b = f64(np.arange(12.0).reshape(3, 4), True)
    assert gradcheck(lambda t: t.t().as_strided((3, 2), (1, 4), 1), (b,))
    a.as_strided((2, 2), (1, 1)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1, 2, 1, 0, 0, 0])


def _np_unfold(v, d, size, step):
    v = np.moveaxis(v, d, -1)
    wins = [v[..., k:k + size] for k in range(0, v.shape[-1] - size + 1, step)]
    return np.moveaxis(np.stack(wins, axis=-2), -2, d)


@pytest.mark.parametrize("shape,d,size,step", [((7,), 0, 3, 2), ((3, 5), 1, 2, 1), ((4, 3), -2, 4, 1),
                                                ((2, 6, 2), 1, 3, 3), ((5,), 0, 0, 1)])
def test_unfold(shape, d, size, step):
    v = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    x = f64(v)
    y = x.unfold(d, size, step)
    np.testing.assert_array_equal(y.numpy(), _np_unfold(v, d % len(shape), size, step))
    if y.numel():
        assert y._base is x
    assert gradcheck(lambda t: t.unfold(d, size, step), (f64(v, True),))


def test_unfold_grad_sums_overlaps_and_errors():
    a = f64(np.arange(5.0), True)
    a.unfold(0, 3, 1).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1, 2, 3, 2, 1])
    assert gradgradcheck(lambda t: t.unfold(0, 2, 1) ** 2, (f64([0.5, 1.0, 2.0], True),))
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 3 but size is 4"):
        tinytorch.zeros(3).unfold(0, 4, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        tinytorch.zeros(3).unfold(0, 2, 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.zeros(3).unfold(1, 2, 1)


# ------------------------------------------------------------------ fill_diagonal_, frexp, ldexp

@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((3, 5), False), ((7, 3), False), ((7, 3), True),
                                        ((3, 3, 3), False)])
def test_fill_diagonal(shape, wrap):
    ref = np.zeros(shape)
    np.fill_diagonal(ref, 2.5, wrap=wrap)
    x = tinytorch.zeros(*shape, dtype=tinytorch.float64)
    assert x.fill_diagonal_(2.5, wrap=wrap) is x and x._version == 1
    np.testing.assert_array_equal(x.numpy(), ref)


def test_fill_diagonal_errors_and_grad():
    with pytest.raises(RuntimeError, match="dimensions must larger than 1"):
        tinytorch.zeros(3).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="all dimensions of input must be of equal length"):
        tinytorch.zeros(2, 3, 3).fill_diagonal_(1)
    leaf = f64(np.ones((2, 2)), True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf.fill_diagonal_(0)
    (leaf * 2).fill_diagonal_(0).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [[0, 2], [2, 0]])
    i = tinytorch.zeros(2, 2, dtype=tinytorch.int64).fill_diagonal_(3)
    np.testing.assert_array_equal(i.numpy(), [[3, 0], [0, 3]])


def test_frexp_ldexp():
    v = np.array([0.0, 1.5, -6.0, 1e-3])
    m, e = f64(v).frexp()
    rm, re = np.frexp(v)
    np.testing.assert_array_equal(m.numpy(), rm)
    np.testing.assert_array_equal(e.numpy(), re)
    assert e.dtype == tinytorch.int32 and m.dtype == tinytorch.float64
    r = tinytorch.tensor([1.5], dtype=tinytorch.float32).frexp()
    assert r.mantissa.dtype == tinytorch.float32 and r.exponent.item() == 1
    with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
        tinytorch.tensor([1]).frexp()
    np.testing.assert_array_equal(tinytorch.tensor([1, 3]).ldexp(tinytorch.tensor([2, -1])).numpy(), [4.0, 1.5])
    assert gradcheck(lambda a: a.ldexp(f64([1.0, -2.0])), (f64([0.3, 0.7], True),))


# ------------------------------------------------------------------ random fills

def test_random_():
    tinytorch.manual_seed(0)
    x = tinytorch.zeros(2000).random_(3, 7)
    assert set(np.unique(x.numpy())) == {3, 4, 5, 6}
    y = tinytorch.zeros(2000, dtype=tinytorch.int64).random_(5)
    assert set(np.unique(y.numpy())) == {0, 1, 2, 3, 4}
    z = tinytorch.zeros(2000, dtype=tinytorch.uint8).random_()
    assert z.numpy().max() > 200 and z._version == 1
    w = tinytorch.zeros(100).random_(**{"from": -2, "to": 0})
    assert set(np.unique(w.numpy())) <= {-2, -1}
    f = tinytorch.zeros(1000).random_()
    assert 0 <= f.numpy().min() and f.numpy().max() <= 2 ** 24 and f.numpy().max() > 2 ** 20
    with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
        tinytorch.zeros(3).random_(5, 5)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        tinytorch.zeros(3, requires_grad=True).random_()


def test_continuous_fills():
    tinytorch.manual_seed(1)
    c = tinytorch.zeros(20000, dtype=tinytorch.float64).cauchy_(2.0, 0.5)
    assert abs(np.median(c.numpy()) - 2.0) < 0.05
    ln = tinytorch.zeros(20000, dtype=tinytorch.float64).log_normal_(0.5, 0.25)
    assert ln.numpy().min() > 0 and abs(np.log(ln.numpy()).mean() - 0.5) < 0.01
    assert abs(np.log(ln.numpy()).std() - 0.25) < 0.01
    g = tinytorch.zeros(20000).geometric_(0.25)
    assert g.numpy().min() >= 1 and abs(g.numpy().mean() - 4.0) < 0.15
    gi = tinytorch.zeros(10, dtype=tinytorch.int64).geometric_(0.5)
    assert gi.dtype == tinytorch.int64 and gi.numpy().min() >= 1
    e = tinytorch.zeros(20000, dtype=tinytorch.float64).exponential_(4.0)
    assert abs(e.numpy().mean() - 0.25) < 0.01 and e._version == 1
    with pytest.raises(RuntimeError, match="Exponential distribution is a continuous probability distribution. "
                                           "dtype must be a floating point but you specified Long"):
        tinytorch.zeros(3, dtype=tinytorch.int64).exponential_()
    with pytest.raises(RuntimeError, match="Cauchy distribution is a continuous"):
        tinytorch.zeros(3, dtype=tinytorch.int64).cauchy_()
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        tinytorch.zeros(3, dtype=tinytorch.int64).log_normal_()
    with pytest.raises(RuntimeError, match="geometric_ expects p to be in"):
        tinytorch.zeros(3).geometric_(1.5)


def test_bernoulli_multinomial_methods():
    tinytorch.manual_seed(2)
    p = tinytorch.full((20000,), 0.3, dtype=tinytorch.float64)
    b = p.bernoulli()
    assert b.dtype == tinytorch.float64 and set(np.unique(b.numpy())) == {0.0, 1.0}
    assert abs(b.numpy().mean() - 0.3) < 0.02 and p.numpy()[0] == 0.3
    b2 = tinytorch.zeros(20000).bernoulli(0.8)
    assert abs(b2.numpy().mean() - 0.8) < 0.02
    w = tinytorch.tensor([[0.0, 1.0, 3.0], [1.0, 0.0, 0.0]])
    s = w.multinomial(1000, replacement=True)
    assert s.shape == (2, 1000) and s.dtype == tinytorch.int64
    assert abs((s[0].numpy() == 2).mean() - 0.75) < 0.05 and (s[0].numpy() != 0).all()
    assert (s[1].numpy() == 0).all()
    u = tinytorch.ones(5).multinomial(5)
    assert sorted(u.tolist()) == [0, 1, 2, 3, 4]


# ------------------------------------------------------------------ small extras

def test_msort_split_with_sizes_new_empty_strided():
    v = np.array([[3.0, 1.0], [1.0, 2.0], [2.0, 0.0]])
    np.testing.assert_array_equal(f64(v).msort().numpy(), np.sort(v, axis=0))
    a, b = f64(v).split_with_sizes([1, 2])
    assert a.shape == (1, 2) and b.shape == (2, 2)
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 3"):
        f64(v).split_with_sizes([1, 1])
    e = tinytorch.zeros(1, dtype=tinytorch.float64).new_empty_strided((2, 3), (3, 1))
    assert e.shape == (2, 3) and e.dtype == tinytorch.float64


# ------------------------------------------------------------------ against PyTorch

@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")
def test_against_torch():
    import torch
    v = np.arange(12.0).reshape(3, 4)
    for args in [((2, 2), (1, 2), 1), ((3,), (4,), None), ((2, 3), (4, 1), 1)]:
        ours = f64(v, True)
        theirs = torch.tensor(v, requires_grad=True)
        yo, yt = ours.as_strided(*args), theirs.as_strided(*args)
        np.testing.assert_array_equal(yo.detach().numpy(), yt.detach().numpy())
        assert yo.storage_offset() == yt.storage_offset()
        w = np.arange(yt.numel(), dtype=np.float64).reshape(tuple(yt.shape))
        (yo * f64(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
    for d, size, step in [(0, 2, 1), (1, 3, 1), (-1, 2, 2)]:
        ours, theirs = f64(v, True), torch.tensor(v, requires_grad=True)
        yo, yt = ours.unfold(d, size, step), theirs.unfold(d, size, step)
        assert tuple(yo.shape) == tuple(yt.shape)
        np.testing.assert_array_equal(yo.detach().numpy(), yt.detach().numpy())
        (yo ** 2).sum().backward(); (yt ** 2).sum().backward()
        np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
    for shape, wrap in [((7, 3), True), ((7, 3), False), ((2, 5), True)]:
        np.testing.assert_array_equal(tinytorch.zeros(*shape).fill_diagonal_(1, wrap).numpy(),
                                      torch.zeros(*shape).fill_diagonal_(1, wrap).numpy())
    x = np.array([0.3, -1.7, 8.0])
    mo, eo = f64(x).frexp(); mt, et = torch.tensor(x).frexp()
    np.testing.assert_array_equal(mo.numpy(), mt.numpy()); np.testing.assert_array_equal(eo.numpy(), et.numpy())
    t = torch.arange(10.0)
    o = tinytorch.arange(10.0)
    assert o[3:].storage_offset() == t[3:].storage_offset()
    assert (o.itemsize, o.nbytes) == (t.itemsize, t.nbytes)
    for name in ["acos_", "log2_", "cumsum_", "eq_", "t_"]:
        args = (0,) if name == "cumsum_" else (0.5,) if name == "eq_" else ()
        a = torch.full((2, 2), 0.5, dtype=torch.float64); b = tinytorch.full((2, 2), 0.5, dtype=tinytorch.float64)
        getattr(a, name)(*args); getattr(b, name)(*args)
        np.testing.assert_allclose(b.numpy(), a.numpy())
        assert b._version == a._version


def test_put():
    v = np.arange(6.0).reshape(2, 3)
    idx = tinytorch.tensor([0, -1, 4])
    src = f64([10.0, 20.0, 30.0])
    ref = v.copy().reshape(-1); ref[[0, 5, 4]] = [10, 20, 30]
    np.testing.assert_array_equal(f64(v).put(idx, src).numpy(), ref.reshape(2, 3))
    x = f64(v)
    assert x.put_(tinytorch.tensor([1, 1]), f64([1.0, 2.0]), accumulate=True) is x and x._version == 1
    np.testing.assert_array_equal(x.numpy().reshape(-1), [0, 4, 2, 3, 4, 5])
    with pytest.raises(IndexError, match="out of range: tried to access index 6 on a tensor of 6 elements."):
        f64(v).put_(tinytorch.tensor([6]), f64([1.0]))
    assert gradcheck(lambda a, s: a.put(idx, s), (f64(v, True), f64([1.0, 2.0, 3.0], True)))
    assert gradcheck(lambda a, s: a.put(tinytorch.tensor([1, 1]), s, True), (f64(v, True), f64([1.0, 2.0], True)))



# ------------------------------------------------------------------ index_reduce

def _index_reduce_ref(x, dim, index, source, reduce, include_self):
    """NumPy reference: each slice of source reduced into x's slice index[i] along dim."""
    out = np.moveaxis(x.astype(np.float64).copy(), dim, 0)
    src = np.moveaxis(source.astype(np.float64), dim, 0)
    groups = {}
    for i, j in enumerate(index):
        groups.setdefault(int(j), []).append(src[i])
    fn = {"prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
    for j, parts in groups.items():
        out[j] = fn(np.stack(([out[j]] if include_self else []) + parts), axis=0)
    return np.moveaxis(out, 0, dim)


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce_values_and_inplace(reduce, include_self, dim):
    rs = np.random.RandomState(3)
    x = rs.randn(3, 4, 2)
    d = dim % 3
    index = np.array([2, 0, 1, 0, 1])[: x.shape[d] + 1] % x.shape[d]
    sshape = list(x.shape)
    sshape[d] = len(index)
    s = rs.randn(*sshape)
    idx = tinytorch.tensor(index)
    out = f64(x).index_reduce(dim, idx, f64(s), reduce, include_self=include_self)
    np.testing.assert_allclose(out.numpy(), _index_reduce_ref(x, d, index, s, reduce, include_self), rtol=1e-12)
    y = f64(x)
    assert y.index_reduce_(dim, idx, f64(s), reduce, include_self=include_self) is y and y._version == 1
    np.testing.assert_allclose(y.numpy(), out.numpy())
    np.testing.assert_allclose(tinytorch.index_reduce(f64(x), dim, idx, f64(s), reduce, include_self=include_self)
                               .numpy(), out.numpy())


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_grad(reduce, include_self):
    rs = np.random.RandomState(4)
    x, s = rs.randn(3, 2), rs.randn(4, 2)
    idx = tinytorch.tensor([2, 0, 2, 2])
    out = f64(x, True).index_reduce(0, idx, f64(s, True), reduce, include_self=include_self)
    assert out.grad_fn.name() == "IndexReduceBackward0"
    assert gradcheck(lambda a, b: a.index_reduce(0, idx, b, reduce, include_self=include_self),
                     (f64(x, True), f64(s, True)))
    assert gradgradcheck(lambda a, b: a.index_reduce(0, idx, b, reduce, include_self=include_self),
                         (f64(x, True), f64(s, True)))
    if reduce == "prod":  # zeros in a slot: the product without each element
        z = f64([[0.0, 2.0], [1.0, 0.0], [3.0, 1.0]], True)
        assert gradcheck(lambda a, b: a.index_reduce(0, idx, b, "prod", include_self=include_self),
                         (z, f64([[0.0, 1.5], [2.0, 0.5], [1.2, 0.0], [0.7, 2.0]], True)))


@pytest.mark.filterwarnings("ignore:index_reduce")
def test_index_reduce_int_mean_floors_and_zero_dim():
    x = tinytorch.tensor([-3, 2])
    assert x.index_reduce(0, tinytorch.tensor([0, 0]), tinytorch.tensor([-2, 1]), "mean",
                          include_self=False).tolist() == [-1, 2]
    assert x.index_reduce(0, tinytorch.tensor([0]), tinytorch.tensor([-2]), "mean").tolist() == [-3, 2]
    assert tinytorch.tensor(2.0).index_reduce(0, tinytorch.tensor([0]), tinytorch.tensor(3.0), "prod").item() == 6.0
    e = tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([], dtype=tinytorch.int64), tinytorch.ones(0, 3), "amin")
    np.testing.assert_array_equal(e.numpy(), np.ones((2, 3)))


def test_index_reduce_warns_once_in_beta():
    import warnings
    from tinytorch._ops import tensor_methods
    tensor_methods._index_reduce_warned[0] = False
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            tinytorch.ones(2).index_reduce(0, tinytorch.tensor([0]), tinytorch.ones(1), "prod")
    assert [str(m.message) for m in w] == ["index_reduce() is in beta and the API may change at any time."]


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("call,err,msg", [
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([0, 1, 0]), tinytorch.ones(3, 3), "sum"),
     RuntimeError, "Expected reduce to be one of prod, mean, amax or amin but got sum."),
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([0, 1, 0]),
                                               tinytorch.ones(3, 3, dtype=tinytorch.float64), "prod"),
     RuntimeError, r"self \(Float\) and source \(Double\) must have the same scalar type"),
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([0, 5, 0]), tinytorch.ones(3, 3), "prod"),
     IndexError, "index out of range in self"),
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([0, -1, 0]), tinytorch.ones(3, 3), "prod"),
     IndexError, "index out of range in self"),
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([0, 1, 0]), tinytorch.ones(2, 3), "prod"),
     RuntimeError, r"Number of indices \(3\) should be equal to source.size\(dim\): \(2\), for dim: 0"),
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([0.0, 1.0, 0.0]), tinytorch.ones(3, 3), "prod"),
     RuntimeError, "Expected dtype int32/int64 for index but got: Float"),
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([[0], [1], [0]]), tinytorch.ones(3, 3), "prod"),
     IndexError, r"Index is supposed to be a vector, but got dim: 2 with type: Long and size: \[3, 1\]"),
    (lambda: tinytorch.ones(2, 3).index_reduce(0, tinytorch.tensor([0, 1, 0]), tinytorch.ones(3, 4), "prod"),
     RuntimeError, r"source tensor shape must match self tensor shape, excluding the specified dimension. "
                   r"Got self.shape = \[2, 3\] source.shape = \[3, 4\]"),
    (lambda: tinytorch.ones(2, dtype=tinytorch.bool).index_reduce(0, tinytorch.tensor([0]),
                                                                  tinytorch.ones(1, dtype=tinytorch.bool), "amax"),
     NotImplementedError, "\"index_func_\" not implemented for 'Bool'"),
    (lambda: tinytorch.ones(2, 3, requires_grad=True).index_reduce_(0, tinytorch.tensor([1]), tinytorch.ones(1, 3),
                                                                    "mean"),
     RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation."),
])
def test_index_reduce_errors(call, err, msg):
    with pytest.raises(err, match=msg):
        call()


# ------------------------------------------------------------------ resize_

def test_resize_keeps_elements_and_returns_self():
    a = tinytorch.arange(6.0)
    assert a.resize_(2, 3) is a and a._version == 1
    np.testing.assert_array_equal(a.numpy(), np.arange(6.0).reshape(2, 3))
    a.resize_(4)
    assert a._version == 2 and a.tolist() == [0.0, 1.0, 2.0, 3.0]
    a.resize_(4)  # the same size: nothing changes, the version stays
    assert a._version == 2
    a.resize_(6)  # the storage still holds the old tail
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    a.resize_((3, 2)); assert a.shape == (3, 2)
    a.resize_([1, 6]); assert a.shape == (1, 6)
    a.resize_(tinytorch.Size([6])); assert a.shape == (6,)
    a.resize_(2, 4)
    assert a.shape == (2, 4) and a.is_contiguous() and a.reshape(-1)[:6].tolist() == list(np.arange(6.0))
    z = tinytorch.tensor(5.0)
    z.resize_(1); assert z.tolist() == [5.0]
    z.resize_(()); assert z.shape == () and z.item() == 5.0
    e = tinytorch.arange(3); e.resize_(2, 0, 3); assert e.shape == (2, 0, 3)


def test_resize_views_share_storage_and_keep_strides_when_same_shape():
    x = tinytorch.arange(12.0)
    v = x[2:6]
    v.resize_(2, 2)
    assert v.storage_offset() == 2 and v.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    v.fill_(0.0)
    assert x.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0] + [float(i) for i in range(6, 12)]
    t = tinytorch.arange(6.0).reshape(2, 3).t()
    t.resize_(3, 2)
    assert t.stride() == (1, 3) and t.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    t = tinytorch.arange(6.0).reshape(2, 3).t()
    t.resize_(2, 3)
    assert t.stride() == (3, 1) and t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    m = tinytorch.ones(2, 3, device="meta")
    m.resize_(4, 5)
    assert m.is_meta and m.shape == (4, 5)


def test_resize_as_():
    x = tinytorch.ones(2, 3)
    assert x.resize_as_(tinytorch.zeros(3, 2, dtype=tinytorch.int64)) is x
    assert x.shape == (3, 2) and x.dtype == tinytorch.float32
    assert tinytorch.resize_as_(x, tinytorch.ones(6)) is x and x.shape == (6,)
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        x.resize_as_([1, 2])


@pytest.mark.parametrize("call,err,msg", [
    (lambda: tinytorch.ones(2, requires_grad=True).resize_(3), RuntimeError,
     "cannot resize variables that require grad"),
    (lambda: tinytorch.ones(2, requires_grad=True).resize_(2), RuntimeError,
     "cannot resize variables that require grad"),
    (lambda: (tinytorch.ones(2, requires_grad=True) * 2).resize_(3), RuntimeError,
     "cannot resize variables that require grad"),
    (lambda: tinytorch.ones(2, requires_grad=True).resize_as_(tinytorch.ones(2)), RuntimeError,
     "cannot resize variables that require grad"),
    (lambda: tinytorch.arange(6.0).resize_(2, -3), RuntimeError, "numel: integer multiplication overflow"),
    (lambda: tinytorch.ones(2).resize_(), TypeError, "missing 1 required positional arguments"),
    (lambda: tinytorch.ones(2).resize_(2.0), TypeError, "must be tuple of ints, not float"),
])
def test_resize_errors(call, err, msg):
    with pytest.raises(err, match=msg):
        call()


def test_resize_against_torch():
    torch = pytest.importorskip("torch")
    for m in (torch, tinytorch):
        x = m.arange(12.0)
        v = x[2:6]
        v.resize_(3, 2)
        m_out = (v.tolist(), v.stride(), v.storage_offset(), v._version)
        if m is torch:
            ref = m_out
    assert m_out == ref


# ------------------------------------------------------------------ review fixes

def test_inplace_view_nodes_are_named_as_pytorch():
    cases = [(lambda x: x.squeeze_(), "SqueezeBackward3"), (lambda x: x.squeeze_(1), "SqueezeBackward4"),
             (lambda x: x.squeeze_((1,)), "SqueezeBackward5"), (lambda x: x.unsqueeze_(0), "UnsqueezeBackward1"),
             (lambda x: x.t_(), "TBackward1"), (lambda x: x.transpose_(0, 1), "TransposeBackward1"),
             (lambda x: x.swapaxes_(0, 1), "TransposeBackward1"), (lambda x: x.swapdims_(1, 0), "TransposeBackward1")]
    for op, name in cases:
        w = f64([[1.0], [2.0]], True)
        x = w * 3
        assert op(x) is x and x.grad_fn.name() == name and x._version == 1
        (x * f64(np.arange(2.0)).reshape(x.shape)).sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), [[0.0], [3.0]])
    assert gradcheck(lambda w: (w * 2).t_(), (f64(np.arange(6.0).reshape(2, 3), True),))
    assert gradgradcheck(lambda w: (w * 2).transpose_(0, 1) ** 2, (f64(np.arange(6.0).reshape(2, 3), True),))


def test_unary_plus_rejects_bool():
    x = tinytorch.ones(2)
    assert (+x) is x
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported."):
        +tinytorch.tensor([True])


def test_H_message_suggests_mH_for_batches():
    with pytest.raises(RuntimeError, match="Got 3-D tensor. For batches of matrices, consider using tensor.mH"):
        tinytorch.zeros(1, 2, 3).H
    with pytest.raises(RuntimeError, match="Got 1-D tensor.$"):
        tinytorch.zeros(3).H


def test_ldexp_dtype_range_and_grad():
    h = tinytorch.tensor([2.0 ** -20], dtype=tinytorch.float16).ldexp(tinytorch.tensor([17]))
    assert h.dtype == tinytorch.float16 and h.item() == 0.125
    big = tinytorch.ldexp(f64([1.0]), tinytorch.tensor([200]))
    assert big.dtype == tinytorch.float64 and big.item() == 2.0 ** 200
    assert tinytorch.ldexp(tinytorch.tensor([1], dtype=tinytorch.int32), tinytorch.tensor([3])).dtype == \
        tinytorch.float32
    with pytest.raises(TypeError, match="argument 'other' must be Tensor, not int"):
        tinytorch.ldexp(f64([1.0]), 3)
    a, e = f64([0.5, 1.5], True), f64([[1.0], [2.5]], True)
    assert tinytorch.ldexp(a, e).grad_fn.name() == "LdexpBackward0"
    assert gradcheck(tinytorch.ldexp, (a, e)) and gradgradcheck(tinytorch.ldexp, (a, e))


def test_random_fill_messages():
    with pytest.raises(RuntimeError, match="you specified long int$"):
        tinytorch.zeros(3, dtype=tinytorch.int64).cauchy_()
    with pytest.raises(RuntimeError, match="you specified unsigned char$"):
        tinytorch.zeros(3, dtype=tinytorch.uint8).cauchy_()
    with pytest.raises(RuntimeError, match="cauchy_ expects sigma > 0.0, but found sigma=-1$"):
        tinytorch.zeros(3).cauchy_(0.0, -1.0)
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0, but found lambda=0$"):
        tinytorch.zeros(3).exponential_(0.0)
    with pytest.raises(RuntimeError, match="log_normal_ expects std > 0.0, but found std=0$"):
        tinytorch.zeros(3).log_normal_(1.0, 0.0)
    with pytest.raises(RuntimeError, match="but got p=2$"):
        tinytorch.zeros(3).geometric_(2.0)
    with pytest.raises(TypeError, match="must be ints, got float"):
        tinytorch.zeros(3).random_(5.0, 3.0)
    with pytest.raises(IndexError, match="Expected source and index to have the same number of elements"):
        tinytorch.zeros(2, 2).put(tinytorch.tensor([0, 1]), tinytorch.tensor([1.0]))
