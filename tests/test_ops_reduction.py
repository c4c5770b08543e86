"""Reductions: float64 gradcheck over every dim, tuples of dims and keepdim; gradgradcheck for the
reductions double backward uses; values, dtypes, (values, indices) results and errors."""
import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import gradcheck
from tinytorch.autograd import gradgradcheck as _gradgradcheck

SHAPE = (2, 3, 4)
DIMS = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2), [-1, 0]]


def _t(shape=SHAPE, seed=0, lo=-1.0, hi=1.0):
    """float64 values all distinct (so max/min have one winner) and requiring grad."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    vals = rng.permutation(n) / n * (hi - lo) + lo + rng.uniform(0, 0.1 / n, n)
    return torch.tensor(vals.reshape(shape), dtype=torch.float64, requires_grad=True)


def gradgradcheck(fn, inputs) -> bool:
    """gradgradcheck of fn(x) and of fn(x)**2: a linear reduction's first-order gradient doesn't depend on x, so the
    plain check would only test d(grad)/d(grad_output); squaring sends an x-dependent gradient through
    the reduction's backward graph."""
    return _gradgradcheck(fn, inputs) and _gradgradcheck(lambda *xs: fn(*xs) * fn(*xs), inputs)


def _kw(dim, keepdim):
    return {} if dim is None else {"dim": dim, "keepdim": keepdim}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "amax", "amin", "logsumexp", "norm"])
def test_reduction_gradcheck(name, dim, keepdim):
    x = _t()
    if name == "logsumexp" and dim is None:
        dim = (0, 1, 2)
    if name in ("amax", "amin") and dim is None:
        fn = lambda v: getattr(v, name)()  # noqa: E731
    else:
        fn = lambda v: getattr(torch, name)(v, **_kw(dim, keepdim))  # noqa: E731
    assert gradcheck(fn, (x,))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 1, (0, 2)], ids=str)
@pytest.mark.parametrize("name", ["sum", "mean", "var", "norm", "logsumexp", "amax", "std"])
def test_reduction_gradgradcheck(name, dim, keepdim):
    x = _t((2, 3, 2))
    if name == "logsumexp" and dim is None:
        dim = (0, 1, 2)
    assert gradgradcheck(lambda v: getattr(torch, name)(v, **_kw(dim, keepdim)), (x,))


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std_correction_gradcheck(correction):
    x = _t((3, 4))
    assert gradcheck(lambda v: v.var(1, correction=correction), (x,))
    assert gradcheck(lambda v: v.std(0, correction=correction, keepdim=True), (x,))
    assert gradcheck(lambda v: torch.var(v, 1, False), (x,))  # legacy positional unbiased=False
    assert gradcheck(lambda v: v.std(0, True, True), (x,))
    np.testing.assert_allclose(torch.var(x, False).item(), x.detach().numpy().var())
    with pytest.raises(RuntimeError, match="can't specify both unbiased and correction"):
        x.var(0, True, correction=1)


@pytest.mark.parametrize("p", [1, 2, 3, 0.5, float("inf"), float("-inf"), "fro"])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)], ids=str)
def test_norm_orders_gradcheck_and_values(p, dim):
    x = _t((3, 4), lo=-2.0, hi=2.0)
    assert gradcheck(lambda v: v.norm(p=p, dim=dim), (x,))
    ref = x.detach().numpy()
    axes = dim if dim is None or isinstance(dim, tuple) else (dim,)
    pp = 2 if p == "fro" else p
    if pp == float("inf"):
        expected = np.abs(ref).max(axis=axes)
    elif pp == float("-inf"):
        expected = np.abs(ref).min(axis=axes)
    else:
        expected = (np.abs(ref) ** pp).sum(axis=axes) ** (1 / pp)
    np.testing.assert_allclose(x.norm(p=p, dim=dim).detach().numpy(), expected, rtol=1e-12)


def test_norm_at_zero_has_zero_subgradient():
    x = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    assert x.norm().item() == 0.0 and isinstance(torch.ones(3).norm()._data, np.ndarray)


@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_max_min_with_dim_values_indices(fn, dim, keepdim):
    x = _t()
    res = getattr(x, fn)(dim, keepdim=keepdim)
    values, indices = res
    assert res.values is values and res.indices is indices
    ref = x.detach().numpy()
    arg = (np.argmax if fn == "max" else np.argmin)(ref, axis=dim, keepdims=keepdim)
    assert indices.dtype is torch.int64 and indices.tolist() == arg.tolist()
    np.testing.assert_array_equal(values.detach().numpy(), (ref.max if fn == "max" else ref.min)(dim, keepdims=keepdim))
    assert gradcheck(lambda v: getattr(v, fn)(dim, keepdim=keepdim).values, (x,))
    assert gradcheck(lambda v: getattr(torch, fn)(v, dim, keepdim).values, (x,))


def test_max_min_without_dim_and_elementwise_forms():
    x = _t((3, 4))
    assert x.max().item() == x.detach().numpy().max() and x.min().item() == x.detach().numpy().min()
    assert x.max().shape == () and x.max().grad_fn is not None
    assert gradcheck(lambda v: v.max(), (x,))
    assert gradcheck(lambda v: torch.min(v), (x,))
    y = _t((3, 4), seed=3)
    assert gradcheck(lambda a, b: torch.max(a, b), (x, y))
    assert gradcheck(lambda a, b: a.min(b), (x, y))


def test_max_ties_share_gradient_without_dim_and_pick_one_with_dim():
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]  # PyTorch's amax-style even split
    x.grad = None
    v, i = x.max(1)
    assert i.tolist() == [1, 0]  # first occurrence, as in PyTorch
    v.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


def test_amax_ties_split_gradient_evenly():
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    x.amax(dim=1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]


def test_argmax_argmin():
    x = torch.tensor([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]])
    assert torch.argmax(x).item() == 3 and x.argmin().item() == 0
    assert x.argmax(1).tolist() == [1, 0] and x.argmax(dim=0, keepdim=True).tolist() == [[1, 0, 1]]
    assert x.argmin(dim=-1).tolist() == [0, 1] and x.argmax().dtype is torch.int64


def test_sum_dtypes():
    assert torch.tensor([True, True, False]).sum().dtype is torch.int64
    assert torch.tensor([True, True, False]).sum().item() == 2
    assert torch.tensor([1, 2], dtype=torch.int32).sum().dtype is torch.int64
    assert torch.tensor([1.0, 2.0], dtype=torch.float16).sum().dtype is torch.float16
    assert torch.tensor([1, 2]).sum(dtype=torch.float64).dtype is torch.float64
    assert torch.ones(2, 3).sum(dim=()).shape == ()  # an empty dim tuple reduces everything
    assert torch.ones(2, 3).sum((0, 1), keepdim=True).shape == (1, 1)


def test_mean_requires_floating_point():
    with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype. Input dtype must be either a "
                                           "floating point or complex dtype. Got: Long"):
        torch.tensor([1, 2]).mean()
    assert torch.tensor([1, 2]).mean(dtype=torch.float32).item() == 1.5


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)], ids=str)
def test_values_match_numpy(dim):
    x = _t((3, 5)).detach()
    a = x.numpy()
    axes = dim
    np.testing.assert_allclose(x.sum(dim) if dim is not None else x.sum(), a.sum(axis=axes))
    np.testing.assert_allclose(x.mean(dim) if dim is not None else x.mean(), a.mean(axis=axes))
    np.testing.assert_allclose(x.var(dim), a.var(axis=axes, ddof=1))
    np.testing.assert_allclose(x.std(dim, unbiased=False), a.std(axis=axes))
    lse = np.log(np.exp(a).sum(axis=axes))
    np.testing.assert_allclose(x.logsumexp(dim if dim is not None else (0, 1)), lse)


def test_logsumexp_is_stable():
    x = torch.tensor([[1000.0, 1000.0], [-1000.0, -1000.0]], dtype=torch.float64, requires_grad=True)
    r = x.logsumexp(1)
    assert r.tolist() == pytest.approx([1000.0 + np.log(2), -1000.0 + np.log(2)])
    r.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 0.5, rtol=1e-12)


def test_var_of_one_element_is_nan_with_correction():
    with pytest.warns(UserWarning, match=r"^var\(\): degrees of freedom is <= 0"):  # PyTorch's warning
        assert torch.tensor([3.0]).var().isnan().item()
    assert torch.tensor([3.0]).var(correction=0).item() == 0.0


def test_reduction_dim_errors():
    x = torch.ones(2, 3)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        x.sum(2)
    with pytest.raises(RuntimeError, match="dim 1 appears multiple times in the list of dims"):
        x.sum((1, -1))
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified for input.numel\\(\\) == 0"):
        torch.ones(0).amax()
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        torch.ones(0, 2).max(0)


@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "amax", "norm", "logsumexp", "prod"])
def test_full_reductions_return_zero_dim_arrays(name):
    x = torch.rand(3, 2)
    r = getattr(x, name)((0, 1)) if name == "logsumexp" else getattr(x, name)()
    assert r.shape == () and isinstance(r._data, np.ndarray) and r.is_cpu


def test_prod_and_cumsum_gradcheck():
    x = _t((3, 4))
    assert gradcheck(lambda v: v.prod(), (x,))
    assert gradcheck(lambda v: v.prod(1), (x,))
    assert gradcheck(lambda v: v.prod(0, keepdim=True), (x,))
    assert gradcheck(lambda v: v[:1].prod(0), (x,))  # a dimension of size 1
    assert gradcheck(lambda v: v.cumsum(1), (x,))
    assert gradcheck(lambda v: torch.cumsum(v, dim=0), (x,))
    z = torch.tensor([[2.0, 0.0, 3.0]], dtype=torch.float64, requires_grad=True)
    z.prod().backward()
    assert z.grad.tolist() == [[0.0, 6.0, 0.0]]  # exact with a zero factor


def test_all_any_count_nonzero():
    x = torch.tensor([[0, 1, 2], [3, 0, 0]])
    assert x.all().item() is False and x.any().item() is True
    assert x.all(1).tolist() == [False, False] and x.any(0).tolist() == [True, True, True]
    assert torch.count_nonzero(x).item() == 3 and x.count_nonzero(0).tolist() == [1, 1, 1]


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "logsumexp", "prod", "argmax", "norm"])
def test_zero_dim_tensor_reduces_over_dim_0_and_minus_1(name):
    x = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    fn = (lambda v, d: v.norm(dim=d)) if name == "norm" else (lambda v, d: getattr(v, name)(d))
    for d in (0, -1):
        r = fn(x, d)
        assert r.shape == () and r.item() == (0 if name == "argmax" else 3.0)
    if name != "argmax":
        assert gradcheck(lambda v: fn(v, 0), (x,))
    with pytest.raises(IndexError, match="Dimension out of range"):
        fn(x, 1)


def test_reductions_over_a_nonempty_dim_of_an_empty_tensor():
    x = torch.ones(0, 3)
    assert x.amax(1).shape == (0,) and x.max(1).values.shape == (0,) and x.sum(0).tolist() == [0.0, 0.0, 0.0]
    assert x.logsumexp(0).tolist() == [float("-inf")] * 3
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero size."):
        x.amax(0)


def test_var_std_norm_reject_integer_tensors():
    with pytest.raises(RuntimeError, match="std and var only support floating point and complex dtypes"):
        torch.tensor([3, 4]).var()
    with pytest.raises(RuntimeError, match="std and var only support floating point and complex dtypes"):
        torch.tensor([3, 4]).std(0)
    with pytest.raises(RuntimeError, match="linalg.vector_norm: Expected a floating point or complex tensor as "
                                           "input. Got Long"):
        torch.tensor([3, 4]).norm()
    assert torch.tensor([3, 4]).norm(dtype=torch.float32).item() == 5.0


def test_composite_reductions_gradcheck():
    x = _t((2, 3, 4))
    assert gradcheck(lambda v: torch.var_mean(v, 1), (x,))
    assert gradcheck(lambda v: torch.std_mean(v, (0, 2), keepdim=True), (x,))
    assert gradcheck(lambda v: torch.var_mean(v, correction=0), (x,))
    assert gradcheck(lambda v: v.sum_to_size(3, 1), (x,))
    assert gradcheck(lambda v: v.sum_to_size((1, 3, 4)), (x,))
    assert gradcheck(lambda v: v.sum_to_size(2, 3, 4) * 2, (x,))
    assert x.sum_to_size(2, 3, 4) is x


def test_cumprod_gradcheck_with_and_without_zeros():
    x = _t((3, 4), lo=0.5, hi=1.5)
    assert gradcheck(lambda v: v.cumprod(1), (x,)) and gradcheck(lambda v: v.cumprod(0), (x,))
    assert gradgradcheck(lambda v: v.cumprod(-1), (x,))
    z = x.detach().clone()
    z[0, 1] = 0.0
    z[1, 0] = 0.0
    z[1, 2] = 0.0
    z[2, 3] = 0.0
    z.requires_grad_()
    assert gradcheck(lambda v: v.cumprod(1), (z,))
    assert gradgradcheck(lambda v: v.cumprod(1), (z,))
    assert torch.tensor([1, 2, 3]).cumprod(0).tolist() == [1, 2, 6]
    assert torch.tensor([1, 2, 3], dtype=torch.int32).cumprod(0).dtype is torch.int64
