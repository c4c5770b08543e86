"""The Tensor itself: creation, dtypes and type promotion, conversion, repr, item/tolist/numpy,
requires_grad rules, the version counter, and in-place ops (semantics, gradients and errors)."""
import numpy as np
import pytest

import tinytorch as torch
from tinytorch.autograd import gradcheck


# ------------------------------------------------------------------ creation

def test_tensor_infers_pytorch_dtypes():
    assert torch.tensor([1.5, 2]).dtype is torch.float32
    assert torch.tensor([1, 2]).dtype is torch.int64
    assert torch.tensor([True, False]).dtype is torch.bool
    assert torch.tensor([1, 2.0, True]).dtype is torch.float32
    assert torch.tensor(3.0).shape == () and torch.tensor(3).dtype is torch.int64
    assert torch.tensor(np.ones(2)).dtype is torch.float64
    assert torch.tensor(np.ones(2, np.int32)).dtype is torch.int32
    assert torch.tensor([torch.tensor(1.0), torch.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert torch.tensor([1.7, -2.2], dtype=torch.int32).tolist() == [1, -2]
    assert torch.tensor([]).shape == (0,) and torch.tensor([[]]).shape == (1, 0)
    with pytest.raises(ValueError, match="^too many dimensions 'str'$"):  # PyTorch's: a string in a sequence
        torch.tensor(["a"])
    with pytest.raises(TypeError, match="^new\\(\\): invalid data type 'str'$"):  # and a bare string
        torch.tensor("a")


def test_tensor_copies_but_as_tensor_and_from_numpy_share_memory():
    a = np.zeros(3, np.float32)
    copied, shared, from_np = torch.tensor(a), torch.as_tensor(a), torch.from_numpy(a)
    converted = torch.as_tensor(a, dtype=torch.float64)
    a[0] = 5.0
    assert copied.tolist() == [0.0, 0.0, 0.0] and converted.tolist() == [0.0, 0.0, 0.0]
    assert shared.tolist() == [5.0, 0.0, 0.0] and from_np.tolist() == [5.0, 0.0, 0.0]
    from_np.add_(1)
    assert a.tolist() == [6.0, 1.0, 1.0]
    t = torch.ones(2)
    assert torch.as_tensor(t) is t and torch.as_tensor([1, 2]).dtype is torch.int64
    with pytest.raises(TypeError, match="expected np.ndarray"):
        torch.from_numpy([1, 2])


def test_filled_factories():
    assert torch.zeros(2, 3).dtype is torch.float32 and torch.zeros((2, 3)).shape == (2, 3)
    assert torch.zeros([2, 2]).shape == (2, 2) and torch.ones(torch.Size([2, 1])).shape == (2, 1)
    assert torch.ones(2, dtype=torch.int32).tolist() == [1, 1] and torch.ones(2, dtype=torch.int32).dtype is torch.int32
    assert torch.empty(2, 0).shape == (2, 0) and torch.empty(3).dtype is torch.float32
    assert torch.full((2,), 3).dtype is torch.int64 and torch.full((2,), 3.0).dtype is torch.float32
    assert torch.full((2,), True).dtype is torch.bool
    assert torch.full((2,), 3, dtype=torch.float64).tolist() == [3.0, 3.0]
    assert torch.eye(3).tolist() == np.eye(3).tolist() and torch.eye(2, 3, dtype=torch.int64).tolist() == [[1, 0, 0],
                                                                                                        [0, 1, 0]]
    with pytest.raises(RuntimeError, match="^zeros: Dimension size must be non-negative.$"):  # ATen's zeros' own
        torch.zeros(-1)
    with pytest.raises(RuntimeError, match=r"^Trying to create tensor with negative dimension -1: \[2, -1\]$"):
        torch.ones(2, -1)
    for make in (torch.zeros, torch.ones, torch.empty, torch.rand, torch.randn):
        assert make(size=(2, 3)).shape == (2, 3) and make(size=[4]).shape == (4,)  # PyTorch's size= keyword


def test_like_factories_keep_shape_dtype_unless_told():
    src = torch.ones(2, 3, dtype=torch.int32)
    assert torch.zeros_like(src).dtype is torch.int32 and torch.zeros_like(src).tolist() == [[0] * 3] * 2
    assert torch.ones_like(src, dtype=torch.float16).dtype is torch.float16
    assert torch.empty_like(src).shape == (2, 3)
    assert torch.full_like(torch.ones(2, dtype=torch.int64), 2.5).tolist() == [2, 2]  # cast to the tensor's dtype
    assert torch.rand_like(torch.ones(2, dtype=torch.float64)).dtype is torch.float64
    assert torch.randn_like(torch.ones(4, 2)).shape == (4, 2)
    assert torch.randint_like(torch.ones(3), 5).dtype is torch.float32
    assert torch.full_like(torch.ones(2), 3.0, requires_grad=True).requires_grad


def test_ranges():
    assert torch.arange(5).tolist() == [0, 1, 2, 3, 4] and torch.arange(5).dtype is torch.int64
    assert torch.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert torch.arange(1.0, 4).dtype is torch.float32 and torch.arange(1.0, 4).tolist() == [1.0, 2.0, 3.0]
    assert len(torch.arange(0, 1, 0.1)) == 10 and len(torch.arange(1, 2.5, 0.5)) == 3
    assert torch.arange(3, dtype=torch.float64).dtype is torch.float64
    assert torch.arange(end=3).tolist() == [0, 1, 2] and torch.arange(1, end=3).tolist() == [1, 2]
    np.testing.assert_allclose(torch.arange(0, 1, 0.3).numpy(), [0.0, 0.3, 0.6, 0.9], rtol=1e-6)
    assert torch.linspace(-1, 1, 5).tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert torch.linspace(0, 1, 1).tolist() == [0.0] and torch.linspace(0, 1, 3, dtype=torch.float64).dtype is \
        torch.float64
    assert torch.linspace(0, 10, 5, dtype=torch.int64).tolist() == [0, 2, 5, 7, 10]
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 1, 0)


def test_random_factories_dtypes_and_ranges():
    r, n, i = torch.rand(10000), torch.randn(10000), torch.randint(-3, 3, (10000,))
    assert r.dtype is torch.float32 and float(r.min()) >= 0 and float(r.max()) < 1
    assert abs(float(n.mean())) < 0.05 and abs(float(n.std()) - 1) < 0.05
    assert i.dtype is torch.int64 and int(i.min()) == -3 and int(i.max()) == 2
    assert torch.randint(5, (2, 2)).shape == (2, 2)  # randint(high, size)
    assert torch.rand(2, dtype=torch.float64).dtype is torch.float64 and torch.randn((2, 3)).shape == (2, 3)
    assert torch.randn(3, dtype=torch.float16).dtype is torch.float16
    assert sorted(torch.randperm(6).tolist()) == list(range(6))


def test_manual_seed_and_generator_reproducibility():
    def draw():
        return (torch.rand(3), torch.randn(3), torch.randint(0, 100, (3,)), torch.randperm(5))
    torch.manual_seed(5)
    a = draw()
    torch.manual_seed(5)
    b = draw()
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    torch.manual_seed(6)
    assert not torch.equal(torch.rand(3), a[0])
    g = torch.Generator().manual_seed(7)
    x = torch.rand(3, generator=g)
    torch.rand(10)  # the default generator is separate
    g.manual_seed(7)
    assert torch.equal(torch.rand(3, generator=g), x) and g.initial_seed() == 7
    u = torch.empty(4, dtype=torch.float64).uniform_(generator=g.manual_seed(9))
    assert u.dtype is torch.float64 and not torch.equal(u, torch.empty(4, dtype=torch.float64).uniform_())
    assert torch.equal(torch.empty(4, dtype=torch.float64).uniform_(generator=g.manual_seed(9)), u)
    state = torch.get_rng_state()
    y = torch.randn(4)
    torch.set_rng_state(state)
    assert torch.equal(torch.randn(4), y)


def test_new_factories_take_self_dtype_and_device():
    x = torch.zeros(2, 3, dtype=torch.float64)
    assert x.new_zeros(2).dtype is torch.float64 and x.new_zeros(2).tolist() == [0.0, 0.0]
    assert x.new_ones((1, 2)).tolist() == [[1.0, 1.0]] and x.new_empty(3).shape == (3,)
    assert x.new_full((2,), 3.5).tolist() == [3.5, 3.5] and x.new_full((2,), 3.5).dtype is torch.float64
    assert x.new_tensor([1, 2]).dtype is torch.float64 and x.new_zeros(2, dtype=torch.int32).dtype is torch.int32
    assert x.new_ones(2, requires_grad=True).requires_grad


@pytest.mark.parametrize("fill,check", [
    (lambda t: t.uniform_(-2, 3), lambda v: v.min() >= -2 and v.max() < 3 and abs(v.mean() - 0.5) < 0.1),
    (lambda t: t.normal_(1.0, 2.0), lambda v: abs(v.mean() - 1.0) < 0.1 and abs(v.std() - 2.0) < 0.1),
    (lambda t: t.bernoulli_(0.3), lambda v: set(np.unique(v)) <= {0.0, 1.0} and abs(v.mean() - 0.3) < 0.03),
    (lambda t: t.exponential_(2.0), lambda v: v.min() >= 0 and abs(v.mean() - 0.5) < 0.05),
], ids=["uniform_", "normal_", "bernoulli_", "exponential_"])
def test_in_place_sampling(fill, check):
    torch.manual_seed(1)
    a = torch.empty(10000)
    assert fill(a) is a and a._version == 1 and a.dtype is torch.float32
    assert check(a.numpy())
    torch.manual_seed(1)
    assert torch.equal(fill(torch.empty(10000)), a)  # reproducible under manual_seed
    w = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        fill(w)
    with torch.no_grad():
        fill(w)
    assert w.requires_grad and w.is_leaf and w._version == 1
    y = w * 2
    fill(y)  # a non-leaf: its old history now gets a zero gradient
    y.sum().backward()
    assert w.grad.tolist() == [0.0, 0.0, 0.0]


def test_legacy_constructor():
    assert torch.Tensor([1, 2]).dtype is torch.float32 and torch.Tensor([1, 2]).tolist() == [1.0, 2.0]
    assert torch.Tensor(2, 3).shape == (2, 3)


# ------------------------------------------------------------------ dtypes and promotion

@pytest.mark.parametrize("make,expected", [
    (lambda: torch.tensor([1, 2]) + 1.5, "float32"),
    (lambda: torch.tensor([1, 2], dtype=torch.int32) + torch.tensor(1), "int32"),
    (lambda: torch.tensor([1, 2], dtype=torch.int32) + 1, "int32"),
    (lambda: torch.tensor([1, 2], dtype=torch.int32) + torch.tensor([1, 1]), "int64"),
    (lambda: torch.ones(2, dtype=torch.float16) + torch.tensor(1.0, dtype=torch.float64), "float16"),
    (lambda: torch.ones(2, dtype=torch.float16) + torch.ones(2), "float32"),
    (lambda: torch.ones(2, dtype=torch.float16) + 1.5, "float16"),
    (lambda: torch.ones(2, dtype=torch.bfloat16) + torch.ones(2, dtype=torch.float16), "float32"),
    (lambda: torch.ones(2, dtype=torch.bfloat16) * 3, "bfloat16"),
    (lambda: torch.tensor([1, 2]) + torch.tensor(1.0, dtype=torch.float64), "float64"),
    (lambda: torch.tensor([True]) + 1, "int64"),
    (lambda: torch.tensor([True]) + 1.5, "float32"),
    (lambda: torch.tensor([True]) + torch.tensor([True]), "bool"),
    (lambda: torch.tensor([True]) * torch.tensor([True]), "bool"),
    (lambda: torch.tensor([True]) & torch.tensor([False]), "bool"),
    (lambda: torch.tensor([2]) * True, "int64"),
    (lambda: torch.tensor([1], dtype=torch.int32) / torch.tensor([2], dtype=torch.int32), "float32"),
    (lambda: torch.ones(1, dtype=torch.float16) / 2, "float16"),
    (lambda: torch.tensor(1.0, dtype=torch.float64) + torch.tensor(1.0), "float64"),
    (lambda: torch.tensor(1) + 1.5, "float32"),
    (lambda: torch.tensor(1) * torch.ones(2, dtype=torch.float16), "float16"),
    (lambda: torch.tensor(1.0, dtype=torch.float16) * torch.ones(2, dtype=torch.int64), "float16"),
    (lambda: torch.ones(1, dtype=torch.uint8) + torch.ones(1, dtype=torch.int8), "int16"),
    (lambda: torch.tensor([1, 2]) < 1.5, "bool"),
    (lambda: torch.tensor([1, 2]).exp(), "float32"),
    (lambda: torch.tensor([-1, 2]).abs(), "int64"),
    (lambda: torch.tensor([1, 2], dtype=torch.int32).sum(), "int64"),
])
def test_type_promotion(make, expected):
    assert make().dtype.name == expected


def test_promote_types_and_result_type():
    assert torch.promote_types(torch.int32, torch.float16) is torch.float16
    assert torch.promote_types(torch.bfloat16, torch.float16) is torch.float32
    assert torch.result_type(torch.tensor([1, 2]), 1.0) is torch.float32
    assert torch.get_default_dtype() is torch.float32


def test_set_default_dtype_changes_python_float_inference():
    try:
        torch.set_default_dtype(torch.float64)
        assert torch.tensor([1.5]).dtype is torch.float64 and torch.zeros(1).dtype is torch.float64
        assert (torch.tensor([1]) * 0.5).dtype is torch.float64
        assert repr(torch.tensor([1.5])) == "tensor([1.5000])"
        assert repr(torch.tensor([1.5], dtype=torch.float32)) == "tensor([1.5000], dtype=torch.float32)"
    finally:
        torch.set_default_dtype(torch.float32)
    with pytest.raises(TypeError):
        torch.set_default_dtype(torch.int64)


def test_dtype_properties():
    assert torch.float16.is_floating_point and torch.bfloat16.is_floating_point
    assert not torch.int32.is_floating_point and not torch.bool.is_floating_point
    assert torch.int32.is_signed and not torch.bool.is_signed and not torch.uint8.is_signed
    assert torch.float32.itemsize == 4 and torch.bfloat16.itemsize == 2
    assert torch.float is torch.float32 and torch.double is torch.float64 and torch.half is torch.float16
    assert torch.long is torch.int64 and torch.int is torch.int32
    assert repr(torch.float16) == "torch.float16"


def test_reduced_precision_arithmetic():
    h = torch.tensor([1.0, 2.0], dtype=torch.float16) * 3 + 0.5
    assert h.dtype is torch.float16 and h.tolist() == [3.5, 6.5]
    b = torch.tensor([1.0, 2.0], dtype=torch.bfloat16) * 3 + 0.5
    assert b.dtype is torch.bfloat16 and b.float().tolist() == [3.5, 6.5]
    assert torch.tensor([1.7], dtype=torch.bfloat16).item() == pytest.approx(1.703125)


# ------------------------------------------------------------------ conversion

def test_casts():
    x = torch.tensor([1.7, -1.7])
    assert x.long().tolist() == [1, -1] and x.long().dtype is torch.int64
    assert x.int().dtype is torch.int32 and x.half().dtype is torch.float16 and x.double().dtype is torch.float64
    assert x.bfloat16().dtype is torch.bfloat16 and torch.tensor([0.0, 2.0]).bool().tolist() == [False, True]
    assert torch.tensor([1, 2]).float().tolist() == [1.0, 2.0]
    assert x.float() is x and x.to(torch.float32) is x  # no change: the same tensor, as in PyTorch
    assert x.to(torch.float32, copy=True) is not x
    assert x.to(torch.float64).dtype is torch.float64 and x.to("cpu") is x
    assert x.to("cpu", torch.int64).tolist() == [1, -1]
    assert x.to(torch.ones(1, dtype=torch.float16)).dtype is torch.float16
    assert x.to(dtype=torch.float64, device="cpu").dtype is torch.float64
    assert x.to("cpu", non_blocking=True).device.type == "cpu" and x.cpu() is x
    assert x.type() == "torch.FloatTensor" and x.type(torch.int64).dtype is torch.int64
    assert x.type_as(torch.ones(1, dtype=torch.float64)).dtype is torch.float64


def test_cast_gradients():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    # float32 on the way: a large eps keeps the finite differences above float32 rounding (exact for quadratics)
    assert gradcheck(lambda v: v.float().double() * v, (x,), eps=2 ** -6, atol=1e-4)
    half_trip = lambda v: v.to(torch.float32).to(torch.float64) * v.half().double()  # noqa: E731
    assert gradcheck(half_trip, (x,), eps=2 ** -6, atol=1e-3)  # eps is exact in half precision
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    z = y.double() * y.half().float()
    assert z.dtype is torch.float64 and z.grad_fn is not None
    z.sum().backward()
    assert y.grad.dtype is torch.float32 and y.grad.tolist() == [2.0, 4.0]
    assert not y.long().requires_grad and y.long().grad_fn is None  # integer results leave the graph


def test_item_tolist_numpy():
    assert torch.tensor([2.5]).item() == 2.5 and isinstance(torch.tensor(3).item(), int)
    assert torch.tensor(True).item() is True and isinstance(torch.tensor(1.5, dtype=torch.float16).item(), float)
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        torch.ones(2).item()
    assert torch.tensor([[1.5, 2.0]]).tolist() == [[1.5, 2.0]] and torch.tensor(3).tolist() == 3
    assert [type(v) for v in torch.tensor([1.0, 2.0], dtype=torch.float64).tolist()] == [float, float]
    assert torch.tensor([1.5], dtype=torch.bfloat16).tolist() == [1.5]
    x = torch.ones(2)
    a = x.numpy()
    a[0] = 7
    assert isinstance(a, np.ndarray) and x.tolist() == [7.0, 1.0]  # numpy() shares memory
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad. "
                                           r"Use tensor.detach\(\).numpy\(\) instead."):
        torch.ones(2, requires_grad=True).numpy()
    assert int(torch.tensor([2.7])) == 2 and float(torch.tensor(2)) == 2.0 and not bool(torch.tensor([0.0]))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(torch.ones(2))
    assert [0, 1, 2][torch.tensor(1)] == 1 and len(torch.ones(3, 2)) == 3
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(torch.tensor(1.0))


def test_metadata():
    x = torch.ones(2, 3)
    assert x.size() == (2, 3) and x.size(-1) == 3 and x.shape == (2, 3) and repr(x.shape) == "torch.Size([2, 3])"
    assert x.stride() == (3, 1) and x.numel() == 6 and x.dim() == 2 and x.ndim == 2
    assert torch.ones(2, dtype=torch.float16).element_size() == 2
    assert x.is_contiguous() and not x.t().is_contiguous() and x.is_floating_point()
    assert x.device.type == "cpu" and x.is_cpu and not x.is_cuda


# ------------------------------------------------------------------ repr

REPRS = [
    (lambda: torch.tensor([1.5, 2.0, -3.25]), "tensor([ 1.5000,  2.0000, -3.2500])"),
    (lambda: torch.tensor([1.0, 2.0, 3.0]), "tensor([1., 2., 3.])"),
    (lambda: torch.tensor([1.5, 2.0], dtype=torch.float64), "tensor([1.5000, 2.0000], dtype=torch.float64)"),
    (lambda: torch.tensor([1, -20, 300]), "tensor([  1, -20, 300])"),
    (lambda: torch.tensor([1, 2], dtype=torch.int32), "tensor([1, 2], dtype=torch.int32)"),
    (lambda: torch.tensor([True, False]), "tensor([ True, False])"),
    (lambda: torch.tensor(3.5), "tensor(3.5000)"),
    (lambda: torch.tensor([]), "tensor([])"),
    (lambda: torch.zeros(0, dtype=torch.int64), "tensor([], dtype=torch.int64)"),
    (lambda: torch.zeros(2, 0), "tensor([], size=(2, 0))"),
    (lambda: torch.ones(2, requires_grad=True), "tensor([1., 1.], requires_grad=True)"),
    (lambda: torch.ones(2, requires_grad=True) * 2, "tensor([2., 2.], grad_fn=<MulBackward0>)"),
    (lambda: torch.tensor([1e-5, 1.0, 1e5]), "tensor([1.0000e-05, 1.0000e+00, 1.0000e+05])"),
    (lambda: torch.tensor([1.0, 100000.0]), "tensor([1.0000e+00, 1.0000e+05])"),
    (lambda: torch.tensor([float("nan"), 1.0]), "tensor([nan, 1.])"),
    (lambda: torch.tensor([float("nan"), float("inf"), 1.5]), "tensor([   nan,    inf, 1.5000])"),
    (lambda: torch.arange(2000), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (lambda: torch.tensor([[1.0, 5.0], [3.0, 2.0]]).max(1),
     "torch.return_types.max(\nvalues=tensor([5., 3.]),\nindices=tensor([1, 0]))"),
    (lambda: torch.arange(6.0).reshape(2, 3), "tensor([[0., 1., 2.],\n        [3., 4., 5.]])"),
]


@pytest.mark.parametrize("make,expected", REPRS, ids=[str(i) for i in range(len(REPRS))])
def test_repr_like_pytorch(make, expected):
    assert repr(make()) == expected


# ------------------------------------------------------------------ requires_grad rules

def test_requires_grad_rules():
    x = torch.ones(2)
    assert x.requires_grad_() is x and x.requires_grad and x.is_leaf and x.grad_fn is None
    x.requires_grad = False
    assert not x.requires_grad
    y = torch.ones(2, requires_grad=True) * 2
    assert y.requires_grad and not y.is_leaf
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ones(2, dtype=torch.int64, requires_grad=True)
    with torch.no_grad():
        z = y * 2
    assert not z.requires_grad and z.grad_fn is None
    d = y.detach()
    assert not d.requires_grad and d.is_leaf
    assert torch.ones(2, requires_grad=True).clone().grad_fn.name() == "CloneBackward0"
    assert (torch.ones(2) * torch.ones(2, requires_grad=True)).requires_grad


def test_detach_and_clone_memory():
    x = torch.ones(2, requires_grad=True)
    d = x.detach()
    d[0] = 3.0
    assert x.tolist() == [3.0, 1.0]
    c = x.clone()
    c.data[0] = 5.0
    assert x.tolist() == [3.0, 1.0]


# ------------------------------------------------------------------ version counter

def test_version_counter_counts_in_place_ops_and_is_shared_with_views():
    x = torch.ones(4)
    assert x._version == 0
    x.add_(1)
    x.mul_(2)
    x.zero_()
    assert x._version == 3
    v = x[1:]
    v.fill_(2)
    v.copy_(torch.zeros(3))
    assert x._version == 5 and v._version == 5 and x.tolist() == [0.0, 0.0, 0.0, 0.0]
    x.detach().sub_(1)  # detach shares the counter
    assert x._version == 6
    x.data.add_(1)  # .data does not
    assert x._version == 6
    x += 1
    assert x._version == 7


def test_modified_saved_tensor_is_detected():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.sin()  # saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been modified "
                                           "by an inplace operation"):
        z.sum().backward()
    x2 = torch.tensor([1.0, 2.0], requires_grad=True)
    y2 = x2 * 2
    z2 = y2.sin()
    y2.detach().zero_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z2.sum().backward()
    x3 = torch.tensor([1.0, 2.0], requires_grad=True)
    y3 = x3 * 2
    z3 = y3.sin()
    y3.data.zero_()  # invisible to autograd, as in PyTorch
    z3.sum().backward()
    assert x3.grad.tolist() == [2.0, 2.0]


# ------------------------------------------------------------------ in-place ops

def test_in_place_ops_return_self_and_compute():
    x = torch.tensor([1.0, 2.0])
    assert x.add_(1) is x and x.tolist() == [2.0, 3.0]
    assert x.sub_(torch.tensor([1.0, 1.0]), alpha=2).tolist() == [0.0, 1.0]
    assert x.add_(torch.tensor([2.0, 2.0]), alpha=3).tolist() == [6.0, 7.0]
    assert x.mul_(2).tolist() == [12.0, 14.0] and x.div_(4).tolist() == [3.0, 3.5]
    assert x.pow_(2).tolist() == [9.0, 12.25] and x.clamp_(10, 12).tolist() == [10.0, 12.0]
    assert x.neg_().tolist() == [-10.0, -12.0] and x.relu_().tolist() == [0.0, 0.0]
    assert x.fill_(3).tolist() == [3.0, 3.0] and x.zero_().tolist() == [0.0, 0.0]
    assert x.copy_(torch.tensor([4, 5])).tolist() == [4.0, 5.0] and x.dtype is torch.float32
    assert x.sigmoid_().tolist() == pytest.approx([0.98201, 0.99331], rel=1e-4)
    m = torch.zeros(3).masked_fill_(torch.tensor([True, False, True]), 2.0)
    assert m.tolist() == [2.0, 0.0, 2.0]
    y = torch.ones(2)
    alias = y
    y += 1
    y *= 3
    y -= 1
    y /= 5
    assert alias is y and y.tolist() == [1.0, 1.0]


def test_in_place_operators_modify_the_tensor_itself():
    m = torch.tensor([True, False])
    alias = m
    m |= torch.tensor([False, True])
    m &= torch.tensor([True, False])
    m ^= True
    assert alias is m and m.tolist() == [False, True] and m._version == 3
    i = torch.tensor([6, 7])
    alias = i
    i //= 2
    i %= 2
    i &= 5
    assert alias is i and i.tolist() == [1, 1] and i.dtype is torch.int64
    f = torch.tensor([5.5])
    f //= 2
    assert f.tolist() == [2.0]
    f.remainder_(1.5).floor_divide_(0.25)
    assert f.tolist() == [2.0]
    with pytest.raises(NotImplementedError, match="\"bitwise_and_cpu\" not implemented for 'Float'"):
        f &= 1


def test_fill_zero_copy_semantics():
    assert torch.ones(3, dtype=torch.int64).fill_(2.7).tolist() == [2, 2, 2]
    assert torch.zeros(2).fill_(torch.tensor(3.0)).tolist() == [3.0, 3.0]
    assert torch.zeros(2, dtype=torch.bool).fill_(1).tolist() == [True, True]
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor but got tensor with 1 "
                                           "dimensions."):
        torch.ones(3).fill_(torch.ones(2))
    c = torch.zeros(2, 3, dtype=torch.float64).copy_(torch.tensor([1, 2, 3]))  # broadcasts and casts
    assert c.dtype is torch.float64 and c.tolist() == [[1.0, 2.0, 3.0]] * 2
    assert torch.zeros(2, dtype=torch.int64).copy_(torch.tensor([1.7, -2.7])).tolist() == [1, -2]
    assert torch.zeros(2, 3).copy_(torch.arange(2.0).reshape(2, 1)).tolist() == [[0.0] * 3, [1.0] * 3]
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size of tensor b \(4\) at "
                                           r"non-singleton dimension 0$"):
        torch.zeros(3).copy_(torch.zeros(4))
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        torch.zeros(3).copy_(torch.zeros(2, 3))
    with pytest.raises(TypeError):
        torch.zeros(3).copy_([1.0, 2.0, 3.0])


def test_in_place_errors_match_pytorch():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        torch.ones(2, requires_grad=True).mul_(2)
    for op in (lambda t: t.fill_(1), lambda t: t.zero_(), lambda t: t.copy_(torch.zeros(2)), lambda t: t.clamp_(0)):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            op(torch.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation."):
        torch.ones(2, requires_grad=True)[0].mul_(2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.tensor([1, 2]).div_(2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        torch.tensor([1, 2]).mul_(torch.tensor([1.5, 1.5]))
    with pytest.raises(RuntimeError, match="result type Long can't be cast to the desired output type Bool"):
        torch.tensor([True]).add_(1)
    with pytest.raises(RuntimeError, match=r"output with shape \[2\] doesn't match the broadcast shape \[2, 2\]"):
        torch.ones(2).add_(torch.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"^The size of tensor a \(3\) must match the size of tensor b \(4\) at "
                                           r"non-singleton dimension 0$"):
        torch.ones(3).add_(torch.ones(4))
    h = torch.ones(2, dtype=torch.float16).add_(torch.ones(2, dtype=torch.float64))
    assert h.dtype is torch.float16 and h.tolist() == [2.0, 2.0]


def test_in_place_on_leaf_under_no_grad_is_allowed():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        x.mul_(2)
        x.add_(1)
        x.zero_()
        x.fill_(4)
        x.copy_(torch.tensor([1.0, 2.0]))
    assert x.requires_grad and x.is_leaf and x.tolist() == [1.0, 2.0] and x._version == 5


def _inplace_chain(v):
    y = v * 1
    y.mul_(3).add_(v).div_(2).sub_(0.25).pow_(2)
    return y


IN_PLACE_GRAD = {
    "chain": _inplace_chain,
    "add_tensor": lambda v: (v * 1).add_(v.flip(0), alpha=2),
    "mul_self_clone": lambda v: (v * 1).mul_(v.clone()),
    "clamp_": lambda v: (v * 1).clamp_(-0.5, 0.5),
    "relu_": lambda v: (v * 1).relu_(),
    "sigmoid_": lambda v: (v * 1).sigmoid_(),
    "exp_": lambda v: (v * 1).exp_(),
    "masked_fill_": lambda v: (v * 1).masked_fill_(torch.tensor([True, False, False, True]), 0.0),
    "zero_then_add": lambda v: (v * 1).zero_().add_(v * v),
    "fill_then_mul": lambda v: (v * 3).fill_(2.0).mul_(v),
    "copy_into_nonleaf": lambda v: (v * 3).copy_(v.sin()),
    "copy_into_plain": lambda v: torch.zeros(2, 4, dtype=torch.float64).copy_(v.cos()),
    "add_into_plain": lambda v: torch.zeros(4, dtype=torch.float64).add_(v * 2),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE_GRAD))
def test_in_place_ops_gradcheck(name):
    x = torch.tensor([-0.8, -0.3, 0.2, 0.7], dtype=torch.float64, requires_grad=True)
    assert gradcheck(IN_PLACE_GRAD[name], (x,))


def test_fill_with_tensor_value_and_copy_gradients():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = torch.tensor(2.0, requires_grad=True)
    y = x * 2
    y.fill_(s)
    assert y.grad_fn is not None
    (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0] and s.grad.item() == 6.0
    a = torch.tensor([1.0, 1.0], requires_grad=True)
    src = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
    b = a * 1
    b.copy_(src)  # broadcast and cast: the gradient is summed and cast back for src
    assert b.dtype is torch.float32 and b.grad_fn.name() == "CopyBackwards"
    (b * torch.tensor([1.0, 2.0])).sum().backward()
    assert a.grad.tolist() == [0.0, 0.0] and src.grad.dtype is torch.float64 and src.grad.tolist() == [3.0]


def test_in_place_with_grad_on_a_tensor_that_did_not_require_it_starts_recording():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.zeros(2)
    y.add_(x * 3)
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


@pytest.mark.parametrize("op", [
    lambda y, t: y.clamp_(min=t),
    lambda y, t: y.clamp_(max=t * -1),
    lambda y, t: y.addcmul_(t, t, value=0.5),
    lambda y, t: y.addcdiv_(t, t + 2),
    lambda y, t: y.lerp_(t, 0.25),
    lambda y, t: y.masked_fill_(torch.tensor([True, False, True]), t.sum()),
    lambda y, t: y.add_(t),
    lambda y, t: y.mul_(t),
    lambda y, t: y.copy_(t),
    lambda y, t: y.fill_(t[0]),
], ids=["clamp_min", "clamp_max", "addcmul", "addcdiv", "lerp", "masked_fill", "add", "mul", "copy", "fill"])
def test_in_place_op_with_a_grad_argument_records_into_a_plain_tensor(op):
    def fn(t):
        y = torch.tensor([0.3, -0.2, 0.8], dtype=torch.float64)
        out = op(y, t)
        assert out is y and y.requires_grad and y.grad_fn is not None
        return y
    t = torch.tensor([0.5, 0.1, 0.4], dtype=torch.float64, requires_grad=True)
    assert gradcheck(fn, (t,))


def test_top_level_helpers():
    a = torch.tensor([1.0, 2.0, float("nan")])
    b = torch.tensor([1.0, 2.0 + 1e-7, float("nan")])
    assert not torch.allclose(a, b) and torch.allclose(a, b, equal_nan=True)
    assert torch.allclose(torch.ones(2, 3), torch.ones(3))  # broadcasts, as in PyTorch
    assert not torch.allclose(torch.ones(2), torch.tensor([1.0, 1.1]), rtol=0.01)
    assert torch.isclose(a, b).tolist() == [True, True, False] and torch.isclose(a, b).dtype is torch.bool
    assert torch.equal(torch.ones(2), torch.ones(2)) and not torch.equal(torch.ones(2), torch.ones(3))
    assert not torch.equal(torch.ones(2), torch.tensor([1.0, 0.0]))
    assert torch.is_tensor(torch.ones(1)) and not torch.is_tensor(np.ones(1)) and torch.numel(torch.ones(2, 3)) == 6
    assert torch.get_num_threads() >= 1
    assert a.allclose(b, equal_nan=True) and a.isclose(b).tolist() == [True, True, False]
    assert a.equal(a.clone()) is False  # nan != nan
    assert torch.ones(2).equal(torch.ones(2))


def test_set_num_threads_sets_the_kernels_thread_count():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.get_num_threads() == 1
        x = torch.randn(300, 200, requires_grad=True)  # large enough that two threads would split it
        y = torch.nn.functional.gelu(x).softmax(-1)
        torch.set_num_threads(2)
        np.testing.assert_allclose(torch.nn.functional.gelu(x).softmax(-1).detach().numpy(), y.detach().numpy(),
                                   rtol=1e-6, atol=1e-7)
        for bad in (0, -1):
            with pytest.raises(RuntimeError, match="set_num_threads expects a positive integer"):
                torch.set_num_threads(bad)
    finally:
        torch.set_num_threads(before)
