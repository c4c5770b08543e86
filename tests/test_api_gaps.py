"""Tensor methods and torch.* names that closed the gap with PyTorch's dir(): values against float64 NumPy
references, gradients by gradcheck in float64, in-place contracts (returns self, bumps the version) and errors;
PyTorch itself is consulted only under importorskip."""
import math
import warnings

import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import gradcheck


def f64(*shape, seed=0, requires_grad=True):
    arr = np.random.default_rng(seed).standard_normal(shape)
    return torch.tensor(arr, dtype=torch.float64, requires_grad=requires_grad)


# ------------------------------------------------------------------ apply_ / map_ / map2_

def test_apply_map_in_place():
    x = torch.tensor([1.0, 2.0])
    v = x._version
    assert x.apply_(lambda e: e * 3) is x and x.tolist() == [3.0, 6.0] and x._version > v
    y = torch.ones(2, 2)
    assert y.map_(torch.tensor([1.0, 2.0]), lambda a, b: a + b).tolist() == [[2.0, 3.0], [2.0, 3.0]]
    z = torch.ones(2)
    assert z.map2_(torch.ones(2), torch.full((2,), 2.0), lambda a, b, c: a + b * c).tolist() == [3.0, 3.0]


def test_apply_map_errors():
    with pytest.raises(RuntimeError, match="Can't call apply_\\(\\) on Variable that requires grad"):
        torch.ones(2, requires_grad=True).apply_(lambda e: e)
    with pytest.raises(TypeError, match="must be real number, not str"):
        torch.ones(2).apply_(lambda e: "a")
    with pytest.raises(TypeError, match="map_: expected torch.FloatTensor for 'other' \\(got torch.LongTensor\\)"):
        torch.ones(2).map_(torch.ones(2, dtype=torch.long), lambda a, b: a)
    with pytest.raises(RuntimeError, match="expanded size"):
        torch.ones(2).map_(torch.ones(3), lambda a, b: a)


# ------------------------------------------------------------------ bit shifts

def test_shifts_match_numpy_and_edges():
    a = np.array([1, -8, 5, 300], dtype=np.int64)
    s = np.array([1, 2, 0, 3], dtype=np.int64)
    assert (torch.tensor(a) << torch.tensor(s)).tolist() == (a << s).tolist()
    assert (torch.tensor(a) >> torch.tensor(s)).tolist() == (a >> s).tolist()
    assert (torch.tensor([1]) << 64).tolist() == [0]
    assert (torch.tensor([1]) << -1).tolist() == [0]
    assert (torch.tensor([-8]) >> 70).tolist() == [-1]
    assert (torch.tensor([8]) >> -1).tolist() == [0]
    assert (torch.tensor([200], dtype=torch.uint8) >> 9).tolist() == [0]
    assert (torch.tensor([1], dtype=torch.uint8) << 9).dtype is torch.uint8
    assert (2 << torch.tensor([1, 2])).tolist() == [4, 8]
    assert torch.bitwise_left_shift(3, torch.tensor([1])).tolist() == [6]
    assert (torch.tensor([True]) << 1).dtype is torch.int64


def test_shift_in_place_and_errors():
    x = torch.tensor([1, 2])
    v = x._version
    assert x.bitwise_left_shift_(2) is x and x.tolist() == [4, 8] and x._version > v
    x >>= 1
    assert x.tolist() == [2, 4]
    with pytest.raises(NotImplementedError, match="\"lshift_cpu\" not implemented for 'Float'"):
        torch.tensor([1.0]) << 1
    with pytest.raises(NotImplementedError, match="\"rshift_cpu\" not implemented for 'Bool'"):
        torch.tensor([True]) >> torch.tensor([True])


# ------------------------------------------------------------------ igamma / igammac

def test_igamma_closed_forms():
    x = torch.tensor([0.5, 1.0, 3.0, 40.0], dtype=torch.float64)
    xs = x.detach().numpy()
    np.testing.assert_allclose(torch.igamma(torch.ones(4, dtype=torch.float64), x).numpy(), 1 - np.exp(-xs),
                               rtol=1e-12)
    q2 = np.exp(-xs) * (1 + xs)  # Q(2, x), tiny at x = 40: must not come from 1 - P
    np.testing.assert_allclose(torch.full((4,), 2.0, dtype=torch.float64).igammac(x).numpy(), q2, rtol=1e-10)
    y = torch.ones(4, dtype=torch.float64)
    assert y.igamma_(x) is y
    with pytest.raises(NotImplementedError, match="\"igamma_cpu\" not implemented for 'Long'"):
        torch.igamma(torch.tensor([1]), torch.tensor([1]))


def test_igamma_grad():
    a = torch.tensor([0.7, 1.5, 3.0], dtype=torch.float64)
    x = torch.tensor([0.4, 2.0, 2.5], dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda t: torch.igamma(a, t), (x,))
    assert gradcheck(lambda t: torch.igammac(a, t), (x,))
    assert torch.igamma(a, x).grad_fn.name() == "IgammaBackward0"
    assert torch.igammac(a, x).grad_fn.name() == "IgammacBackward0"
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input' is not implemented."):
        torch.igamma(a.clone().requires_grad_(), x).sum().backward()


# ------------------------------------------------------------------ set_, storages, as_strided_, as_strided_scatter

def test_set_and_is_set_to():
    a, b = torch.zeros(3), torch.ones(2, 2)
    v = a._version
    assert a.set_(b) is a and a.shape == (2, 2) and a._version > v
    assert a.is_set_to(b) and not b.is_set_to(torch.ones(2, 2))
    b.add_(1)
    assert a.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert torch.ones(2).set_().shape == (0,)
    s = torch.arange(6.0).untyped_storage()
    assert torch.ones(1).set_(s, 1, (2, 2), (2, 1)).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert torch.ones(1).set_(torch.arange(6.0).storage(), 1, (2, 2)).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(RuntimeError, match="Could not set tensor of type long int to a tensor of type float"):
        torch.ones(2).set_(torch.zeros(2, dtype=torch.long))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        torch.ones(2, requires_grad=True).set_(torch.zeros(3))


def test_storage_views_share_memory():
    a = torch.arange(6.0)
    assert a[2:].storage().size() == 6 and a.untyped_storage().size() == 24
    assert a[2:].untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    assert torch.is_storage(a.storage()) and not torch.is_storage(a)


def test_as_strided_in_place_grad():
    x = torch.ones(2, 3)
    v = x._version
    assert x.as_strided_((2,), (2,), 1) is x and x.shape == (2,) and x._version > v
    w = f64(6)
    assert w.clone().as_strided_((2, 2), (1, 2), 1).grad_fn.name() == "AsStridedBackward1"
    assert gradcheck(lambda t: t.clone().as_strided_((2, 2), (1, 2), 1) * 1.0, (w,))


def test_as_strided_scatter():
    out = torch.as_strided_scatter(torch.zeros(2, 3), torch.ones(2, 2), (2, 2), (3, 1), 1)
    assert out.tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        torch.as_strided_scatter(torch.zeros(4), torch.ones(3), (3,), (2,))
    with pytest.raises(RuntimeError, match="expected src to have a size equal to the slice of self"):
        torch.zeros(4).as_strided_scatter(torch.ones(3), (2,), (2,))
    x, s = f64(2, 3), f64(2, 2, seed=1)
    assert torch.as_strided_scatter(x, s, (2, 2), (3, 1), 1).grad_fn.name() == "AsStridedScatterBackward0"
    assert gradcheck(lambda a, b: torch.as_strided_scatter(a, b, (2, 2), (3, 1), 1), (x, s))


# ------------------------------------------------------------------ legacy constructors

def test_tensor_new():
    x = torch.ones(2, dtype=torch.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype is torch.float64
    assert x.new([1, 2]).tolist() == [1.0, 2.0] and x.new((2, 3)).tolist() == [2.0, 3.0]
    assert x.new().shape == (0,) and x.new(torch.Size([4])).shape == (4,)
    assert x.new(x).data_ptr() == x.data_ptr()
    with pytest.raises(TypeError, match="data must be a sequence \\(got float\\)"):
        x.new(2.5)
    with pytest.raises(TypeError):
        x.new(torch.ones(2, dtype=torch.long))


def test_legacy_tensor_types():
    assert torch.FloatTensor(2, 3).shape == (2, 3) and torch.FloatTensor(2, 3).dtype is torch.float32
    assert torch.LongTensor([1, 2]).dtype is torch.int64 and torch.ByteTensor().shape == (0,)
    assert isinstance(torch.ones(2), torch.FloatTensor) and not isinstance(torch.ones(2), torch.LongTensor)
    assert isinstance(torch.tensor([True]), torch.BoolTensor) and not isinstance(3, torch.FloatTensor)
    assert torch.DoubleTensor.dtype is torch.float64 and repr(torch.FloatTensor) == "<class 'torch.FloatTensor'>"
    prev = torch.get_default_dtype()
    try:
        with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated"):
            torch.set_default_tensor_type(torch.DoubleTensor)
        assert torch.get_default_dtype() is torch.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.set_default_tensor_type("torch.FloatTensor")
            assert torch.get_default_dtype() is torch.float32
            with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
                torch.set_default_tensor_type(torch.LongTensor)
    finally:
        torch.set_default_dtype(prev)


# ------------------------------------------------------------------ small queries and aliases

def test_queries_and_aliases():
    x = torch.ones(2, 3, 4)
    assert x.permute(2, 0, 1).dim_order() == (1, 2, 0) and x.dim_order() == (0, 1, 2)
    assert x.to_dense() is x and x.to_dense(torch.float64).dtype is torch.float64
    assert x.const_data_ptr() == x.data_ptr() and x.dense_dim() == 3 and x.sparse_dim() == 0
    assert not (x.is_sparse or x.is_quantized or x.is_mps or x.is_xpu or x.is_nested or x.is_distributed())
    assert [t.shape[1] for t in x.unsafe_split(2, 1)] == [2, 1]
    assert [t.shape[2] for t in torch.unsafe_split_with_sizes(x, [1, 3], 2)] == [1, 3]
    assert len(torch.unsafe_chunk(x, 2, 1)) == 2
    with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
        torch.ones(2, 2).eig()
    with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
        torch.lstsq(torch.ones(2, 2), torch.ones(2, 2))


def test_module_load():
    p = torch.ones(2)
    out = p.module_load(torch.zeros(2))
    assert out is not p and p.tolist() == [0.0, 0.0] and not out.requires_grad
    other = torch.full((2,), 5.0, requires_grad=True)
    assert p.module_load(other, assign=True).tolist() == [5.0, 5.0] and p.tolist() == [0.0, 0.0]


def test_nonzero_static():
    t = torch.tensor([[0, 1], [2, 0]])
    assert t.nonzero_static(size=3).tolist() == [[0, 1], [1, 0], [-1, -1]]
    assert torch.nonzero_static(torch.tensor([0, 1, 0, 2]), size=1, fill_value=7).tolist() == [[1]]
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        torch.nonzero_static(t, size=-1)


def test_deprecated_resize():
    x = torch.arange(6.0)
    with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
        r = x.resize(2, 3)
    assert r.shape == (2, 3) and r.data_ptr() == x.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="autograd's resize can only change the shape"):
            x.resize(2)
        assert x.resize_as(torch.ones(3, 2)).shape == (3, 2)


def test_scatter_methods_and_ger():
    assert torch.zeros(2, 2).diagonal_scatter(torch.ones(2)).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert torch.zeros(2, 2).select_scatter(torch.ones(2), 0, 0).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert torch.zeros(2, 2).slice_scatter(torch.ones(1, 2), 0, 1).tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert torch.tensor([1.0, 2.0]).ger(torch.tensor([3.0, 4.0])).tolist() == [[3.0, 4.0], [6.0, 8.0]]


# ------------------------------------------------------------------ torch.* names

def test_constants_and_memory_formats():
    assert torch.pi == math.pi and torch.e == math.e and math.isinf(torch.inf) and math.isnan(torch.nan)
    assert torch.newaxis is None and torch.ones(3)[torch.newaxis].shape == (1, 3)
    assert repr(torch.channels_last) == "torch.channels_last" and isinstance(torch.channels_last, torch.memory_format)
    assert torch.legacy_contiguous_format is torch.contiguous_format
    assert torch.ones(2, 3).contiguous(memory_format=torch.contiguous_format).shape == (2, 3)


def test_inplace_functional_forms():
    x = torch.ones(2)
    assert torch.addmv_(x, torch.ones(2, 3), torch.ones(3)) is x and x.tolist() == [4.0, 4.0]
    assert torch.ldexp_(torch.ones(2), torch.tensor([1, 2])).tolist() == [2.0, 4.0]
    assert torch.put(torch.zeros(4), torch.tensor([1]), torch.tensor([2.0])).tolist() == [0.0, 2.0, 0.0, 0.0]


def test_fill():
    x = torch.zeros(2)
    out = torch.fill(x, 3)
    assert out.tolist() == [3.0, 3.0] and x.tolist() == [0.0, 0.0]
    w = f64(3)
    assert torch.fill(w, 2.0).grad_fn.name() == "FillBackward0"
    v = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda a, b: torch.fill(a, b), (w, v))
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        torch.fill(x, torch.ones(2))


def test_empty_permuted():
    t = torch.empty_permuted((2, 3, 4), (0, 2, 1))
    assert t.shape == (2, 3, 4) and t.stride() == (12, 1, 3) and t.is_leaf
    assert torch.empty_permuted((2, 3), (1, 0), requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="Duplicate dim not allowed"):
        torch.empty_permuted((2, 3), (1, 1))
    with pytest.raises(RuntimeError, match="len\\(size\\) = 2 is not equal to len\\(physical_layout\\) = 1"):
        torch.empty_permuted((2, 3), (1,))


def test_norm_except_dim():
    w = f64(2, 3)
    ref = np.linalg.norm(w.detach().numpy(), axis=1, keepdims=True)
    np.testing.assert_allclose(torch.norm_except_dim(w, 2, 0).detach().numpy(), ref, rtol=1e-12)
    assert torch.norm_except_dim(w, 2, 1).shape == (1, 3) and torch.norm_except_dim(w, 2, -1).shape == ()
    assert gradcheck(lambda t: torch.norm_except_dim(t, 2, 1), (w,))


def test_embedding_renorm_():
    w = torch.arange(9.0, dtype=torch.float64).reshape(3, 3)
    ref = w.numpy().copy()
    v = w._version
    assert torch.embedding_renorm_(w, torch.tensor([0, 0, 2]), 5.0, 2.0) is w and w._version > v
    for r in (0, 2):
        n = np.linalg.norm(ref[r])
        expect = ref[r] * (5.0 / (n + 1e-7)) if n > 5.0 else ref[r]
        np.testing.assert_allclose(w.numpy()[r], expect, rtol=1e-12)
    np.testing.assert_array_equal(w.numpy()[1], ref[1])


def test_histogramdd():
    pts = np.random.default_rng(0).random((50, 2))
    h = torch.histogramdd(torch.tensor(pts), bins=[3, 4], range=[0.0, 1.0, 0.0, 1.0])
    ref, edges = np.histogramdd(pts, bins=[3, 4], range=[(0, 1), (0, 1)])
    np.testing.assert_array_equal(h.hist.numpy(), ref)
    assert len(h.bin_edges) == 2 and np.allclose(h.bin_edges[1].numpy(), edges[1])
    w = np.arange(50.0)
    h2 = torch.histogramdd(torch.tensor(pts), bins=[torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)] * 2,
                           weight=torch.tensor(w), density=True)
    ref2, _ = np.histogramdd(pts, bins=[[0, 0.5, 1]] * 2, weights=w, density=True)
    np.testing.assert_allclose(h2.hist.numpy(), ref2)
    with pytest.raises(NotImplementedError, match="\"histogramdd\" not implemented for 'Long'"):
        torch.histogramdd(torch.tensor([[0, 1]]), bins=2)


@pytest.mark.parametrize("name,args", [
    ("permute_copy", ((1, 0),)), ("t_copy", ()), ("view_copy", ((3, 2),)), ("expand_copy", ((2, 2, 3),)),
    ("select_copy", (0, 1)), ("slice_copy", (1, 0, 2)), ("transpose_copy", (0, 1)), ("diagonal_copy", ()),
    ("unfold_copy", (1, 2, 1)), ("alias_copy", ()), ("as_strided_copy", ((2,), (2,))),
    ("unsqueeze_copy", (0,)), ("squeeze_copy", ()),
])
def test_view_copies(name, args):
    x = f64(2, 3)
    out = getattr(torch, name)(x, *args)
    view = {"alias_copy": lambda: x, "slice_copy": lambda: x[:, 0:2]}.get(
        name, lambda: getattr(x, name[:-len("_copy")])(*args))()
    np.testing.assert_array_equal(out.detach().numpy(), view.detach().numpy())
    assert out.is_contiguous() and out._base is None
    assert not np.shares_memory(out.detach().numpy(), x.detach().numpy())
    node = "".join(w.capitalize() for w in name[:-len("_copy")].split("_")) + "Backward0_copy"
    assert out.grad_fn.name() == node
    assert gradcheck(lambda t: getattr(torch, name)(t, *args), (x,))


def test_multi_output_copies():
    x = f64(4, 2)
    parts = torch.split_copy(x, 2)
    assert [p.grad_fn.name() for p in parts] == ["SplitBackward0_copy"] * 2
    assert gradcheck(lambda t: torch.unbind_copy(t), (x,))
    assert gradcheck(lambda t: torch.split_with_sizes_copy(t, [1, 3]), (x,))
    d = torch.detach_copy(x)
    assert d.grad_fn.name() == "NotImplemented"
    assert not torch.detach_copy(x.detach()).requires_grad


def test_geqrf_orgqr_ormqr():
    A = np.random.default_rng(0).standard_normal((2, 5, 3))
    a, tau = torch.geqrf(torch.tensor(A))
    assert a.shape == (2, 5, 3) and tau.shape == (2, 3)
    Q = torch.orgqr(a, tau).numpy()
    R = np.triu(a.numpy())[..., :3, :]
    np.testing.assert_allclose(Q @ R, A, atol=1e-12)
    other = np.random.default_rng(1).standard_normal((2, 5, 4))
    qfull = torch.ormqr(a, tau, torch.eye(5, dtype=torch.float64).expand(2, 5, 5)).numpy()
    np.testing.assert_allclose(qfull[..., :3], Q, atol=1e-12)
    np.testing.assert_allclose(qfull @ np.swapaxes(qfull, -1, -2), np.broadcast_to(np.eye(5), (2, 5, 5)),
                               atol=1e-12)
    np.testing.assert_allclose(torch.ormqr(a, tau, torch.tensor(other), transpose=True).numpy(),
                               np.swapaxes(qfull, -1, -2) @ other, atol=1e-12)
    with pytest.raises(NotImplementedError, match="\"geqrf_cpu\" not implemented for 'Long'"):
        torch.geqrf(torch.ones(3, 3, dtype=torch.long))
    with pytest.raises(RuntimeError, match="derivative for geqrf is not implemented"):
        torch.geqrf(f64(3, 3)).a.sum().backward()


def test_sym_helpers_and_control_flow():
    assert (torch.sym_int(-3.7), torch.sym_float(3), torch.sym_max(1, 2), torch.sym_min(1, 2)) == (-3, 3.0, 2, 1)
    assert (torch.sym_not(True), torch.sym_sqrt(4), torch.sym_sum([1, 2, 3]), torch.sym_ite(False, 1, 2)) == \
        (False, 2.0, 6, 2)
    x = torch.ones(2)
    assert torch.cond(torch.tensor(True), lambda a: a + 1, lambda a: a - 1, (x,)).tolist() == [2.0, 2.0]
    assert torch.cond(False, lambda a: a + 1, lambda a: a - 1, [x]).tolist() == [0.0, 0.0]
    (out,) = torch.while_loop(lambda i: i < 3, lambda i: (i + 1,), (torch.tensor(0),))
    assert out.item() == 3


def test_switches_and_queries():
    torch.set_anomaly_enabled(True)
    try:
        assert torch.is_anomaly_enabled() and torch.is_anomaly_check_nan_enabled()
    finally:
        torch.set_anomaly_enabled(False)
    assert not torch.is_anomaly_enabled()
    torch.set_warn_always(True)
    assert torch.is_warn_always_enabled()
    torch.set_warn_always(False)
    assert torch.get_device(torch.ones(2)) == -1 and not torch.is_distributed(torch.ones(2))
    assert torch.get_device_module("cpu") is torch.cpu and torch.get_device_module("cuda") is torch.cuda
    with pytest.raises(RuntimeError, match="does not have a corresponding module registered as 'torch.xla'"):
        torch.get_device_module("xla")
    assert torch.thread_safe_generator() is None and torch.set_flush_denormal(True) is False
    assert torch.has_lapack and torch.compiled_with_cxx11_abi() and not torch.is_vulkan_available()


def test_convolution_dispatch():
    x, w, b = f64(1, 2, 5, 5), f64(3, 2, 2, 2, seed=1), f64(3, seed=2)
    out = torch.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    np.testing.assert_allclose(out.detach().numpy(),
                               torch.nn.functional.conv2d(x, w, b, 1, 1).detach().numpy(), rtol=1e-12)
    wt = f64(2, 3, 2, 2, seed=3)
    out_t = torch.convolution(x, wt, None, [2, 2], [0, 0], [1, 1], True, [1, 1], 1)
    ref = torch.nn.functional.conv_transpose2d(x, wt, None, 2, 0, 1)
    np.testing.assert_allclose(out_t.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Expected 3D, 4D or 5D weight"):
        torch.convolution(x, torch.ones(2, 2), None, [1], [0], [1], False, [0], 1)


def test_from_file(tmp_path):
    path = tmp_path / "data.bin"
    np.arange(6, dtype=np.float32).tofile(path)
    assert torch.from_file(str(path), size=4).tolist() == [0.0, 1.0, 2.0, 3.0]
    t = torch.from_file(str(path), shared=True, size=6, dtype=torch.float32)
    t[0] = 42.0
    assert np.fromfile(path, dtype=np.float32)[0] == 42.0
    with pytest.raises(RuntimeError, match="unable to mmap"):
        torch.from_file(str(path), size=100)


# ------------------------------------------------------------------ against PyTorch, where it is installed

_PARITY = [
    "torch.tensor([1, -8, 300]) << torch.tensor([1, 70, -1])",
    "torch.tensor([-7, 7, 5]) >> torch.tensor([1, 2, 80])",
    "torch.tensor([0.5, 1.0, 4.0]).igamma(torch.tensor([0.3, 1.0, 9.0]))",
    "torch.tensor([0.5, 1.0, 4.0]).igammac(torch.tensor([0.3, 1.0, 9.0]))",
    "torch.nonzero_static(torch.tensor([[0, 1], [2, 0], [3, 3]]), size=5, fill_value=-2)",
    "torch.ones(2, 3, 4).permute(1, 2, 0).dim_order()",
    "torch.as_strided_scatter(torch.zeros(3, 3), torch.ones(2, 2), (2, 2), (4, 1), 1)",
    "torch.empty_permuted((2, 3, 4, 5), (0, 2, 3, 1)).stride()",
    "torch.norm_except_dim(torch.arange(12.).reshape(3, 4), 3, 1)",
    "torch.histogramdd(torch.tensor([[0., 1], [1, 0], [2, 2], [0.5, 0.5]]), bins=[2, 3])",
    "torch.permute_copy(torch.arange(6.).reshape(2, 3), (1, 0)).stride()",
    "torch.ones(3).new([1, 2]).dtype, torch.ones(3).new(2, 3).shape",
    "torch.orgqr(*torch.geqrf(torch.tensor([[1., 2], [3, 4], [5, 6]], dtype=torch.float64)))",
]


def _leaves(v) -> list:
    """Numbers of a (nested) result, tensors flattened; dtypes and other objects by their PyTorch spelling."""
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _leaves(e)]
    if hasattr(v, "tolist") and hasattr(v, "shape"):
        return list(np.asarray(v.tolist(), dtype=float).reshape(-1))
    if isinstance(v, (int, float)):
        return [float(v)]
    return [str(v).replace("tinytorch", "torch")]


@pytest.mark.parametrize("expr", _PARITY)
def test_matches_pytorch(expr):
    real = pytest.importorskip("torch")
    ours, theirs = _leaves(eval(expr, {"torch": torch})), _leaves(eval(expr, {"torch": real}))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a == b if isinstance(b, str) else math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6), (a, b)


def test_grad_with_batched_grad_outputs_stacks_one_backward_per_seed():
    """autograd.grad(is_grads_batched=True): the Jacobian rows of x**2 from the identity's rows; with create_graph the result keeps a graph."""
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (jac,) = torch.autograd.grad(x ** 2, x, torch.eye(3, dtype=torch.float64), is_grads_batched=True)
    np.testing.assert_allclose(jac.numpy(), np.diag([2.0, 4.0, 6.0]))
    y = x.sin()
    (hv,) = torch.autograd.grad(y, x, torch.ones(2, 3, dtype=torch.float64), is_grads_batched=True,
                                    create_graph=True)
    assert hv.shape == (2, 3) and hv.requires_grad
    np.testing.assert_allclose(hv.detach().numpy(), np.cos([[1.0, 2.0, 3.0]] * 2))
    with pytest.raises(RuntimeError, match="batch size 2"):
        torch.autograd.grad((x * 2, x * 3), x, (torch.ones(2, 3), torch.ones(3, 3)),
                                is_grads_batched=True)


def test_diagonal_is_a_view_one_can_write_through():
    """A.diagonal().fill_(v) / .add_(eps) change A (NumPy's diagonal views are read-only)."""
    a = torch.zeros(3, 3, dtype=torch.float64)
    a.diagonal().fill_(-1.0)
    a.diagonal(1).add_(2.0)
    np.testing.assert_allclose(a.numpy(), -np.eye(3) + 2 * np.eye(3, k=1))
    cov = torch.eye(2, dtype=torch.float64) * 2
    cov.diagonal().add_(1e-3)  # the usual jitter before a Cholesky
    np.testing.assert_allclose(cov.numpy(), 2.001 * np.eye(2))


def test_multinomial_checks_and_zero_weights_without_replacement():
    """PyTorch's errors, and without replacement the nonzero weights' indices first, then the zero ones."""
    got = torch.multinomial(torch.tensor([0.0, 1.0, 0.0, 3.0]), 4).tolist()
    assert sorted(got[:2]) == [1, 3] and sorted(got[2:]) == [0, 2]
    assert torch.multinomial(torch.tensor([[0.0, 2.0], [5.0, 0.0]]), 3, replacement=True).tolist() == [[1] * 3, [0] * 3]
    for args, message in [((torch.ones(3), 4), "cannot sample n_sample > prob_dist.size"),
                          ((torch.zeros(2), 1), "sum of probabilities <= 0"),
                          ((torch.tensor([-1.0, 1.0]), 1), "element < 0"),
                          ((torch.tensor([float("nan"), 1.0]), 1), "`inf`, `nan`"),
                          ((torch.ones(2, 2, 2), 1), "prob_dist must be 1 or 2 dim"),
                          ((torch.ones(3), 0), "n_sample <= 0")]:
        with pytest.raises(RuntimeError, match=message):
            torch.multinomial(*args)
